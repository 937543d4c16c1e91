// Figures as people read them, shared by the CLI's reports.
#pragma once

#include <string>

namespace flashport::app {

// "512.0 KiB", "1.5 MiB", "13.20 GiB".
std::string human_bytes(double bytes);

}  // namespace flashport::app
