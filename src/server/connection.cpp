#include "server/connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "server/api_error.h"

namespace flashport::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

thread_local int tls_socket = -1;

// poll() for `events` up to `timeout`; true when ready (an error or hang-up counts: the read or
// write that follows reports it).
bool wait_for(int fd, short events, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
        pollfd p{fd, events, 0};
        const int r = poll(&p, 1, int(std::max<int64_t>(0, left.count())));
        if (r > 0) return true;
        if (r == 0 || errno != EINTR) return false;
    }
}

// Numeric host and port, as cpp-httplib writes them into Request::remote_addr and friends.
void numeric_address(int fd, bool peer, std::string& ip, int& port) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                       : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    char host[NI_MAXHOST], service[NI_MAXSERV];
    if (r != 0 || getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, service, sizeof service,
                              NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return;
    ip = host;
    port = std::atoi(service);
}

// Sets current_socket() for the life of a connection on this thread.
struct SocketScope {
    explicit SocketScope(int fd) { tls_socket = fd; }
    ~SocketScope() { tls_socket = -1; }
};

}  // namespace

bool Connection::wait_for_request(const std::function<bool()>& serving) {
    if (off_ < len_) return true;  // a pipelined request is already buffered
    // Short slices, so a stopping server is noticed within 50 ms.
    const auto deadline = Clock::now() + limits_.keep_alive_timeout;
    while (serving() && Clock::now() < deadline)
        if (wait_for(fd_, POLLIN, std::min(milliseconds(50), limits_.keep_alive_timeout))) return true;
    return false;
}

void Connection::begin_request() {
    in_head_ = true;
    line_blank_ = false;  // a blank first line is a malformed request line, not the end of a head
    head_bytes_ = head_lines_ = 0;
    head_deadline_ = Clock::now() + limits_.head_timeout;
}

bool Connection::is_readable() const {
    return off_ < len_ || wait_for(fd_, POLLIN, limits_.read_timeout);
}

// Writable within the write timeout, and the peer still there: a socket that reads as ready with
// nothing to peek has been closed by the peer (a pipelined request's bytes keep it alive).
bool Connection::is_writable() const {
    if (refused_ || !wait_for(fd_, POLLOUT, limits_.write_timeout)) return false;
    if (!wait_for(fd_, POLLIN, milliseconds(0))) return true;
    char byte;
    return recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

ssize_t Connection::read(char* ptr, size_t size) {
    if (refused_) return -1;
    if (off_ == len_) {
        // Within a head, the wait ends at the head's deadline if that comes first.
        const auto left = std::chrono::ceil<milliseconds>(head_deadline_ - Clock::now());
        const bool deadline_first = in_head_ && left < limits_.read_timeout;
        if (!wait_for(fd_, POLLIN, deadline_first ? std::max(left, milliseconds(0)) : limits_.read_timeout)) {
            if (deadline_first) refuse_late_head();
            return -1;
        }
        ssize_t n;
        do n = recv(fd_, buf_, sizeof buf_, 0);
        while (n < 0 && errno == EINTR);
        if (n <= 0) return n;
        off_ = 0;
        len_ = size_t(n);
    }
    const size_t n = std::min(size, len_ - off_);
    if (in_head_) {
        count_head(buf_ + off_, n);
        if (refused_) return -1;
    }
    std::memcpy(ptr, buf_ + off_, n);
    off_ += n;
    return ssize_t(n);
}

// cpp-httplib reads a head a byte at a time, so the counts stop exactly at its blank line; the
// body's bytes are never counted.
void Connection::count_head(const char* p, size_t n) {
    for (size_t i = 0; i < n && in_head_; ++i) {
        ++head_bytes_;
        if (p[i] == '\n') {
            ++head_lines_;
            if (line_blank_) in_head_ = false;  // the blank line: the head is whole
            line_blank_ = true;
        } else if (p[i] != '\r') {
            line_blank_ = false;
        }
    }
    if (head_bytes_ > limits_.max_head_bytes || head_lines_ > limits_.max_head_lines)
        refuse(431, "the request's headers are over the server's limit (" + std::to_string(limits_.max_head_bytes) +
                        " bytes, " + std::to_string(limits_.max_head_lines) + " lines)");
    else if (in_head_ && Clock::now() >= head_deadline_)
        refuse_late_head();
}

void Connection::refuse_late_head() {
    const auto ms = limits_.head_timeout.count();
    refuse(408, "the request head did not arrive within " +
                    (ms % 1000 ? std::to_string(ms) + " ms" : std::to_string(ms / 1000) + " s"));
}

// Answers the refused request here, in OpenAI's error shape, and closes the stream to cpp-httplib:
// its own answer to the failed read (a 400) is then never written.
void Connection::refuse(int status, const std::string& message) {
    const std::string body = ApiError(status, message).to_json().dump();
    const char* reason = status == 431 ? "Request Header Fields Too Large" : "Request Timeout";
    const std::string reply =
        "HTTP/1.1 " + std::to_string(status) + " " + reason +
        "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\n\r\n" + body;
    write(reply.data(), reply.size());
    refused_ = true;
}

// Closing a socket with unread bytes queued resets the connection, and a reset can discard the
// refusal before the client reads it. So: no more writes, and what the client still sends is read
// and dropped, until it closes or a bounded amount or time has passed.
void Connection::linger() {
    ::shutdown(fd_, SHUT_WR);
    const auto deadline = Clock::now() + milliseconds(1000);
    size_t dropped = 0;
    while (dropped < (size_t(4) << 20) &&
           wait_for(fd_, POLLIN, std::chrono::ceil<milliseconds>(deadline - Clock::now()))) {
        const ssize_t n = recv(fd_, buf_, sizeof buf_, 0);
        if (n <= 0) break;
        dropped += size_t(n);
    }
}

ssize_t Connection::write(const char* ptr, size_t size) {
    if (refused_) return -1;
    size_t sent = 0;
    while (sent < size) {
        if (!wait_for(fd_, POLLOUT, limits_.write_timeout)) return -1;
        const ssize_t n = send(fd_, ptr + sent, size - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        sent += size_t(n);
    }
    return ssize_t(sent);
}

void Connection::get_remote_ip_and_port(std::string& ip, int& port) const {
    numeric_address(fd_, true, ip, port);
}

void Connection::get_local_ip_and_port(std::string& ip, int& port) const {
    numeric_address(fd_, false, ip, port);
}

void BoundedServer::set_limits(const ConnectionLimits& limits) {
    limits_ = limits;
    set_keep_alive_max_count(limits.keep_alive_max);
    set_keep_alive_timeout(std::chrono::duration_cast<std::chrono::seconds>(limits.keep_alive_timeout).count());
}

bool BoundedServer::process_and_close_socket(socket_t sock) {
    bool ok = false;
    {
        Connection connection(sock, limits_);
        SocketScope scope(sock);
        const auto serving = [this] { return svr_sock_ != INVALID_SOCKET; };
        for (size_t left = limits_.keep_alive_max; left > 0 && connection.wait_for_request(serving); --left) {
            connection.begin_request();
            bool closed = false;
            ok = process_request(connection, /*close_connection=*/left == 1, closed, nullptr);
            if (!ok || closed || connection.refused()) break;
        }
        if (connection.refused()) connection.linger();
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
}

int current_socket() {
    return tls_socket;
}

bool peer_closed(int fd) {
    pollfd p{fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace flashport::server
