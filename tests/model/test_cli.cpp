// Smoke tests of the model commands, run as a user would: the `flashport` binary with its output
// captured. generate --json on the fixtures reproduces the reference greedy ids; perplexity --json
// matches the reference and the engine's argmax; bench engine gives sane figures and generate's
// tokens; tokenize uses the real Qwen3 tokenizer; chat keeps history through a pipe; and a missing or
// malformed model folder or a bad request is a clear error with a non-zero exit.
#include "cli_test_util.h"
#include "flashport/device.h"
#include "flashport/tokenizer.h"

namespace flashport::engine::test {
namespace {

// ostringstream rather than string +: GCC 12 raises a false -Wrestrict on the latter.
std::string join(const std::vector<int32_t>& ids) {
    std::ostringstream s;
    for (size_t i = 0; i < ids.size(); ++i) s << (i ? "," : "") << ids[i];
    return s.str();
}

// --repetition-penalty 1: the fixtures' generation_config.json asks for 1.05, which generate applies
// (as transformers does) and the plain greedy reference does not.
TEST(Cli, GenerateJsonReproducesTheReferenceGreedyIds) {
    for (const char* folder : {"qwen2-tiny-f32", "qwen3-tiny-f32"}) {
        const References refs = load_references(folder);
        const CliRun r = flashport("generate " + model_arg(folder) + " --prompt-ids " + join(refs.prompt) +
                                   " --temperature 0 --repetition-penalty 1 --max-tokens 64 --ignore-eos --json");
        ASSERT_EQ(r.rc, 0) << r.err;
        const nlohmann::json j = nlohmann::json::parse(r.out);
        EXPECT_EQ(j.at("prompt_ids").get<std::vector<int32_t>>(), refs.prompt);
        EXPECT_EQ(j.at("generated_ids").get<std::vector<int32_t>>(), refs.get("f32").greedy) << folder;
        EXPECT_EQ(j.at("stop_reason"), "max_tokens");
        EXPECT_EQ(j.at("text"), "");  // no tokenizer in the fixtures
        const nlohmann::json& f = j.at("figures");
        EXPECT_EQ(f.at("prompt_tokens"), 24);
        EXPECT_EQ(f.at("generated_tokens"), 64);
        for (const char* key : {"ttft_ms", "prefill_tok_s", "decode_tok_s", "peak_memory_bytes"})
            EXPECT_GT(f.at(key).get<double>(), 0.0) << key;
        EXPECT_TRUE(r.err.empty()) << "stderr should be empty on a pipe (no progress bar): " << r.err;
    }
}

// generate knows its request before it builds the engine: the KV pool starts with the prompt and
// max_tokens (whole 16-token blocks), where a pool grown from the prompt would double past it (24 + 60
// tokens: 6 blocks, where doubling from the prompt's 2 gives 8). An explicit --ctx still sets the pool.
TEST(Cli, GenerateSizesItsKvCacheToTheRequest) {
    const std::string base = "generate " + model_arg("qwen2-tiny-f32") + " --prompt-ids " +
                             join(std::vector<int32_t>(24, 7)) + " --ignore-eos --json";
    const auto kv_bytes = [&](const std::string& extra) {
        const CliRun r = flashport(base + extra);
        EXPECT_EQ(r.rc, 0) << r.err;
        return nlohmann::json::parse(r.out).at("figures").at("kv_cache_bytes").get<int64_t>();
    };
    const int64_t per_token = kv_bytes(" --max-tokens 4 --ctx 160") / 160;
    ASSERT_GT(per_token, 0);
    EXPECT_EQ(kv_bytes(" --max-tokens 60"), 6 * 16 * per_token);  // 84 tokens: 6 blocks
    EXPECT_EQ(kv_bytes(" --max-tokens 8"), 2 * 16 * per_token);   // 32 tokens: 2 blocks
}

TEST(Cli, GenerateStreamsIdsAndPrintsFigures) {
    const References refs = load_references("qwen3-tiny-bf16");
    const CliRun r = flashport("generate " + model_arg("qwen3-tiny-bf16") + " --prompt-ids " + join(refs.prompt) +
                               " --temperature 0 --repetition-penalty 1 --max-tokens 5 --ignore-eos");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, "112 2 153 356 198\n");  // the bf16 run's first greedy tokens
    for (const char* what : {"prompt 24 tokens", "TTFT", "prefill", "decode", "tok/s", "peak memory"})
        EXPECT_NE(r.err.find(what), std::string::npos) << what << " missing from: " << r.err;
}

TEST(Cli, SamplingWithASeedIsReproducible) {
    const std::string args = "generate " + model_arg("qwen2-tiny-bf16") +
                             " --prompt-ids 1,2,3 --temperature 0.8 --top-k 40 --top-p 0.9 --min-p 0.01 "
                             "--repetition-penalty 1.1 --max-tokens 16 --ignore-eos --json --seed ";
    const CliRun a = flashport(args + "7"), b = flashport(args + "7"), c = flashport(args + "8");
    ASSERT_EQ(a.rc, 0) << a.err;
    const auto ids = [](const CliRun& r) { return nlohmann::json::parse(r.out).at("generated_ids"); };
    EXPECT_EQ(ids(a), ids(b));
    EXPECT_NE(ids(a), ids(c));
}

TEST(Cli, PerplexityJsonMatchesTheReference) {
    const References refs = load_references("qwen3-tiny-f32");
    const Reference& ref = refs.get("f32");
    TempDir tmp;
    std::ofstream(tmp.path() / "ids.txt") << join(refs.prompt) << "\n";
    const CliRun r = flashport("perplexity " + model_arg("qwen3-tiny-f32") + " --ids-file " +
                               (tmp.path() / "ids.txt").string() + " --json");
    ASSERT_EQ(r.rc, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    double total = 0;
    const auto top1 = j.at("top1_ids").get<std::vector<int32_t>>();
    const auto top1_lp = j.at("top1_logprobs").get<std::vector<double>>();
    ASSERT_EQ(top1.size(), refs.prompt.size() - 1);
    for (size_t t = 0; t + 1 < refs.prompt.size(); ++t) {
        const std::span<const float> row = ref.row(int64_t(t));
        double m = -1e300, sum = 0;
        for (float x : row) m = std::max(m, double(x));
        for (float x : row) sum += std::exp(double(x) - m);
        const double lse = m + std::log(sum);
        total += lse - double(row[size_t(refs.prompt[t + 1])]);
        EXPECT_EQ(top1[t], argmax(row)) << t;
        EXPECT_NEAR(top1_lp[t], m - lse, 1e-3) << t;
    }
    EXPECT_NEAR(j.at("perplexity").get<double>() / std::exp(total / double(top1.size())), 1.0, 1e-4);

    const CliRun human =
        flashport("perplexity " + model_arg("qwen3-tiny-f32") + " --ids-file " + (tmp.path() / "ids.txt").string());
    EXPECT_EQ(human.rc, 0);
    EXPECT_EQ(human.out.rfind("perplexity ", 0), 0u) << human.out;
}

// The teacher-forced top-1 ids that engine_peers.py compares with transformers' fp32 run are the
// engine's own argmax (first maximum) of each position's logits, on a bf16 model as on the GPU.
TEST(Cli, PerplexityTop1IsTheEngineArgmax) {
    const References refs = load_references("qwen3-tiny-bf16");
    TempDir tmp;
    std::ofstream(tmp.path() / "ids.json") << nlohmann::json(refs.prompt).dump();
    const CliRun r = flashport("perplexity " + model_arg("qwen3-tiny-bf16") + " --ids-file " +
                               (tmp.path() / "ids.json").string() + " --json");
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto top1 = nlohmann::json::parse(r.out).at("top1_ids").get<std::vector<int32_t>>();

    const Model model = load_model("qwen3-tiny-bf16");
    Engine engine(model);
    const std::vector<float> logits = all_logits(engine, refs.prompt);
    const int64_t vocab = model.config().vocab_size;
    ASSERT_EQ(top1.size(), refs.prompt.size() - 1);
    for (size_t t = 0; t < top1.size(); ++t)
        EXPECT_EQ(top1[t], argmax(std::span<const float>(logits).subspan(t * size_t(vocab), size_t(vocab)))) << t;
}

// bench engine on the CPU: sane figures per batch size, and sequence 0's greedy tokens are those of
// `generate` on the same prompt, at batch 1 and batched (fp32: batching must not change the tokens).
TEST(Cli, BenchEngineJsonIsSaneAndMatchesGenerate) {
    const CliRun r = flashport("bench engine " + model_arg("qwen3-tiny-f32") +
                               " --device cpu --batch 1,3 --prompt-len 24 --new-tokens 8 --reps 2 --seed 5 --json");
    ASSERT_EQ(r.rc, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("prompt_len"), 24);
    EXPECT_EQ(j.at("new_tokens"), 8);
    EXPECT_EQ(j.at("device"), "cpu");
    ASSERT_EQ(j.at("runs").size(), 2u);
    const auto prompt = j.at("runs")[0].at("seq0_prompt_ids").get<std::vector<int32_t>>();
    ASSERT_EQ(prompt.size(), 24u);
    for (int32_t id : prompt) EXPECT_TRUE(id >= 0 && id < 512) << id;
    const CliRun g = flashport("generate " + model_arg("qwen3-tiny-f32") + " --prompt-ids " + join(prompt) +
                               " --temperature 0 --repetition-penalty 1 --max-tokens 8 --ignore-eos --json");
    ASSERT_EQ(g.rc, 0) << g.err;
    const auto expected = nlohmann::json::parse(g.out).at("generated_ids").get<std::vector<int32_t>>();
    for (size_t i = 0; i < 2; ++i) {
        const nlohmann::json& run = j.at("runs")[i];
        const int64_t batch = i == 0 ? 1 : 3;
        EXPECT_EQ(run.at("batch"), batch);
        EXPECT_EQ(run.at("seq0_prompt_ids").get<std::vector<int32_t>>(), prompt);  // the same prompts per batch
        EXPECT_EQ(run.at("seq0_generated_ids").get<std::vector<int32_t>>(), expected) << "batch " << batch;
        EXPECT_EQ(run.at("decode_rounds"), 7);
        EXPECT_EQ(run.at("ttft_ms_runs").size(), 2u);
        EXPECT_EQ(run.at("kv_capacity_tokens"), batch * 32);  // 24 + 8 tokens, one block of 16 rounded up
        for (const char* key : {"ttft_ms", "prefill_tok_s", "decode_s", "decode_tok_s", "round_ms_median",
                                "round_ms_p90", "step_ms_median", "kv_cache_bytes", "peak_memory_bytes"})
            EXPECT_GT(run.at(key).get<double>(), 0.0) << key;
        EXPECT_LE(run.at("round_ms_median").get<double>(), run.at("round_ms_p90").get<double>());
        EXPECT_LE(run.at("step_ms_median").get<double>(), run.at("round_ms_median").get<double>());
        EXPECT_EQ(run.at("driver_peak_delta_bytes"), 0);  // the CPU has no driver figure
    }
    const CliRun human =
        flashport("bench engine " + model_arg("qwen3-tiny-bf16") + " --batch 2 --prompt-len 4 --new-tokens 3");
    ASSERT_EQ(human.rc, 0) << human.err;
    for (const char* what : {"decode tok/s", "TTFT ms", "KV pool"})
        EXPECT_NE(human.out.find(what), std::string::npos) << what << " missing from: " << human.out;
}

// On a GPU build with a device (e.g. build/h200 on the H200; skipped elsewhere): the driver's peak since
// before loading covers at least what is still in use at the end, and bench engine runs there too.
TEST(Cli, GpuMemoryFiguresAndBenchEngine) {
    if (gpu_device_count() == 0) GTEST_SKIP() << "no GPU present";
    const CliRun g = flashport("generate " + model_arg("qwen3-tiny-bf16") +
                               " --device gpu --prompt-ids 1,2,3 --max-tokens 4 --ignore-eos --json");
    ASSERT_EQ(g.rc, 0) << g.err;
    const nlohmann::json f = nlohmann::json::parse(g.out).at("figures");
    EXPECT_GT(f.at("driver_peak_delta_bytes").get<int64_t>(), 0);
    EXPECT_GE(f.at("driver_peak_delta_bytes").get<int64_t>(), f.at("driver_used_delta_bytes").get<int64_t>());
    const CliRun b = flashport("bench engine " + model_arg("qwen3-tiny-bf16") +
                               " --device gpu --batch 1,4 --prompt-len 16 --new-tokens 4 --json");
    ASSERT_EQ(b.rc, 0) << b.err;
    for (const nlohmann::json& run : nlohmann::json::parse(b.out).at("runs")) {
        EXPECT_GT(run.at("decode_tok_s").get<double>(), 0.0);
        EXPECT_GT(run.at("driver_peak_delta_bytes").get<int64_t>(), 0);
    }
}

TEST(Cli, TokenizeWithTheRealQwen3Tokenizer) {
    const fs::path dir = fs::path(FP_MODEL_DATA_DIR) / "tokenizer" / "qwen3";
    const std::string text = "Hello, world! 你好，世界。 こんにちは\n\tdef f(x):  return x**2  # 😀 <|im_end|>\n";
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_dir(dir);
    const std::vector<int32_t> expected = tok.encode(text);
    const CliRun r = flashport("tokenize --model " + dir.string() + " --json", text);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out).get<std::vector<int32_t>>(), expected);
    const CliRun plain = flashport("tokenize --model " + dir.string(), "Hello, world!");
    ASSERT_EQ(plain.rc, 0) << plain.err;
    EXPECT_EQ(plain.out, "9707 11 1879 0\n");
}

