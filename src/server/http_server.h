// The HTTP layer: cpp-httplib routes for the OpenAI-compatible API (/v1/chat/completions,
// /v1/completions, /v1/models), /health, /metrics, /tokenize and /detokenize; the API key check;
// body limits; Server-Sent Events for streams; the web page at / and its attention lab. It parses and answers; the
// Scheduler does the work.
//
// The listening socket is bound before the model loads, so /health can answer 503 while it does;
// set_backend() makes the server ready.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/scheduler.h"

namespace flashport::server {

struct HttpOptions {
    std::string host = "127.0.0.1";
    int port = 8080;      // 0: any free port (bind() returns it)
    std::string api_key;  // non-empty: /v1, /tokenize and /detokenize need "Authorization: Bearer KEY"
    size_t threads = 80;  // HTTP worker threads: each open connection (a stream, a keep-alive) holds one
    size_t max_body_bytes = 4 << 20;
    int backlog = 512;  // pending connections the kernel queues (cpp-httplib's own is 5)
};

class HttpServer {
public:
    HttpServer(const HttpOptions& options, Metrics& metrics);
    ~HttpServer();

    int bind();  // binds and listens; returns the port; an Error when it cannot
    // The model is loaded: requests are served from now on. Both must outlive the server's run().
    void set_backend(const ServedModel* model, Scheduler* scheduler);
    // POST /lab/attention: runs the attention benchmark (apps/flashport/serve_lab.cpp) with the
    // request body, returning its JSON; throws ApiError for a bad request. One run at a time (429
    // while one is in progress). Without a runner the route answers 404. Set before run().
    using LabRunner = std::function<nlohmann::json(const nlohmann::json& request)>;
    void set_lab(LabRunner runner);
    void run();   // serves until stop()
    void stop();  // stops accepting; returns once in-flight handlers have ended (run() returns)

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace flashport::server
