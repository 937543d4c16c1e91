// rocm.*: the AMD GPU driver (KFD topology), who may open /dev/kfd and /dev/dri/renderD*, the video and
// render groups, and HSA_OVERRIDE_GFX_VERSION against the real chip. All read under the root (host.h),
// so they are tested on fake machine trees.
#include <algorithm>

#include "doctor/checks.h"

namespace flashport::doctor {
namespace {

// The targets ROCm's own libraries ship code for (ROCm 6.x), for machines whose flashport build is not
// HIP (PyTorch on ROCm is the usual user of an override).
const std::vector<std::string> ROCM_TARGETS{"gfx900", "gfx906",  "gfx908",  "gfx90a",  "gfx940", "gfx941",
                                            "gfx942", "gfx1030", "gfx1100", "gfx1101", "gfx1102"};

// Chips that may share code objects: RDNA's gfx10.3 / gfx11.0 generations share an ISA per major.minor,
// which is why overriding gfx1031 to 10.3.0 works; each gfx9 chip has its own (gfx906 lacks gfx908's
// MFMA, gfx90a's packed FP32), so there the whole name is the family.
std::string family(const std::string& gfx) {
    if (gfx.rfind("gfx", 0) != 0 || gfx.size() < 6) return gfx;
    const std::string digits = gfx.substr(3);
    const std::string major = digits.substr(0, digits.size() - 2);
    return major == "9" ? gfx : "gfx" + major + digits[digits.size() - 2] + "x";
}

// The groups the identity lacks; when it has them all, the node's mode shuts its group out and only a
// udev rule (ROCm's packages install one) helps.
std::string usermod_fix(const Host& host) {
    std::vector<std::string> groups;
    for (const char* g : {"render", "video"}) {
        const std::optional<uint32_t> gid = host.group_id(g);
        if (!gid || !host.in_group(*gid)) groups.push_back(g);
    }
    if (groups.empty())
        return "give the nodes to group render, mode 0660: a udev rule such as "
               "KERNEL==\"kfd\", GROUP=\"render\", MODE=\"0660\"";
    return "sudo usermod -aG " + join(groups, ",") + " " + host.user + ", then log in again (or run newgrp " +
           groups.front() + ")";
}

std::string no_node_fix(const Host& host, const std::string& device) {
    if (!host.container.empty()) return "start the container with --device=" + device + " (container.gpu_devices)";
    return "load the amdgpu driver with ROCm's KFD: sudo modprobe amdgpu (kernel 5.x+ or amdgpu-dkms)";
}

void driver_check(const Host& host, Checks& out) {
    std::vector<std::string> gpus;
    for (const AmdGpu& g : host.amd_gpus) gpus.push_back(g.arch + " (node " + g.node + ")");
    if (!gpus.empty())
        out.ok("rocm.driver", "KFD topology: " + std::to_string(gpus.size()) + " GPU(s): " + join(gpus));
    else if (host.kfd_topology)
        out.add("rocm.driver", Status::FAIL, "the KFD topology lists CPU nodes only: amdgpu brought up no GPU",
                "read why in dmesg | grep -i amdgpu (firmware, an unsupported chip, or a kernel too old)");
    else
        out.add("rocm.driver", Status::FAIL, "an AMD GPU is present but /sys/class/kfd is missing (no KFD)",
                "use a kernel whose amdgpu has KFD (CONFIG_HSA_AMD), or install amdgpu-dkms");
}

void kfd_check(const Host& host, Checks& out) {
    const NodeAccess kfd = host.access("dev/kfd");
    if (!kfd.exists)
        out.add("rocm.kfd_access", Status::FAIL, "no /dev/kfd", no_node_fix(host, "/dev/kfd"));
    else if (!kfd.allowed)
        out.add("rocm.kfd_access", Status::FAIL, "/dev/kfd cannot be opened read-write (" + kfd.how + ")",
                usermod_fix(host));
    else
        out.ok("rocm.kfd_access", "/dev/kfd read-write " + kfd.how);
}

// /dev/dri/renderD128, ...: the nodes ROCm opens (the cardN nodes are for display).
std::vector<std::string> render_nodes(const Host& host) {
    std::vector<std::string> names;
    for (const std::string& name : host.list("dev/dri"))
        if (name.rfind("renderD", 0) == 0) names.push_back(name);
    return names;
}

void render_check(const Host& host, Checks& out) {
    std::vector<std::string> ok, denied;
    const std::vector<std::string> names = render_nodes(host);
    for (const std::string& n : names) {
        const NodeAccess a = host.access("dev/dri/" + n);
        (a.allowed ? ok : denied).push_back(n + " (" + a.how + ")");
    }
    if (names.empty())
        out.add("rocm.render_access", Status::FAIL, "no /dev/dri/renderD* node", no_node_fix(host, "/dev/dri"));
    else if (!denied.empty())
        out.add("rocm.render_access", Status::FAIL, "cannot open read-write: " + join(denied), usermod_fix(host));
    else
        out.ok("rocm.render_access", "read-write: " + join(ok));
}

// Membership decides access for a normal user; root, and nodes a udev rule opened to all, need none,
// so a missing group fails only where it is what blocks access.
void groups_check(const Host& host, Checks& out) {
    std::vector<std::string> in, missing;
    for (const char* g : {"video", "render"})
        if (const auto gid = host.group_id(g)) (host.in_group(*gid) ? in : missing).push_back(g);
    if (in.empty() && missing.empty()) {
        out.add("rocm.groups", Status::WARN, "neither a video nor a render group in /etc/group",
                "install ROCm's packages, which create them (or: sudo groupadd render)");
        return;
    }
    const std::string found =
        "member of: " + (in.empty() ? "none" : join(in)) + (missing.empty() ? "" : "; not of: " + join(missing));
    if (missing.empty()) {
        out.ok("rocm.groups", found);
        return;
    }
    bool blocked = !host.access("dev/kfd").allowed;
    for (const std::string& n : render_nodes(host)) blocked = blocked || !host.access("dev/dri/" + n).allowed;
    const bool root = host.identity.known && host.identity.uid == 0;
    if (!blocked || root)
        out.ok("rocm.groups", found + (root ? " (root needs none)" : " (enough: the GPU nodes open read-write)"));
    else
        out.add("rocm.groups", Status::FAIL, found, usermod_fix(host));
}

void override_check(const Inputs& in, const Host& host, Checks& out) {
    const std::optional<std::string> value = env_value(in, "HSA_OVERRIDE_GFX_VERSION");
    if (!value) {
        out.ok("rocm.hsa_override", "HSA_OVERRIDE_GFX_VERSION unset");
        return;
    }
    const std::string shown = "HSA_OVERRIDE_GFX_VERSION=" + *value;
    const std::optional<std::string> as = gfx_of_override(*value);
    if (!as) {
        out.add("rocm.hsa_override", Status::FAIL, shown + " is not a version such as 10.3.0",
                "unset HSA_OVERRIDE_GFX_VERSION");
        return;
    }
    if (host.amd_gpus.empty()) {
        out.add("rocm.hsa_override", Status::WARN, shown + " (" + *as + "), but KFD lists no AMD GPU",
                "unset HSA_OVERRIDE_GFX_VERSION");
        return;
    }
    const std::vector<std::string>& native = in.runtime.backend == "HIP" ? in.runtime.build_archs : ROCM_TARGETS;
    Status worst = Status::OK;
    std::vector<std::string> notes;
    for (const AmdGpu& g : host.amd_gpus) {
        Status s = Status::OK;
        std::string note = g.arch + " runs as " + *as + ", whose code it shares";
        if (g.arch == *as) {
            s = Status::WARN;
            note = g.arch + " is " + *as + " already: the override does nothing";
        } else if (family(g.arch) != family(*as)) {
            s = Status::FAIL;
            note = g.arch + " is not in " + *as + "'s family: its code objects fault or hang there";
        } else if (std::find(native.begin(), native.end(), g.arch) != native.end()) {
            s = Status::WARN;
            note = g.arch + " has native code; the override swaps it for " + *as + "'s";
        }
        if (int(s) > int(worst)) worst = s;  // OK < WARN < FAIL
        notes.push_back(note);
    }
    out.add("rocm.hsa_override", worst, shown + ": " + join(notes),
            "unset HSA_OVERRIDE_GFX_VERSION (export -n HSA_OVERRIDE_GFX_VERSION)");
}

}  // namespace

std::vector<std::string> effective_amd_archs(const Inputs& in, const Host& host) {
    const std::optional<std::string> value = env_value(in, "HSA_OVERRIDE_GFX_VERSION");
    const std::optional<std::string> as = value ? gfx_of_override(*value) : std::nullopt;
    std::vector<std::string> archs;
    for (const AmdGpu& g : host.amd_gpus) archs.push_back(as ? *as : g.arch);
    return archs;
}

void rocm_checks(const Inputs& in, const Host& host, Checks& out) {
    if (!host.rocm()) {
        const std::string why =
            "no AMD GPU driver here (no /sys/class/kfd, no AMD card in /sys/class/drm, no /dev/kfd)";
        for (const char* id : {"rocm.driver", "rocm.kfd_access", "rocm.render_access", "rocm.groups"})
            out.skip(id, why);
        // The variable still matters to whoever copies this environment to an AMD machine.
        override_check(in, host, out);
        return;
    }
    driver_check(host, out);
    kfd_check(host, out);
    render_check(host, out);
    groups_check(host, out);
    override_check(in, host, out);
}

}  // namespace flashport::doctor
