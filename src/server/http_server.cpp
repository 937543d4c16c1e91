#include "server/http_server.h"

#include <sys/socket.h>

#include <chrono>
#include <mutex>
#include <thread>

#include <httplib.h>

#include "flashport/error.h"
#include "server/api_error.h"
#include "server/connection.h"
#include "server/openai_response.h"
#include "server/web_page.h"

namespace flashport::server {
namespace {

using nlohmann::json;

// The bounded server (connection.h), with its listening socket exposed (a protected member of
// cpp-httplib's Server), so bind() can listen() again with a real backlog (Linux applies the new
// backlog to a listening socket).
class Listener : public BoundedServer {
public:
    int socket_fd() const { return int(svr_sock_); }
};

// Equal-length keys compare every byte whatever differs; a length mismatch costs the same loop,
// so the time says nothing about how much of the key was right.
bool constant_time_equal(const std::string& a, const std::string& b) {
    const size_t n = std::max(a.size(), b.size());
    unsigned diff = unsigned(a.size() != b.size());
    for (size_t i = 0; i < n; ++i) {
        const unsigned char x = i < a.size() ? (unsigned char)a[i] : 0;
        const unsigned char y = i < b.size() ? (unsigned char)b[i] : 0;
        diff |= unsigned(x ^ y);
    }
    return diff == 0;
}

std::string dump(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(dump(e.to_json()), "application/json");
}

bool needs_key(const std::string& path) {
    return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize" || path == "/tokenizer_info" ||
           path.rfind("/lab/", 0) == 0;
}

}  // namespace

struct HttpServer::Impl {
    HttpOptions options;
    Metrics& metrics;
    Listener server;
    std::atomic<const ServedModel*> model{nullptr};
    std::atomic<Scheduler*> scheduler{nullptr};
    // Completion requests admitted and not yet fully answered. stop() waits for them: cpp-httplib
    // cuts a stream that is still being written once it is stopping, so a reply the scheduler has
    // finished must reach its client (with [DONE]) before the server stops.
    std::atomic<int64_t> in_flight{0};
    HttpServer::LabRunner lab;
    std::mutex lab_mutex;  // one benchmark at a time: runs share the device with the engine

    Impl(const HttpOptions& o, Metrics& m) : options(o), metrics(m) { routes(); }

