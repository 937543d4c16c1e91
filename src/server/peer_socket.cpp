#include "server/peer_socket.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <memory>

namespace flashport::server {

namespace {

// Numeric host and port of a socket address, as cpp-httplib formats them (getnameinfo, NUMERICHOST).
bool numeric(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
    char h[NI_MAXHOST], s[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, h, sizeof h, s, sizeof s,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return false;
    host = h;
    port = std::atoi(s);
    return true;
}

}  // namespace

int find_connection_socket(const std::string& remote_addr, int remote_port, int local_port) {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/fd"), closedir);
    if (!dir) return -1;
    while (const dirent* entry = readdir(dir.get())) {
        char* end = nullptr;
        const long fd = std::strtol(entry->d_name, &end, 10);
        if (end == entry->d_name || *end != '\0') continue;  // "." and ".."
        sockaddr_storage peer{}, self{};
        socklen_t peer_len = sizeof peer, self_len = sizeof self;
        if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;  // not a socket
        if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&self), &self_len) != 0) continue;
        std::string peer_host, self_host;
        int peer_port = -1, self_port = -1;
        if (numeric(peer, peer_len, peer_host, peer_port) && numeric(self, self_len, self_host, self_port) &&
            peer_port == remote_port && self_port == local_port && peer_host == remote_addr)
            return int(fd);
    }
    return -1;
}

bool peer_closed(int fd) {
    pollfd p{fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace flashport::server
