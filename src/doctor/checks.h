// The check groups run_checks calls in report order, one file each, and what they share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "doctor/doctor.h"
#include "doctor/host.h"

namespace flashport::doctor {

// Appends checks to a report; the group is the id's first part.
class Checks {
public:
    explicit Checks(std::vector<Check>& out) : out_(out) {}
    void add(const std::string& id, Status status, const std::string& found, const std::string& fix = "");
    void ok(const std::string& id, const std::string& found) { add(id, Status::OK, found); }
    void skip(const std::string& id, const std::string& found) { add(id, Status::SKIP, found); }

private:
    std::vector<Check>& out_;
};

void gpu_checks(const Inputs& in, const Host& host, Checks& out);             // gpu_checks.cpp
void visible_device_checks(const Inputs& in, const Host& host, Checks& out);  // visible_devices.cpp
void build_checks(const Inputs& in, const Host& host, Checks& out);           // build_checks.cpp
void rocm_checks(const Inputs& in, const Host& host, Checks& out);            // rocm_checks.cpp
void container_checks(const Inputs& in, const Host& host, Checks& out);       // container_checks.cpp
void nccl_checks(const Inputs& in, const Host& host, Checks& out);            // nccl_checks.cpp
void cpu_checks(const Inputs& in, const Host& host, Checks& out);             // cpu_checks.cpp
void model_checks(const Inputs& in, const Host& host, Checks& out);           // model_checks.cpp

// The gfx arch each AMD GPU runs as: the KFD topology's, or HSA_OVERRIDE_GFX_VERSION's when it is set
// and valid (the runtime then loads that target's code). Empty without KFD GPUs.
std::vector<std::string> effective_amd_archs(const Inputs& in, const Host& host);

// "1.50 GiB", "64.0 MiB", "12.0 KiB", "100 bytes"
std::string size_text(int64_t bytes);
// "a, b, c"
std::string join(const std::vector<std::string>& parts, const std::string& sep = ", ");
// The environment variable's value, or nullopt when unset (set-but-empty is a value).
std::optional<std::string> env_value(const Inputs& in, const std::string& name);

}  // namespace flashport::doctor
