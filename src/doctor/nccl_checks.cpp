// nccl.*: the NCCL variables that break or slow multi-GPU runs (RCCL reads the same names). Unset is ok:
// NCCL's defaults are right on a single machine.
#include <algorithm>
#include <sstream>

#include "doctor/checks.h"

namespace flashport::doctor {
namespace {

// NCCL_SOCKET_IFNAME: comma-separated prefixes ("eth" matches eth0); a leading ^ makes them exclusions,
// a leading = makes them exact names (^= both).
void socket_ifname_check(const Inputs& in, const Host& host, Checks& out) {
    const std::optional<std::string> value = env_value(in, "NCCL_SOCKET_IFNAME");
    if (!value) {
        out.ok("nccl.socket_ifname", "NCCL_SOCKET_IFNAME unset: NCCL picks an interface");
        return;
    }
    const std::string shown = "NCCL_SOCKET_IFNAME=" + *value;
    std::string spec = *value;
    const bool exclude = spec.rfind('^', 0) == 0;
    if (exclude) spec.erase(0, 1);
    const bool exact = spec.rfind('=', 0) == 0;
    if (exact) spec.erase(0, 1);
    std::vector<std::string> names;
    std::stringstream list(spec);
    for (std::string n; std::getline(list, n, ',');)
        if (!n.empty()) names.push_back(n);
    const std::vector<std::string> present = host.list("sys/class/net");
    const std::string have = "interfaces here: " + (present.empty() ? "none" : join(present));
    const auto matches = [&](const std::string& iface, const std::string& n) {
        return exact ? iface == n : iface.rfind(n, 0) == 0;
    };
    std::vector<std::string> left;  // what NCCL may use
    for (const std::string& iface : present) {
        const bool named =
            std::any_of(names.begin(), names.end(), [&](const std::string& n) { return matches(iface, n); });
        if (named != exclude) left.push_back(iface);
    }
    std::vector<std::string> unmatched;
    for (const std::string& n : names)
        if (std::none_of(present.begin(), present.end(), [&](const std::string& i) { return matches(i, n); }))
            unmatched.push_back(n);
    const std::string fix = "set NCCL_SOCKET_IFNAME to one of the interfaces here (ip -br link), or unset it";
    if (left.empty())
        out.add("nccl.socket_ifname", Status::FAIL, shown + " leaves NCCL no interface; " + have, fix);
    else if (!unmatched.empty() && !exclude)
        out.add("nccl.socket_ifname", Status::WARN,
                shown + ": no interface matches " + join(unmatched) + "; NCCL uses " + join(left), fix);
    else
        out.ok("nccl.socket_ifname", shown + ": NCCL may use " + join(left));
}

void p2p_check(const Inputs& in, Checks& out) {
    const std::optional<std::string> v = env_value(in, "NCCL_P2P_DISABLE");
    if (!v || *v == "0" || v->empty())
        out.ok("nccl.p2p_disable", v ? "NCCL_P2P_DISABLE=" + *v : "NCCL_P2P_DISABLE unset: GPUs copy peer to peer");
    else
        out.add("nccl.p2p_disable", Status::WARN,
                "NCCL_P2P_DISABLE=" + *v + ": GPU-to-GPU traffic goes through host memory, slowing multi-GPU runs",
                "unset NCCL_P2P_DISABLE; if peer copies hang without it, fix the IOMMU/ACS settings instead");
}

void debug_check(const Inputs& in, Checks& out) {
    const std::optional<std::string> v = env_value(in, "NCCL_DEBUG");
    out.ok("nccl.debug",
           v ? "NCCL_DEBUG=" + *v : "NCCL_DEBUG unset (NCCL_DEBUG=INFO shows NCCL's choices when a run hangs)");
}

// PyTorch 2.2 renamed its NCCL switches to TORCH_NCCL_*; the old names still work but are deprecated.
void timeouts_check(const Inputs& in, Checks& out) {
    std::vector<std::string> set;
    for (const char* name : {"NCCL_TIMEOUT", "TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                             "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "NCCL_BLOCKING_WAIT", "NCCL_ASYNC_ERROR_HANDLING"})
        if (const auto v = env_value(in, name)) set.push_back(std::string(name) + "=" + *v);
    std::vector<std::string> old;
    for (const char* name : {"NCCL_BLOCKING_WAIT", "NCCL_ASYNC_ERROR_HANDLING"})
        if (env_value(in, name)) old.push_back(name);
    const std::string found = set.empty() ? "no timeout variable set (PyTorch's defaults)" : join(set);
    if (old.empty())
        out.ok("nccl.timeouts", found);
    else
        out.add("nccl.timeouts", Status::WARN, found + ": " + join(old) + " deprecated",
                "use the TORCH_NCCL_ names: " + join(old, ", ") + " -> TORCH_" + join(old, ", TORCH_"));
}

}  // namespace

void nccl_checks(const Inputs& in, const Host& host, Checks& out) {
    socket_ifname_check(in, host, out);
    p2p_check(in, out);
    debug_check(in, out);
    timeouts_check(in, out);
}

}  // namespace flashport::doctor