    void routes();
    void completion(const httplib::Request& req, httplib::Response& res, bool chat);
    void tokenize(const httplib::Request& req, httplib::Response& res);
    void detokenize(const httplib::Request& req, httplib::Response& res);
    const ServedModel& ready() const {
        const ServedModel* m = model.load();
        if (!m) throw ApiError(503, "the model is still loading", "server_error", "", "model_loading");
        return *m;
    }
};

// Runs a handler, turning every failure into an OpenAI-style error: the server never lets a bad
// request take a worker thread (or the process) down with it.
template <typename F>
void answer(httplib::Response& res, F&& body) {
    try {
        body();
    } catch (const ApiError& e) {
        send_error(res, e);
    } catch (const Error& e) {  // tokenizer / engine checks on client input
        send_error(res, ApiError(400, e.what()));
    } catch (const std::exception& e) {
        send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
    }
}

void HttpServer::Impl::routes() {
    const size_t threads = options.threads;
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server.set_payload_max_length(options.max_body_bytes);
    // A response goes out in several writes (headers, body, SSE chunks): without TCP_NODELAY, Nagle's
    // algorithm holds each small write until the client's delayed ACK (~40 ms on Linux).
    server.set_tcp_nodelay(true);
    // Idle keep-alive connections hold a worker thread, so they are let go after 5 s; a slow sender
    // may take 10 s per read, and 30 s for a whole request head (connection.h has the limits).
    server.set_limits(ConnectionLimits{});

    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (options.api_key.empty() || !needs_key(req.path)) return httplib::Server::HandlerResponse::Unhandled;
        const std::string got = req.get_header_value("Authorization");
        if (constant_time_equal(got, "Bearer " + options.api_key)) return httplib::Server::HandlerResponse::Unhandled;
        send_error(res, ApiError(401, "Incorrect API key provided (send Authorization: Bearer KEY)",
                                 "invalid_request_error", "", "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
    });
    // Errors cpp-httplib finds itself (no route, a body over the limit, a bad request line) get the
    // same JSON shape as ours.
    server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        std::string message = "error " + std::to_string(res.status);
        if (res.status == 404) message = "no route for " + req.method + " " + excerpt(req.path);
        if (res.status == 413) message = "the request body is over the server's limit";
        if (res.status == 405) message = "method not allowed";
        send_error(res, ApiError(res.status, message));
    });
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        send_error(res, ApiError(500, "internal error", "server_error"));
    });
    server.set_logger(
        [this](const httplib::Request&, const httplib::Response& res) { metrics.count_request(res.status); });

    server.Get("/", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(web_page(), "text/html; charset=utf-8");
    });
    server.Post("/lab/attention", [this](const httplib::Request& req, httplib::Response& res) {
        answer(res, [&] {
            if (!lab) throw ApiError(404, "the attention lab is not available in this server");
            std::unique_lock<std::mutex> lock(lab_mutex, std::try_to_lock);
            if (!lock.owns_lock()) throw ApiError(429, "a benchmark is already running; retry when it ends");
            res.set_content(dump(lab(parse_body_object(req.body))), "application/json");
        });
    });
    server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        const bool up = model.load() != nullptr;
        res.status = up ? 200 : 503;
        res.set_content(up ? R"({"status":"ok"})" : R"({"status":"loading"})", "application/json");
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(metrics.render(), "text/plain; version=0.0.4");
    });
    server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        answer(res, [&] {
            const ServedModel& m = ready();
            json entry = {{"id", m.id},
                          {"object", "model"},
                          {"created", 0},
                          {"owned_by", "flashport"},
                          {"max_model_len", m.context}};
            res.set_content(dump({{"object", "list"}, {"data", json::array({entry})}}), "application/json");
        });
    });
    server.Post("/v1/chat/completions",
                [this](const httplib::Request& req, httplib::Response& res) { completion(req, res, true); });
    server.Post("/v1/completions",
                [this](const httplib::Request& req, httplib::Response& res) { completion(req, res, false); });
    server.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
    // The tokenizer's special tokens and chat template, as vLLM serves them: lm-evaluation-harness's
    // "remote" tokenizer reads them (with /tokenize and /detokenize) instead of downloading the model's.
    server.Get("/tokenizer_info", [this](const httplib::Request&, httplib::Response& res) {
        answer(res, [&] {
            const ServedModel& m = ready();
            if (!m.tokenizer) throw ApiError(400, "this model has no tokenizer");
            const tokenizer::TokenizerConfig& c = m.tokenizer->config();
            const auto text = [](const std::optional<tokenizer::TokenizerConfig::Special>& t) {
                return t ? json(t->text) : json();
            };
            res.set_content(dump({{"eos_token", text(c.eos)},
                                  {"bos_token", text(c.bos)},
                                  {"pad_token", text(c.pad)},
                                  {"unk_token", text(c.unk)},
                                  {"chat_template", c.chat_template.empty() ? json() : json(c.chat_template)},
                                  {"add_bos_token", c.add_bos_token},
                                  {"model_max_length", m.context},
                                  {"vocab_size", m.tokenizer->vocab_size()}}),
                            "application/json");
        });
    });
    server.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { detokenize(req, res); });
}

void HttpServer::Impl::tokenize(const httplib::Request& req, httplib::Response& res) {
    answer(res, [&] {
        const ServedModel& m = ready();
        const json body = parse_body_object(req.body);
        for (const auto& [key, value] : body.items())
            if (key != "prompt" && key != "content" && key != "model" && key != "add_special_tokens")
                throw bad_field(key, "Unrecognized request argument supplied: " + excerpt(key));
        const char* field = body.contains("prompt") ? "prompt" : "content";
        if (!body.contains(field) || !body[field].is_string()) throw bad_field(field, "'prompt' must be a string");
        if (body.contains("add_special_tokens") && !body["add_special_tokens"].is_boolean())
            throw bad_field("add_special_tokens", "'add_special_tokens' must be a boolean");
        if (!m.tokenizer) throw ApiError(400, "this model has no tokenizer");
        // As a completion prompt is read (special-token text becomes the control token), so that a
        // client counts and prepares prompts with it; add_special_tokens adds the BOS token where the
        // tokenizer's config asks for one (Qwen's never does), as transformers' encode does.
        std::vector<int32_t> ids = m.tokenizer->encode(body[field].get<std::string>(), /*allow_special=*/true);
        const tokenizer::TokenizerConfig& config = m.tokenizer->config();
        if (body.value("add_special_tokens", false) && config.add_bos_token && config.bos && config.bos->id >= 0)
            ids.insert(ids.begin(), config.bos->id);
        res.set_content(dump({{"tokens", ids}, {"count", ids.size()}, {"max_model_len", m.context}}),
                        "application/json");
    });
}

