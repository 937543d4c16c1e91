// Connection (src/server/connection.h) under cpp-httplib's real request processing: the
// BoundedServer HttpServer listens with, given short limits, on a loopback port. Raw sockets play
// the clients, so heads can be as hostile as the tests need.
#include "server/connection.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace flashport::server {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class ConnectionTest : public ::testing::Test {
protected:
    void SetUp() override {
        limits.max_head_bytes = 4096;
        limits.max_head_lines = 16;
        limits.head_timeout = 400ms;
        limits.read_timeout = 2000ms;
        limits.keep_alive_timeout = 2000ms;
        server = std::make_unique<BoundedServer>(limits);
        server->Get("/socket", [](const httplib::Request& req, httplib::Response& res) {
            // The handler's connection socket is the client's: same peer port.
            const int fd = current_socket();
            sockaddr_in peer{};
            socklen_t len = sizeof peer;
            const bool same = fd >= 0 && getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
                              ntohs(peer.sin_port) == req.remote_port;
            res.set_content(same ? "same" : "other", "text/plain");
        });
        server->Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
            res.set_content(std::to_string(req.body.size()), "text/plain");
        });
        port = server->bind_to_any_port("127.0.0.1");
        ASSERT_GT(port, 0);
        thread = std::thread([this] { server->listen_after_bind(); });
    }
    void TearDown() override {
        server->stop();
        thread.join();
    }

    int connect_client() const {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(uint16_t(port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
        timeval tv{5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        return fd;
    }
    static void send_all(int fd, const std::string& s) {
        ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size()));
    }
    // Everything the server sends until it closes the connection (or 5 s pass).
    static std::string read_to_close(int fd) {
        std::string out;
        char buf[4096];
        ssize_t n;
        while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, size_t(n));
        ::close(fd);
        return out;
    }

    ConnectionLimits limits;
    std::unique_ptr<BoundedServer> server;
    std::thread thread;
    int port = 0;
};

int count(const std::string& s, const std::string& what) {
    int n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
}

TEST_F(ConnectionTest, PipelinedRequestsEachGetTheirOwnHeadBudget) {
    // Three requests in one write, each with headers of 3 KiB (under the 4 KiB limit, though together
    // they are over it), the last one closing: three answers.
    const std::string headers = "X-A: " + std::string(3000, 'a') + "\r\n";
    const std::string get = "GET /socket HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n";
    const int fd = connect_client();
    send_all(fd, get + get + "GET /socket HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string reply = read_to_close(fd);
    EXPECT_EQ(count(reply, "HTTP/1.1 200"), 3) << reply;
    EXPECT_EQ(count(reply, "same"), 3) << reply;
}

TEST_F(ConnectionTest, BodyBytesAreNotCountedAsHead) {
    const std::string body(64 << 10, 'b');  // 16 times the head limit
    const int fd = connect_client();
    send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body);
    const std::string reply = read_to_close(fd);
    EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply.substr(0, 200);
    EXPECT_NE(reply.find("\r\n\r\n65536"), std::string::npos);
}

TEST_F(ConnectionTest, TooManyHeaderLinesGet431AndTheConnectionEnds) {
    std::string head = "GET /socket HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 1000; ++i) head += "X-" + std::to_string(i) + ": 1\r\n";
    const int fd = connect_client();
    send_all(fd, head);  // no blank line: the head would go on
    const std::string reply = read_to_close(fd);
    EXPECT_EQ(reply.rfind("HTTP/1.1 431", 0), 0u) << reply.substr(0, 200);
    EXPECT_NE(reply.find("\"error\""), std::string::npos) << reply;
    EXPECT_EQ(count(reply, "HTTP/1.1"), 1) << "only our answer, not cpp-httplib's 400 too: " << reply;
}

TEST_F(ConnectionTest, TooManyHeadBytesGet431) {
    std::string head = "GET /socket HTTP/1.1\r\n";
    for (int i = 0; i < 4; ++i) head += "X-" + std::to_string(i) + ": " + std::string(1500, 'v') + "\r\n";
    const int fd = connect_client();
    send_all(fd, head + "\r\n");  // 4 lines but 6 KiB
    EXPECT_EQ(read_to_close(fd).rfind("HTTP/1.1 431", 0), 0u);
}

TEST_F(ConnectionTest, ATrickledHeadGets408AtItsDeadline) {
    const int fd = connect_client();
    const auto start = Clock::now();
    send_all(fd, "GET /socket HTTP/1.1\r\n");
    std::atomic<bool> stop{false};
    // A header line every 100 ms: each read makes progress, but the head never ends.
    std::thread trickle([&] {
        for (int i = 0; i < 20 && !stop; ++i) {
            std::this_thread::sleep_for(100ms);
            ::send(fd, "X: 1\r\n", 6, MSG_NOSIGNAL);
        }
    });
    std::string reply;
    char buf[1024];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, size_t(n));
    const auto took = Clock::now() - start;
    stop = true;
    trickle.join();
    ::close(fd);
    EXPECT_EQ(reply.rfind("HTTP/1.1 408", 0), 0u) << reply;
    EXPECT_NE(reply.find("within 400 ms"), std::string::npos) << reply;
    EXPECT_GE(took, 350ms);
    EXPECT_LT(took, 3000ms);  // generous: a loaded CI machine
}

TEST_F(ConnectionTest, StoppingTheServerEndsIdleKeepAliveConnections) {
    const int fd = connect_client();
    send_all(fd, "GET /socket HTTP/1.1\r\nHost: x\r\n\r\n");  // keep-alive: the connection stays open
    char buf[1024];
    ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);
    const auto start = Clock::now();
    server->stop();  // TearDown's stop() is then a no-op
    EXPECT_LT(Clock::now() - start, 1000ms);
    ::close(fd);
}

}  // namespace
}  // namespace flashport::server