// Text in, text out: the prompt is the tokenizer's encoding (chat-formatted with --chat), and the
// text is the decoding of the generated ids (ids past the tokenizer's ~270 tokens decode to nothing).
TEST(Cli, GenerateTextWithATokenizer) {
    TempDir dir;
    make_text_model(dir.path());
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_dir(dir.path());
    for (const bool chat : {false, true}) {
        const CliRun r = flashport("generate --model " + dir.path().string() + " --prompt 'hello there' " +
                                   (chat ? "--chat --system 'be brief' " : "") +
                                   "--temperature 0 --max-tokens 12 --ignore-eos --json");
        ASSERT_EQ(r.rc, 0) << r.err;
        const nlohmann::json j = nlohmann::json::parse(r.out);
        const auto prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
        if (chat) {
            const std::vector<tokenizer::ChatMessage> messages = {{"system", "be brief", std::nullopt},
                                                                  {"user", "hello there", std::nullopt}};
            EXPECT_EQ(prompt, tokenizer::encode_chat(tok, messages));
        } else {
            EXPECT_EQ(prompt, tok.encode("hello there"));
        }
        std::vector<int32_t> known;
        for (int32_t id : j.at("generated_ids").get<std::vector<int32_t>>())
            if (size_t(id) < tok.vocab_size()) known.push_back(id);
        EXPECT_EQ(j.at("text").get<std::string>(), tok.decode(known));
    }
}

