// One client connection: the stream cpp-httplib reads requests from and writes replies to.
//
// Debian's cpp-httplib 0.11 limits each header line to 8 KiB, but not how many lines a request head
// has, nor how long it may take to arrive: a client sending header lines without end would grow the
// server's memory until its read timeout, and one trickling a byte before each timeout could hold a
// worker forever. The server therefore serves each accepted socket itself (BoundedServer overrides
// cpp-httplib's per-connection loop) through this stream, which counts every request's head:
//   - over ConnectionLimits' bytes or lines, the client gets a 431 and the connection ends;
//   - not whole within head_timeout, it gets a 408 and the connection ends.
// Bodies are cpp-httplib's to bound (set_payload_max_length). Owning the loop also gives handlers
// the connection's socket (current_socket()), which cpp-httplib 0.11 does not hand them.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace flashport::server {

struct ConnectionLimits {
    size_t max_head_bytes = 64 << 10;  // request line and headers, their line ends included
    size_t max_head_lines = 128;       // request line, header lines and the blank line
    std::chrono::milliseconds head_timeout{30'000};
    std::chrono::milliseconds read_timeout{10'000};  // for any one read or write to make progress
    std::chrono::milliseconds write_timeout{10'000};
    std::chrono::milliseconds keep_alive_timeout{5'000};  // an idle connection is closed after this
    size_t keep_alive_max = 1000;                         // requests on one connection
};

class Connection final : public httplib::Stream {
public:
    Connection(int fd, const ConnectionLimits& limits) : fd_(fd), limits_(limits) {}

    // Waits for the first byte of the next request: false when the connection stays idle past the
    // keep-alive timeout, or `serving` turns false (the server is stopping).
    bool wait_for_request(const std::function<bool()>& serving);
    // A request starts: its head is counted from its first byte.
    void begin_request();
    // A head went over a limit and was answered: nothing more is read or written.
    bool refused() const { return refused_; }
    // After a refusal: lets the answer reach the client before the socket closes.
    void linger();

    bool is_readable() const override;
    bool is_writable() const override;
    ssize_t read(char* ptr, size_t size) override;
    ssize_t write(const char* ptr, size_t size) override;
    void get_remote_ip_and_port(std::string& ip, int& port) const override;
    void get_local_ip_and_port(std::string& ip, int& port) const override;
    socket_t socket() const override { return fd_; }

private:
    void count_head(const char* p, size_t n);
    void refuse(int status, const std::string& message);
    void refuse_late_head();  // 408

    int fd_;
    ConnectionLimits limits_;
    char buf_[4096];
    size_t off_ = 0, len_ = 0;  // buffered bytes not yet read: buf_[off_, len_)
    bool in_head_ = false, line_blank_ = false, refused_ = false;
    size_t head_bytes_ = 0, head_lines_ = 0;
    std::chrono::steady_clock::time_point head_deadline_;
};

// cpp-httplib's Server with every accepted connection served through Connection, under `limits`:
// requests are read until the client leaves, the keep-alive limits end the connection, a head is
// refused, or the server stops. HttpServer's listener and the tests both use it.
class BoundedServer : public httplib::Server {
public:
    explicit BoundedServer(const ConnectionLimits& limits = {}) { set_limits(limits); }
    // Also sets the figures cpp-httplib writes in its Keep-Alive header (Connection applies them).
    void set_limits(const ConnectionLimits& limits);
    const ConnectionLimits& limits() const { return limits_; }

private:
    bool process_and_close_socket(socket_t sock) override;
    ConnectionLimits limits_;
};

// The socket of the connection whose request this thread is handling (-1 outside a BoundedServer's
// connection).
int current_socket();

// True once the peer has closed (or reset) the connection: POLLRDHUP, POLLHUP or POLLERR, without
// waiting. A non-streaming request writes nothing until its reply is whole, so a client that leaves
// is not noticed by a failed write as a stream's is. (An HTTP/1.1 client that shuts down its sending
// side while it waits for a reply would read as gone; clients do not do that.)
bool peer_closed(int fd);

}  // namespace flashport::server
