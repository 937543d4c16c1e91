// Reading the machine under a root (host.h): identity, groups, KFD topology, drm cards, device nodes and
// the signs of a container.
#include "doctor/host.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>

namespace flashport::doctor {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
    std::vector<std::string> parts;
    std::stringstream in(text);
    for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
    return parts;
}

bool all_digits(std::string_view text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<uint32_t> parse_u32(const std::string& text) {
    if (!all_digits(text) || text.size() > 10) return std::nullopt;
    const unsigned long long v = std::stoull(text);
    if (v > UINT32_MAX) return std::nullopt;
    return uint32_t(v);
}

// Uid:/Gid: carry real, effective, saved and filesystem ids; permission checks use the filesystem one,
// which follows the effective id, so the second field is taken.
Identity parse_identity(const std::string& status) {
    Identity id;
    bool uid = false, gid = false;
    std::stringstream in(status);
    for (std::string line; std::getline(in, line);) {
        std::stringstream fields(line);
        std::string key;
        fields >> key;
        std::vector<uint32_t> values;
        for (std::string v; fields >> v;)
            if (const auto n = parse_u32(v)) values.push_back(*n);
        const uint32_t effective = values.size() > 1 ? values[1] : values.empty() ? 0 : values[0];
        if (key == "Uid:" && !values.empty()) {
            id.uid = effective;
            uid = true;
        } else if (key == "Gid:" && !values.empty()) {
            id.gid = effective;
            gid = true;
        } else if (key == "Groups:") {
            id.groups = values;
        }
    }
    id.known = uid && gid;
    return id;
}

// name:x:id:... lines (ROOT/etc/group and ROOT/etc/passwd share the first three fields).
std::map<uint32_t, std::string> parse_names(const std::string& text) {
    std::map<uint32_t, std::string> names;
    std::stringstream in(text);
    for (std::string line; std::getline(in, line);) {
        const std::vector<std::string> f = split(line, ':');
        if (f.size() < 3) continue;
        if (const auto id = parse_u32(f[2])) names.emplace(*id, f[0]);
    }
    return names;
}

std::string trim(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    s.erase(0, s.find_first_not_of(" \t\n"));
    return s;
}

std::vector<fs::path> entries(const fs::path& dir) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
    std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
        const std::string x = a.filename().string(), y = b.filename().string();
        return x.size() != y.size() ? x.size() < y.size() : x < y;  // node 10 after node 9
    });
    return out;
}

bool numbered(const std::string& name, const std::string& prefix) {
    return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
           all_digits(std::string_view(name).substr(prefix.size()));
}

void read_kfd(Host& h) {
    const fs::path nodes = h.path("sys/class/kfd/kfd/topology/nodes");
    std::error_code ec;
    h.kfd_topology = fs::is_directory(nodes, ec);
    for (const fs::path& node : entries(nodes)) {
        std::ifstream props(node / "properties");
        for (std::string key; props >> key;) {
            long long v = -1;
            props >> v;
            if (key != "gfx_target_version") continue;
            if (v > 0)
                h.amd_gpus.push_back(
                    {node.filename().string(), gfx_name(int(v / 10000), int(v / 100 % 100), int(v % 100))});
            break;
        }
    }
}

void read_drm(Host& h) {
    for (const fs::path& card : entries(h.path("sys/class/drm"))) {
        if (!numbered(card.filename().string(), "card")) continue;
        std::ifstream f(card / "device/vendor");
        std::string vendor;
        f >> vendor;
        if (vendor == "0x1002") h.amd_drm = true;
        if (vendor == "0x10de") h.nvidia_driver = true;
    }
}

std::string container_sign(const Host& h) {
    if (h.exists(".dockerenv")) return "docker (/.dockerenv)";
    if (h.exists("run/.containerenv")) return "podman (/run/.containerenv)";
    if (const auto cgroup = h.read("proc/1/cgroup"))
        for (const char* word : {"kubepods", "docker", "containerd", "libpod"})
            if (cgroup->find(word) != std::string::npos) return std::string(word) + " in /proc/1/cgroup";
    return "";
}

