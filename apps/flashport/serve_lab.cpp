#include "serve_lab.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>

#include "bench_attention.h"
#include "engine/json_strict.h"
#include "flashport/error.h"
#include "server/api_error.h"

namespace flashport::app {
namespace {

using nlohmann::json;
using server::bad_field;

// On a 2-core CPU a 4096-token naive run (4 heads, fp32: a 256 MiB score matrix) takes about a
// second; eight lengths of two implementations stay well under a minute.
constexpr int64_t MAX_LEN = 4096, MIN_LEN = 16;
constexpr size_t MAX_LENS = 8;
constexpr int64_t BATCH = 1, HEADS = 4;
constexpr int ITERS = 3;

// A temporary file for the benchmark's JSON, removed however the run ends.
struct TempFile {
    std::string path;
    TempFile() {
        char name[] = "/tmp/flashport-lab-XXXXXX";
        const int fd = mkstemp(name);
        FP_CHECK(fd >= 0, "attention lab: cannot create a temporary file");
        close(fd);
        path = name;
    }
    ~TempFile() { std::remove(path.c_str()); }
};

}  // namespace

json run_attention_lab(const json& request, const std::string& device) {
    for (const auto& [key, value] : request.items())
        if (!std::set<std::string>{"seq_lens", "head_dim", "dtype", "impls", "causal"}.count(key))
            throw bad_field(key, "unrecognized field '" + excerpt(key) + "'");
    BenchAttentionOptions o;
    o.device = device;
    o.batch = BATCH;
    o.heads = HEADS;
    o.iters = ITERS;
    const json& lens = request.value("seq_lens", json::array({256, 512, 1024}));
    if (!lens.is_array() || lens.empty() || lens.size() > MAX_LENS)
        throw bad_field("seq_lens", "'seq_lens' must be 1 to " + std::to_string(MAX_LENS) + " lengths");
    for (const json& n : lens) {
        if (!n.is_number_integer() || n.get<int64_t>() < MIN_LEN || n.get<int64_t>() > MAX_LEN)
            throw bad_field("seq_lens", "each length must be an integer in [" + std::to_string(MIN_LEN) + ", " +
                                            std::to_string(MAX_LEN) + "], got " + excerpt(n.dump()));
        o.sweep.push_back(n.get<int64_t>());
    }
    o.q_len = o.kv_len = o.sweep.front();
    const json& hd = request.value("head_dim", json(64));
    if (!hd.is_number_integer() || !std::set<int64_t>{32, 64, 128}.count(hd.get<int64_t>()))
        throw bad_field("head_dim", "'head_dim' must be 32, 64 or 128");
    o.head_dim = hd.get<int64_t>();
    const json& dtype = request.value("dtype", json("fp32"));
    if (!dtype.is_string() || !std::set<std::string>{"fp32", "fp16", "bf16"}.count(dtype.get<std::string>()))
        throw bad_field("dtype", "'dtype' must be fp32, fp16 or bf16");
    o.dtype = dtype.get<std::string>();
    const json& impls = request.value("impls", json::array({"naive", "flash"}));
    if (!impls.is_array() || impls.empty() || impls.size() > 2)
        throw bad_field("impls", "'impls' must list naive and/or flash");
    o.impls.clear();
    for (const json& i : impls) {
        if (!i.is_string() || (i != "naive" && i != "flash"))
            throw bad_field("impls", "'impls' must list naive and/or flash");
        o.impls.push_back(i.get<std::string>());
    }
    const json& causal = request.value("causal", json(false));
    if (!causal.is_boolean()) throw bad_field("causal", "'causal' must be a boolean");
    o.causal = causal.get<bool>();

    TempFile out;
    o.json_path = out.path;
    std::string failed;
    try {
        run_bench_attention(o, /*shape_given=*/true);  // its table goes to the server's stdout
    } catch (const Error& e) {
        // A failed implementation is a row with its error (the JSON is written before the throw);
        // anything earlier is the request's fault.
        if (!std::filesystem::exists(out.path) || std::filesystem::file_size(out.path) == 0)
            throw server::ApiError(400, std::string("attention lab: ") + e.what());
        failed = e.what();
    }
    json j = engine::parse_json_strict(engine::read_text_file(out.path), "attention lab output");
    json reply = {{"device", device}, {"shape", j["shape"]}, {"sweep", j.value("sweep", json::array())}};
    if (!failed.empty()) reply["error"] = failed;
    return reply;
}

}  // namespace flashport::app
