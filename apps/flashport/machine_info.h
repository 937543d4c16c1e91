// What the machine is and which kernels and libraries flashport will use on it: printed at the top
// of every benchmark and by `flashport doctor`, so a figure always says where it came from.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "flashport/tensor.h"

namespace flashport::app {

nlohmann::json machine_info_json(Device device);
void print_machine_info(Device device);
int64_t available_host_memory();  // MemAvailable in bytes; a large number when unknown

}  // namespace flashport::app