// A chat through a pipe; the second turn must reuse the first turn's cached prefix.
TEST(Cli, ChatKeepsHistoryThroughAPipe) {
    TempDir dir;
    make_text_model(dir.path());
    const CliRun r = flashport("chat --model " + dir.path().string() + " --temperature 0 --max-tokens 6 --stats",
                               "hello there\nand again\n/exit\nnot read\n");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;  // one line per reply
    const size_t second = r.err.find('\n') + 1;
    ASSERT_NE(second, 0u) << r.err;
    EXPECT_NE(r.err.find(", 0 cached"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(", 0 cached", second), std::string::npos) << "the second turn reused no cache: " << r.err;
}

TEST(Cli, BadModelFoldersAndRequestsAreClearErrors) {
    expect_failure(flashport("generate --model /nonexistent/model --prompt-ids 1"),
                   "/nonexistent/model: not a model folder");
    TempDir empty;
    expect_failure(flashport("generate --model " + empty.path().string() + " --prompt-ids 1"), "config.json");
    TempDir bad;
    std::ofstream(bad.path() / "config.json") << "{\"model_type\": \"qwen2\", ";
    expect_failure(flashport("generate --model " + bad.path().string() + " --prompt-ids 1"), "config.json");
    TempDir no_weights;
    fs::copy_file(MODELS / "qwen2-tiny-f32" / "config.json", no_weights.path() / "config.json");
    expect_failure(flashport("generate --model " + no_weights.path().string() + " --prompt-ids 1"), "safetensors");
    TempDir truncated;
    fs::copy_file(MODELS / "qwen2-tiny-f32" / "config.json", truncated.path() / "config.json");
    const std::string weights = slurp(MODELS / "qwen2-tiny-f32" / "model.safetensors");
    std::ofstream(truncated.path() / "model.safetensors", std::ios::binary) << weights.substr(0, weights.size() / 2);
    expect_failure(flashport("generate --model " + truncated.path().string() + " --prompt-ids 1"), "model.safetensors");

    expect_failure(flashport("generate " + model_arg("qwen2-tiny-f32") + " --prompt hello"),
                   "has no tokenizer.json, so it works with token ids only: use --prompt-ids");
    expect_failure(flashport("generate " + model_arg("qwen2-tiny-f32") + " --prompt-ids 1,600"),
                   "token id 600 (at index 1) is outside the vocabulary [0, 512)");
    std::vector<int32_t> long_prompt(300, 5);
    expect_failure(flashport("generate " + model_arg("qwen2-tiny-f32") + " --prompt-ids " + join(long_prompt)),
                   "longer than the model's context (max_position_embeddings = 256");
    expect_failure(flashport("generate " + model_arg("qwen2-tiny-f32") + " --prompt-ids 1,x"), "unexpected character");
    // Without a GPU (a CPU build, or no device present) the engine's GPU path says so.
    if (gpu_device_count() == 0)
        expect_failure(flashport("generate " + model_arg("qwen2-tiny-f32") + " --prompt-ids 1 --device gpu"), "GPU");
    expect_failure(flashport("generate " + model_arg("qwen2-tiny-f32") + " --prompt-ids 1,2,3 --max-tokens 40 --ctx 32"),
                   "the request needs up to 43 tokens of KV cache (3 prompt + 40 new), the cache holds 32");
    expect_failure(flashport("chat " + model_arg("qwen2-tiny-f32"), "hi\n"), "has no tokenizer.json");
    const std::string bench = "bench engine " + model_arg("qwen2-tiny-f32");
    expect_failure(flashport(bench + " --batch 0"), "--batch: must be an integer in [1, 2147483647], got '0'");
    expect_failure(flashport(bench + " --batch 2,0"), "--batch: must be an integer in [1, 2147483647], got '0'");
    expect_failure(flashport(bench + " --prompt-len 0"), "--prompt-len: must be an integer in [1, 2147483647], got '0'");
    expect_failure(flashport(bench + " --new-tokens 0"), "--new-tokens: must be an integer in [1, 2147483647], got '0'");
    expect_failure(flashport(bench + " --prompt-len 250 --new-tokens 10"), "longer than the model's context");
    expect_failure(flashport(bench + " --batch 4 --prompt-len 20 --new-tokens 4 --ctx 32"),
                   "batch 4 needs 128 tokens of KV cache");
    expect_failure(flashport("bench engine --model /nonexistent/model"), "/nonexistent/model: not a model folder");
    expect_failure(flashport("tokenize --model " + empty.path().string(), "hi"), "no tokenizer.json");
}

}  // namespace
}  // namespace flashport::engine::test