void HttpServer::Impl::detokenize(const httplib::Request& req, httplib::Response& res) {
    answer(res, [&] {
        const ServedModel& m = ready();
        const json body = parse_body_object(req.body);
        for (const auto& [key, value] : body.items())
            if (key != "tokens" && key != "model")
                throw bad_field(key, "Unrecognized request argument supplied: " + excerpt(key));
        if (!body.contains("tokens") || !body["tokens"].is_array())
            throw bad_field("tokens", "'tokens' must be an array of token ids");
        if (!m.tokenizer) throw ApiError(400, "this model has no tokenizer");
        std::vector<int32_t> ids;
        for (const json& id : body["tokens"]) {
            if (!id.is_number_integer() || (id.is_number_unsigned() && id.get<uint64_t>() > uint64_t(INT64_MAX)) ||
                id.get<int64_t>() < 0 || id.get<int64_t>() >= int64_t(m.tokenizer->vocab_size()))
                throw bad_field("tokens", "token id " + excerpt(id.dump()) + " is outside the vocabulary [0, " +
                                              std::to_string(m.tokenizer->vocab_size()) + ")");
            ids.push_back(int32_t(id.get<int64_t>()));
        }
        res.set_content(dump({{"prompt", m.tokenizer->decode(ids)}}), "application/json");
    });
}

void HttpServer::Impl::completion(const httplib::Request& req, httplib::Response& res, bool chat) {
    answer(res, [&] {
        const ServedModel& m = ready();
        Scheduler& sched = *scheduler.load();
        CompletionRequest r = parse_completion_request(req.body, chat, m);
        const size_t choices_asked = r.prompts.size() * size_t(r.n);
        if (int64_t(choices_asked) > sched.capacity())
            throw bad_field(r.n > 1 ? "n" : "prompt",
                            "the request asks for " + std::to_string(choices_asked) +
                                " choices; this server runs and queues " + std::to_string(sched.capacity()) +
                                " at most (--parallel + --max-queue)");
        // Job i · n + j: prompt i's j-th choice, sampled from seed + j.
        std::vector<std::shared_ptr<Job>> jobs;
        for (const std::vector<int32_t>& prompt : r.prompts)
            for (int j = 0; j < r.n; ++j) {
                auto job = std::make_shared<Job>();
                job->prompt = prompt;
                job->options = r.options;
                job->options.sampling.seed += uint64_t(j);
                job->top_logprobs = r.top_logprobs;
                job->echo = r.echo;
                job->logit_bias = r.logit_bias;
                job->presence_penalty = r.presence_penalty;
                job->frequency_penalty = r.frequency_penalty;
                job->json_object = r.json_object;
                sched.check(*job);
                jobs.push_back(std::move(job));
            }
        const std::shared_ptr<Job> job = jobs[0];  // a stream's one job
        switch (sched.submit(jobs)) {
            case Scheduler::Submit::QUEUED:
                break;
            case Scheduler::Submit::QUEUE_FULL:
                res.set_header("Retry-After", "1");
                throw ApiError(503, "the server's queue is full; retry later", "server_error", "", "queue_full");
            case Scheduler::Submit::STOPPING:
                throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
        }
        ResponseContext ctx = make_response_context(chat, m.id, r.top_logprobs >= 0, m.tokenizer);
        ctx.tool_calls = r.tool_calls;
        // Held by this handler, and by a stream's provider until cpp-httplib drops it after the
        // last write: the request counts as in flight until then.
        ++in_flight;
        std::shared_ptr<void> flight(nullptr, [this](void*) { --in_flight; });

        if (!r.stream) {
            // No write to the client until the end, so a client that leaves is found by asking its
            // socket (connection.h) every quarter second, whether tokens are arriving or not: a short
            // reply never looks, a queued or a long one notices within 250 ms and is cancelled (with
            // every other prompt of the request). The jobs run together; their events are read in order.
            const auto cancel_all = [&] {
                for (const auto& j : jobs) j->cancelled = true;  // the scheduler ends them and frees their blocks
            };
            std::vector<FinalChoice> choices(jobs.size());
            const int fd = current_socket();
            const auto check_every = std::chrono::milliseconds(250);
            auto next_check = Clock::now() + check_every;
            for (size_t k = 0; k < jobs.size();) {
                std::optional<Event> e = jobs[k]->channel.pop(check_every);
                if (Clock::now() >= next_check) {
                    next_check = Clock::now() + check_every;
                    if (fd >= 0 && peer_closed(fd)) {
                        cancel_all();
                        res.status = 499;  // nginx's "client closed request", for the metrics
                        return;
                    }
                }
                if (!e) continue;
                FinalChoice& c = choices[k];
                c.text += e->text;
                if (e->logprob) c.logprobs.push_back(*e->logprob);
                if (!e->done) continue;
                if (!e->error.empty()) {
                    cancel_all();
                    throw ApiError(e->error == "server shutting down" ? 503 : 500, e->error, "server_error");
                }
                c.finish_reason = e->finish_reason;
                c.prompt_tokens = k % size_t(r.n) == 0 ? e->prompt_tokens : 0;  // a prompt counts once, whatever n
                c.completion_tokens = e->completion_tokens;
                ++k;
            }
            res.set_content(dump(final_json(ctx, choices)), "application/json");
            return;
        }

        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no");
        struct Stream {
            bool first = true;
            Clock::time_point last_write = Clock::now();
            size_t text_offset = 0;  // the completions logprobs' text_offset, counted over the whole stream
            ToolCallStream calls;    // with tools: text from "<tool_call>" on is held for the end
        };
        auto state = std::make_shared<Stream>();
        const bool include_usage = r.include_usage;
        res.set_chunked_content_provider(
            "text/event-stream",
            [job, state, ctx, include_usage, flight](size_t, httplib::DataSink& sink) {
                const auto send = [&](const json& j) {
                    const std::string line = "data: " + dump(j) + "\n\n";
                    state->last_write = Clock::now();
                    return sink.write(line.data(), line.size());
                };
                std::optional<Event> e = job->channel.pop(std::chrono::milliseconds(250));
                if (!e) {
                    // Nothing to say yet (queued, or a long prefill): an SSE comment now and then both
                    // keeps proxies from timing out and finds a client that has gone, whose job is
                    // then cancelled.
                    if (Clock::now() - state->last_write < std::chrono::seconds(1)) return true;
                    state->last_write = Clock::now();
                    static const char ping[] = ": waiting\n\n";
                    if (!sink.write(ping, sizeof ping - 1)) job->cancelled = true;
                    return !job->cancelled;
                }
                std::vector<TokenLogprob> lps;
                if (e->logprob) lps.push_back(*e->logprob);
                const std::string text = ctx.tool_calls ? state->calls.push(e->text) : e->text;
                if (!e->done) {
                    if (text.empty() && lps.empty() && !state->first) return true;  // held back
                    const bool ok = send(chunk_json(ctx, text, lps, "", state->first, &state->text_offset));
                    state->first = false;
                    if (!ok) job->cancelled = true;
                    return ok;
                }
                if (!e->error.empty()) {
                    send(ApiError(500, e->error, "server_error").to_json());
                } else {
                    // With tools, what the stream held: the calls (ending with "tool_calls"), or, when it
                    // parses as none, more content.
                    const ParsedReply reply =
                        state->calls.in_call() ? parse_tool_calls(state->calls.held()) : ParsedReply{};
                    const std::string rest = text + (reply.calls.empty() ? state->calls.held() : std::string());
                    if (!rest.empty() || state->first)
                        send(chunk_json(ctx, rest, lps, "", state->first, &state->text_offset));
                    if (!reply.calls.empty())
                        send(tool_calls_chunk_json(ctx, reply.calls, e->finish_reason));
                    else
                        send(chunk_json(ctx, "", {}, e->finish_reason, false));
                    if (include_usage) send(usage_chunk_json(ctx, e->prompt_tokens, e->completion_tokens));
                }
                static const char done[] = "data: [DONE]\n\n";
                sink.write(done, sizeof done - 1);
                sink.done();
                return true;
            },
            // Called when the response ends, finished or not: a job whose client went away stops.
            [job](bool) { job->cancelled = true; });
    });
}

