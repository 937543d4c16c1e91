// The machine as files under a root: who we are (ROOT/proc/self/status, ROOT/etc/group), the AMD GPUs
// KFD lists, the device nodes and who may open them, and whether this is a container. Read once by
// run_checks and shared by the check groups.
//
// Access to a device node is decided from stat()'s mode, owner and group against the identity in
// ROOT/proc/self/status, never access(): on a fake machine the answer then depends on the files the
// test wrote, not on the user running it (CI runs as root, and root may open anything).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace flashport::doctor {

struct Identity {
    bool known = false;  // ROOT/proc/self/status had Uid: and Gid: lines
    uint32_t uid = 0, gid = 0;
    std::vector<uint32_t> groups;  // supplementary (Groups:)
};

struct NodeAccess {
    bool exists = false;
    bool allowed = false;  // read and write, as the kernel would decide for the identity
    std::string how;       // "owner", "group render", "others", "root", or why not: "mode 0660, group render"
    std::string group;     // the node's group name (or its number)
};

struct AmdGpu {
    std::string node;  // the KFD topology node's folder name: "1"
    std::string arch;  // "gfx906", from gfx_target_version
};

struct Host {
    std::filesystem::path root;
    Identity identity;
    std::map<uint32_t, std::string> group_names;  // ROOT/etc/group
    std::string user;                             // ROOT/etc/passwd's name for the uid, else "$USER"
    bool kfd_topology = false;                    // ROOT/sys/class/kfd/kfd/topology/nodes exists
    std::vector<AmdGpu> amd_gpus;                 // KFD nodes whose gfx_target_version is not 0, in node order
    bool amd_drm = false;                         // a ROOT/sys/class/drm card with vendor 0x1002
    bool nvidia_driver = false;                   // ROOT/proc/driver/nvidia, or a drm card with vendor 0x10de
    std::vector<std::string> nvidia_nodes;        // ROOT/dev/nvidia0, nvidia1, ...
    std::string container;                        // what gives a container away; "" outside one

    std::filesystem::path path(const std::string& rel) const { return root / rel; }
    bool exists(const std::string& rel) const;
    // The file's text; nullopt when it cannot be read.
    std::optional<std::string> read(const std::string& rel) const;
    // The names in a folder, shorter first, then in byte order (renderD129 after renderD128, eth10
    // after eth9); none when it cannot be read.
    std::vector<std::string> list(const std::string& rel) const;
    NodeAccess access(const std::string& rel) const;
    std::string group_name(uint32_t gid) const;
    std::optional<uint32_t> group_id(const std::string& name) const;
    bool in_group(uint32_t gid) const;
    // An AMD GPU driver is present: KFD, an AMD drm card or /dev/kfd.
    bool rocm() const;
};

Host read_host(const std::filesystem::path& root);

// gfx_target_version 90006 -> "gfx906", 90010 -> "gfx90a", 100300 -> "gfx1030" (LLVM's names: decimal
// major, hexadecimal minor and stepping).
std::string gfx_name(int major, int minor, int stepping);
// HSA_OVERRIDE_GFX_VERSION "10.3.0" -> "gfx1030"; nullopt when it is not three numbers.
std::optional<std::string> gfx_of_override(const std::string& value);

}  // namespace flashport::doctor