std::string mode_octal(mode_t mode) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", unsigned(mode & 07777));
    return buf;
}

}  // namespace

bool Host::exists(const std::string& rel) const {
    std::error_code ec;
    return fs::exists(fs::symlink_status(path(rel), ec));
}

std::optional<std::string> Host::read(const std::string& rel) const {
    std::ifstream f(path(rel), std::ios::binary);
    if (!f) return std::nullopt;
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

std::vector<std::string> Host::list(const std::string& rel) const {
    std::vector<std::string> names;
    for (const fs::path& p : entries(path(rel))) names.push_back(p.filename().string());
    return names;
}

std::string Host::group_name(uint32_t gid) const {
    const auto it = group_names.find(gid);
    return it != group_names.end() ? it->second : std::to_string(gid);
}

std::optional<uint32_t> Host::group_id(const std::string& name) const {
    for (const auto& [gid, n] : group_names)
        if (n == name) return gid;
    return std::nullopt;
}

bool Host::in_group(uint32_t gid) const {
    return identity.gid == gid ||
           std::find(identity.groups.begin(), identity.groups.end(), gid) != identity.groups.end();
}

bool Host::rocm() const {
    return kfd_topology || amd_drm || exists("dev/kfd");
}

NodeAccess Host::access(const std::string& rel) const {
    NodeAccess a;
    struct stat st {};
    if (::stat(path(rel).c_str(), &st) != 0) return a;
    a.exists = true;
    a.group = group_name(st.st_gid);
    constexpr mode_t RW_OWNER = S_IRUSR | S_IWUSR, RW_GROUP = S_IRGRP | S_IWGRP, RW_OTHERS = S_IROTH | S_IWOTH;
    // As the kernel decides: root passes; otherwise the owner's bits if we own it, else the group's if
    // we are in its group, else the others' (only one class applies).
    mode_t needed = RW_OTHERS;
    a.how = "open to all";
    if (identity.known && identity.uid == 0) {
        needed = 0;
        a.how = "as root";
    } else if (identity.known && identity.uid == st.st_uid) {
        needed = RW_OWNER;
        a.how = "as its owner";
    } else if (identity.known && in_group(st.st_gid)) {
        needed = RW_GROUP;
        a.how = "through group " + a.group;
    }
    a.allowed = (st.st_mode & needed) == needed;
    if (!a.allowed)
        a.how = "mode " + mode_octal(st.st_mode) + ", group " + a.group +
                (identity.known ? ", uid " + std::to_string(identity.uid) + " not in it" : ", identity unknown");
    return a;
}

Host read_host(const fs::path& root) {
    Host h;
    h.root = root;
    if (const auto status = h.read("proc/self/status")) h.identity = parse_identity(*status);
    if (const auto group = h.read("etc/group")) h.group_names = parse_names(*group);
    const auto users = parse_names(h.read("etc/passwd").value_or(""));
    const auto user = users.find(h.identity.uid);
    h.user = user != users.end() ? user->second : "$USER";
    read_kfd(h);
    read_drm(h);
    h.nvidia_driver = h.nvidia_driver || h.exists("proc/driver/nvidia");
    for (const fs::path& node : entries(h.path("dev")))
        if (numbered(node.filename().string(), "nvidia")) h.nvidia_nodes.push_back("/dev/" + node.filename().string());
    h.container = container_sign(h);
    return h;
}

std::string gfx_name(int major, int minor, int stepping) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "gfx%d%x%x", major, unsigned(minor), unsigned(stepping));
    return buf;
}

std::optional<std::string> gfx_of_override(const std::string& value) {
    const std::vector<std::string> parts = split(trim(value), '.');
    if (parts.size() != 3) return std::nullopt;
    int v[3];
    for (size_t i = 0; i < 3; ++i) {
        const auto n = parse_u32(parts[i]);
        if (!n || *n > 255) return std::nullopt;
        v[i] = int(*n);
    }
    if (v[1] > 15 || v[2] > 15) return std::nullopt;  // one hex digit each in the target's name
    return gfx_name(v[0], v[1], v[2]);
}

}  // namespace flashport::doctor
