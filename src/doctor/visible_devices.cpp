// gpu.rocr_visible_devices, gpu.hip_visible_devices, gpu.cuda_visible_devices: the lists that hide GPUs
// from the runtimes, compared with the GPUs the machine has (KFD's nodes, /dev/nvidiaN). The runtime's
// own count is no use here: it is already filtered by these lists.
//
// ROCR_VISIBLE_DEVICES filters first; HIP_VISIBLE_DEVICES (and CUDA_VISIBLE_DEVICES, which HIP also
// reads) index what ROCR left. An empty list, or -1, hides every GPU.
#include <algorithm>
#include <sstream>

#include "doctor/checks.h"

namespace flashport::doctor {
namespace {

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool is_index(const std::string& s) {
    return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// `count`: the GPUs this list indexes, -1 when none were found to compare against. Returns the GPUs
// the list leaves visible (-1: unknown).
int check_list(const Inputs& in, const std::string& name, int count, Checks& out) {
    const std::string id = "gpu." + [&] {
        std::string lower;
        for (char c : name) lower += char(std::tolower(static_cast<unsigned char>(c)));
        return lower;
    }();
    const std::optional<std::string> value = env_value(in, name);
    if (!value) {
        out.ok(id, "unset: every GPU visible");
        return count;
    }
    const std::string shown = name + "='" + *value + "'";
    const std::string range = count > 0 ? "0-" + std::to_string(count - 1) : "";
    std::vector<std::string> entries;
    std::stringstream list(*value);
    for (std::string e; std::getline(list, e, ',');) entries.push_back(trim(e));
    if (trim(*value).empty() || (!entries.empty() && entries.front().rfind('-', 0) == 0)) {
        out.add(id, count > 0 ? Status::FAIL : Status::WARN,
                shown + " hides every GPU" + (count > 0 ? " (" + std::to_string(count) + " found)" : ""),
                "unset " + name + (count > 0 ? ", or list the GPUs to use (" + range + ")" : ""));
        return 0;
    }
    if (count <= 0) {
        out.ok(id, shown + (count < 0 ? " (no GPU found to compare it with)" : " (no GPU left to index)"));
        return -1;
    }
    std::vector<std::string> bad;
    int valid = 0, others = 0;
    for (const std::string& e : entries) {
        if (!is_index(e))
            ++others;  // a UUID (GPU-..., or ROCR's serial form): not checked here
        else if (std::stoi(e) >= count)
            bad.push_back(e);
        else
            ++valid;
    }
    const int visible = valid + others;
    if (bad.empty()) {
        out.ok(id, shown + ": " + std::to_string(visible) + " of the " + std::to_string(count) + " GPU(s)");
        return visible;
    }
    // CUDA stops reading the list at the first index that names no GPU; either way it is a mistake.
    out.add(id, visible == 0 ? Status::FAIL : Status::WARN,
            shown + ": no GPU has index " + join(bad) + " (" + std::to_string(count) + " found: " + range + ")" +
                (visible == 0 ? ", so none is visible" : ""),
            "set " + name + " to indices in " + range + ", or unset it");
    return visible;
}

}  // namespace

void visible_device_checks(const Inputs& in, const Host& host, Checks& out) {
    const int amd = host.amd_gpus.empty() ? -1 : int(host.amd_gpus.size());
    const int left_by_rocr = check_list(in, "ROCR_VISIBLE_DEVICES", amd, out);
    const int hip_count = amd < 0 ? -1 : left_by_rocr;
    check_list(in, "HIP_VISIBLE_DEVICES", hip_count, out);
    const int cuda_count = !host.nvidia_nodes.empty() ? int(host.nvidia_nodes.size()) : hip_count;
    check_list(in, "CUDA_VISIBLE_DEVICES", cuda_count, out);
}

}  // namespace flashport::doctor