HttpServer::HttpServer(const HttpOptions& options, Metrics& metrics)
    : impl_(std::make_unique<Impl>(options, metrics)) {}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
    Listener& s = impl_->server;
    int port = impl_->options.port;
    if (port == 0) {
        port = s.bind_to_any_port(impl_->options.host);
        FP_CHECK(port > 0, "cannot bind ", impl_->options.host, " (any port)");
    } else {
        FP_CHECK(s.bind_to_port(impl_->options.host, port), "cannot bind ", impl_->options.host, ":", port,
                 " (in use, or not an address of this machine)");
    }
    // cpp-httplib listens with a backlog of 5: a burst of clients would be refused.
    FP_CHECK(::listen(s.socket_fd(), impl_->options.backlog) == 0, "listen() failed on port ", port);
    return port;
}

void HttpServer::set_backend(const ServedModel* model, Scheduler* scheduler) {
    impl_->scheduler = scheduler;
    impl_->model = model;
}

void HttpServer::set_lab(LabRunner runner) {
    impl_->lab = std::move(runner);
}

void HttpServer::run() {
    impl_->server.listen_after_bind();
}

void HttpServer::stop() {
    // The scheduler has ended every job by now (serve.cpp stops it first); what remains is writing
    // the last events. Bounded, in case a client stopped reading (the write timeout ends those).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (impl_->in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    impl_->server.stop();
}

}  // namespace flashport::server
