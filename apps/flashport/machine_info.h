// What the machine is and which kernels and libraries flashport will use on it: printed at the top
// of every benchmark, so a figure always says where it came from (`flashport doctor` checks the machine).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "flashport/tensor.h"

namespace flashport::app {

nlohmann::json machine_info_json(Device device);
void print_machine_info(Device device);

}  // namespace flashport::app
