// `flashport serve`: the OpenAI-compatible server (src/server) over one model folder.
//
// The socket is bound first and "listening on http://HOST:PORT" printed, so /health answers 503
// while the model loads; "ready" follows once requests are served. SIGINT / SIGTERM shut down
// gracefully: new requests get 503, running ones have a few seconds to finish, then the process
// exits 0. Signals are taken by one thread (sigwait), never in an async handler.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "flag_ranges.h"
#include "flashport/error.h"
#include "model_cli.h"
#include "model_commands.h"
#include "serve_lab.h"
#include "server/http_server.h"
#include "server/scheduler.h"

namespace flashport::app {
namespace {

constexpr int64_t SERVE_STEP_TOKENS = 512;  // --max-step-tokens' default here

struct ServeArgs {
    ModelArgs model;
    SamplingArgs sampling;
    server::HttpOptions http;
    server::SchedulerOptions scheduler;
    double max_body_mib = 4;
    double drain_s = 10;
    bool seed_given = false;  // --seed: the seed of requests that give none (else each gets a fresh one)
    MemoryPlotArgs memory_plot;  // written when the server stops
};

void run(ServeArgs& a) {
    // Before any thread starts, so every thread inherits the mask and only sigwait sees them.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGUSR1);  // our own wake-up for the signal thread when the server ends first
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a client that hangs up mid-write is an error return, not a kill

    a.http.max_body_bytes = size_t(a.max_body_mib * 1048576.0);
    // Each open connection holds a worker: the running streams, the queued ones, and some spare for
    // /health, /metrics and requests that are refused.
    a.http.threads = size_t(a.scheduler.parallel + a.scheduler.max_queue + 16);
    server::Metrics metrics;
    server::HttpServer http(a.http, metrics);
    const std::string device = a.model.device;
    http.set_lab([device](const nlohmann::json& request) { return run_attention_lab(request, device); });
    const int port = http.bind();
    std::printf("flashport serve: listening on http://%s:%d (loading %s)\n", a.http.host.c_str(), port,
                a.model.dir.c_str());
    std::fflush(stdout);
    std::thread http_thread([&] { http.run(); });

    std::mutex mutex;
    bool shutting_down = false;
    server::Scheduler* live = nullptr;
    std::thread signal_thread([&] {
        int sig = 0;
        sigwait(&signals, &sig);
        if (sig == SIGUSR1) return;
        std::fprintf(stderr, "flashport serve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        {
            std::lock_guard<std::mutex> lock(mutex);
            shutting_down = true;
            if (live) live->stop(a.drain_s);
        }
        http.stop();
    });
    const auto finish_threads = [&] {
        http.stop();
        http_thread.join();
        pthread_kill(signal_thread.native_handle(), SIGUSR1);
        signal_thread.join();
    };

    std::unique_ptr<LoadedModel> m;
    std::unique_ptr<server::Scheduler> scheduler;
    server::ServedModel served;
    std::unique_ptr<MemoryTimeline> timeline;
    try {
        timeline = a.memory_plot.start(a.model);
        if (timeline) timeline->phase("load");
        m = std::make_unique<LoadedModel>(load_model(a.model));
        engine::EngineOptions eo = engine_options(a.model, m->model);
        // A long prompt's prefill chunk delays every other stream's next token: shorter steps than
        // generate's unless --max-step-tokens says otherwise.
        if (a.model.max_step_tokens == 0) eo.max_step_tokens = SERVE_STEP_TOKENS;
        const int64_t context = m->model.config().max_position_embeddings;
        // Without --ctx / --kv-memory, a pool for `parallel` full-context sequences, allocated up front,
        // so KV blocks used/free are figures and a full pool is a queueing decision, not an error.
        if (eo.max_cache_tokens == 0) eo.max_cache_tokens = a.scheduler.parallel * context;
        served.id = model_name(a.model.dir);
        served.tokenizer = m->tokenizer.get();
        served.defaults = a.sampling.resolve(*m);
        served.fixed_seed = a.seed_given;
        served.context = context;
        served.vocab_size = m->model.config().vocab_size;
        if (m->tokenizer)  // a chat turn ends with <|im_end|> even if generation_config omits it
            if (auto im_end = m->tokenizer->token_to_id("<|im_end|>")) served.defaults.stop.eos_ids.push_back(*im_end);
        scheduler = std::make_unique<server::Scheduler>(m->model, m->tokenizer.get(), eo, a.scheduler, metrics);
    } catch (...) {
        finish_threads();
        throw;
    }
    {
        std::lock_guard<std::mutex> lock(mutex);
        if (shutting_down) {
            scheduler->stop();
        } else {
            live = scheduler.get();
            http.set_backend(&served, scheduler.get());
            if (timeline) timeline->phase("serve");
            std::printf("flashport serve: ready: model '%s' (%s, context %lld, KV pool %lld blocks, parallel %lld)\n",
                        served.id.c_str(), m->model.device().name().c_str(), (long long)served.context,
                        (long long)scheduler->pool_blocks(), (long long)a.scheduler.parallel);
            std::fflush(stdout);
        }
    }
    http_thread.join();  // returns once stopped (a signal) and every handler has ended
    scheduler->stop();
    pthread_kill(signal_thread.native_handle(), SIGUSR1);
    signal_thread.join();
    if (timeline) {
        timeline->write(a.memory_plot.path, "flashport serve: " + served.id + " on " + m->model.device().name());
        std::fprintf(stderr, "flashport serve: memory timeline written to %s\n", a.memory_plot.path.c_str());
    }
    std::fprintf(stderr, "flashport serve: stopped\n");
}

}  // namespace

void add_serve(CLI::App& app) {
    auto a = std::make_shared<ServeArgs>();
    CLI::App* cmd = app.add_subcommand("serve", "an OpenAI-compatible HTTP server with continuous batching");
    a->model.add(*cmd);
    a->sampling.add(*cmd);
    cmd->add_option("--host", a->http.host, "address to bind (default 127.0.0.1: this machine only)");
    cmd->add_option("--port", a->http.port, "TCP port (0: any free port, printed at start)")
        ->check(integer_range(0, 65535));
    cmd->add_option("--parallel", a->scheduler.parallel, "sequences decoded together at most")
        ->check(integer_range(1, 1024));
    cmd->add_option("--max-queue", a->scheduler.max_queue,
                    "requests waiting for a slot at most; beyond, 503 with Retry-After")
        ->check(integer_range(0, 4096));
    cmd->add_option("--api-key", a->http.api_key, "require 'Authorization: Bearer KEY' on /v1, /tokenize, /detokenize");
    cmd->add_option("--max-body", a->max_body_mib, "largest request body in MiB")->check(real_range(0.001, 1024));
    cmd->add_option("--drain", a->drain_s, "seconds running requests get to finish after SIGINT/SIGTERM")
        ->check(real_range(0, 3600));
    a->memory_plot.add(*cmd);
    cmd->callback([a, cmd] {
        a->seed_given = cmd->count("--seed") > 0;
        guarded([&] { run(*a); });
    });
}

}  // namespace flashport::app
