// The batching engine's bookkeeping: sequences, pending tokens, step scheduling (see engine.h).
#include "engine/engine.h"

#include <algorithm>
#include <string>

#include "flashport/checked.h"
#include "flashport/device.h"
#include "flashport/error.h"

namespace flashport::engine {
namespace {

KvCacheOptions cache_options(const EngineOptions& o) {
    FP_CHECK(o.max_cache_tokens >= 0, "Engine: max_cache_tokens must be >= 0, got ", o.max_cache_tokens);
    FP_CHECK(o.max_step_tokens >= 1, "Engine: max_step_tokens must be >= 1, got ", o.max_step_tokens);
    FP_CHECK(o.graph_table_tokens >= 1 && o.graph_table_tokens <= (int64_t(1) << 20),
             "Engine: graph_table_tokens must be in [1, 2^20], got ", o.graph_table_tokens);
    KvCacheOptions c;
    c.block_size = o.block_size;
    FP_CHECK(o.initial_cache_tokens >= 0, "Engine: initial_cache_tokens must be >= 0, got ", o.initial_cache_tokens);
    if (o.block_size > 0) {
        c.max_blocks = checked_add(o.max_cache_tokens, o.block_size - 1, "Engine: max_cache_tokens") / o.block_size;
        c.initial_blocks =
            checked_add(o.initial_cache_tokens, o.block_size - 1, "Engine: initial_cache_tokens") / o.block_size;
    }
    c.preallocate = true;  // a sized pool fails at construction, not mid-request
    return c;
}

// Non-finite logits mean the forward pass went wrong (NaN or Inf weights, an overflow in fp16): text
// sampled from them would look plausible and mean nothing, so the step is an error instead.
[[noreturn]] void fail_non_finite(SeqId seq, int64_t position, const std::string& what) {
    fail("the model produced ", what, " for sequence ", seq, " at position ", position,
         ": its weights or activations hold NaN or Inf (load with the weight check on to find the tensor: "
         "flashport's --check-weights)");
}

void check_finite(const SeqLogits& r) {
    const int64_t bad = find_non_finite(r.logits.data(), DType::F32, int64_t(r.logits.size()));
    if (bad < 0) return;
    const int64_t vocab = int64_t(r.logits.size()) / r.rows;
    const float value = r.logits[size_t(bad)];
    fail_non_finite(r.seq, r.position + bad / vocab,
                    std::string("a ") + non_finite_name(value) + " logit (token " + std::to_string(bad % vocab) + ")");
}

}  // namespace

Engine::Engine(const Model& model, const EngineOptions& options)
    : model_(&model), options_(options), cache_(model.make_cache(cache_options(options))) {
    scratch_.decode_graphs = options.decode_graph;
    scratch_.table_quantum_tokens = options.graph_table_tokens;
    if (options.warm_up && !model.device().is_cpu()) warm_up();
}

// A prompt of warm_up_tokens (token 0 repeated; what it computes is thrown away), then one greedy
// decode step, on a sequence released afterwards: its cache blocks go back to the free list, and the
// forward's buffers stay sized for that step. Best effort: a failure here (too small a cache pool,
// NaN weights) is left for the first request to report, against its own tokens.
void Engine::warm_up() {
    int64_t n = std::min({options_.max_step_tokens, options_.warm_up_tokens, context() - 1});
    if (cache_.capacity_tokens() > 0) n = std::min(n, cache_.capacity_tokens() - 1);
    if (n < 1) return;
    const std::vector<int32_t> prompt(size_t(n), 0);
    const SeqId seq = add_sequence(prompt);
    try {
        step(StepOutput::GREEDY);
        append(seq, 0);
        step(StepOutput::GREEDY);
    } catch (const Error&) {
    }
    release(seq);
}

Engine::Seq& Engine::get(SeqId seq) {
    auto it = seqs_.find(seq);
    FP_CHECK(it != seqs_.end(), "Engine: no sequence ", seq, " (released, or never added)");
    return it->second;
}

const Engine::Seq& Engine::get(SeqId seq) const {
    return const_cast<Engine*>(this)->get(seq);
}

void Engine::check_tokens(std::span<const int32_t> tokens, int64_t new_length, const char* what) const {
    const QwenConfig& c = model_->config();
    for (size_t i = 0; i < tokens.size(); ++i)
        FP_CHECK(tokens[i] >= 0 && tokens[i] < c.vocab_size, what, ": token id ", tokens[i], " (at index ", i,
                 ") is outside the vocabulary [0, ", c.vocab_size, ")");
    // Beyond max_position_embeddings transformers would still run, but the model never saw those
    // positions in training: refuse rather than degrade silently.
    FP_CHECK(new_length <= c.max_position_embeddings, what, ": the sequence would be ", new_length,
             " tokens, longer than the model's context (max_position_embeddings = ", c.max_position_embeddings, " in ",
             c.source, ")");
}

SeqId Engine::add_sequence(std::span<const int32_t> prompt, bool all_logits) {
    FP_CHECK(!prompt.empty(), "Engine::add_sequence: the prompt is empty (at least one token is needed)");
    check_tokens(prompt, int64_t(prompt.size()), "prompt");
    const SeqId id = next_id_++;
    Seq& s = seqs_[id];
    s.tokens.assign(prompt.begin(), prompt.end());
    s.all_logits = all_logits;
    return id;
}

void Engine::append(SeqId seq, std::span<const int32_t> tokens) {
    Seq& s = get(seq);
    check_tokens(tokens, int64_t(s.tokens.size() + tokens.size()), "append");
    s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
}

void Engine::truncate(SeqId seq, int64_t length) {
    Seq& s = get(seq);
    FP_CHECK(length >= 0 && length <= int64_t(s.tokens.size()), "Engine::truncate: length ", length, " is outside [0, ",
             s.tokens.size(), "]");
    s.tokens.resize(size_t(length));
    if (length < s.blocks.length) cache_.truncate(s.blocks, length);
    if (s.seen_row >= 0) write_seen_row(s);  // the forgotten tokens leave the seen set
}

void Engine::release(SeqId seq) {
    Seq& s = get(seq);
    cache_.release(s.blocks);
    if (s.seen_row >= 0) free_seen_rows_.push_back(s.seen_row);
    seqs_.erase(seq);
}

void Engine::set_sampling(SeqId seq, const SamplingParams& params) {
    validate(params);
    Seq& s = get(seq);
    s.sampling = params;
    if (params.repetition_penalty == 1.0f || s.seen_row >= 0) return;
    s.seen_row = take_seen_row();
    write_seen_row(s);
}

int32_t Engine::take_seen_row() {
    if (!free_seen_rows_.empty()) {
        const int32_t row = free_seen_rows_.back();
        free_seen_rows_.pop_back();
        return row;
    }
    // One more row: a new buffer with the old rows copied (rows are few: one per penalised sequence).
    const Device device = model_->device();
    seen_words_ = (model_->config().vocab_size + 31) / 32;
    const size_t row_bytes = size_t(seen_words_) * sizeof(uint32_t);
    Buffer grown(row_bytes * size_t(seen_rows_ + 1), device);
    if (seen_rows_ > 0) copy_bytes(grown.data(), device, seen_.data(), device, row_bytes * size_t(seen_rows_));
    seen_ = std::move(grown);
    return int32_t(seen_rows_++);
}

void Engine::write_seen_row(const Seq& s) {
    std::vector<uint32_t> words(size_t(seen_words_), 0);
    for (int64_t i = 0; i < s.blocks.length; ++i) {
        const int32_t id = s.tokens[size_t(i)];  // checked against the vocabulary when added
        words[size_t(id) / 32] |= uint32_t(1) << (id % 32);
    }
    const size_t row_bytes = words.size() * sizeof(uint32_t);
    copy_bytes(static_cast<char*>(seen_.data()) + size_t(s.seen_row) * row_bytes, model_->device(), words.data(),
               Device::cpu(), row_bytes);
}

// One SampleParams per logit row (the sequence's settings, or the argmax) and each input token's
// seen row: a row draws the token at position start + n (its counter), so a seed gives the same
// tokens whichever steps they fall in.
TokenChoice Engine::token_choice(std::span<const ForwardSeq> batch, std::span<const Seq* const> seqs) {
    sample_rows_.clear();
    seen_slots_.clear();
    bool marks = false;
    for (size_t i = 0; i < batch.size(); ++i) {
        const ForwardSeq& f = batch[i];
        const Seq& s = *seqs[i];
        const int64_t n = int64_t(f.tokens.size());
        for (int64_t r = f.all_logits ? 0 : n - 1; r < n; ++r) {
            SampleParams p;
            p.temperature = 0.0f;
            if (s.sampling) {
                p = sample_params(*s.sampling);
                if (s.sampling->greedy()) p.temperature = 0.0f;
                p.seen_row = s.seen_row;
            }
            p.counter = f.start + r + 1;
            sample_rows_.push_back(p);
        }
        marks |= s.seen_row >= 0;
        seen_slots_.insert(seen_slots_.end(), size_t(n), s.seen_row);
    }
    if (!marks) seen_slots_.clear();
    TokenChoice c;
    c.rows = sample_rows_;
    c.seen = {static_cast<uint32_t*>(seen_.data()), seen_rows_, seen_words_, model_->device()};
    c.seen_slots = seen_slots_;
    return c;
}

bool Engine::has_pending() const {
    return std::any_of(seqs_.begin(), seqs_.end(),
                       [](const auto& kv) { return int64_t(kv.second.tokens.size()) > kv.second.blocks.length; });
}

const std::vector<int32_t>& Engine::tokens(SeqId seq) const {
    return get(seq).tokens;
}
int64_t Engine::cached(SeqId seq) const {
    return get(seq).blocks.length;
}

std::vector<SeqLogits> Engine::step(StepOutput output) {
    // Fewest pending tokens first: decode steps (one token each) become one neighbouring run that the
    // forward pass serves with a single paged-attention call, and a long prompt that does not fit the
    // step's token budget is the one that gets chunked.
    struct Item {
        SeqId id;
        Seq* seq;
        int64_t pending;
    };
    std::vector<Item> order;
    for (auto& [id, s] : seqs_) {
        const int64_t pending = int64_t(s.tokens.size()) - s.blocks.length;
        if (pending > 0) order.push_back({id, &s, pending});
    }
    std::stable_sort(order.begin(), order.end(), [](const Item& a, const Item& b) { return a.pending < b.pending; });

    std::vector<ForwardSeq> batch;
    std::vector<const Seq*> batch_seqs;
    std::vector<Item> ran;
    int64_t budget = options_.max_step_tokens;
    for (const Item& it : order) {
        const int64_t take = std::min(it.pending, budget);
        if (take <= 0) break;
        Seq& s = *it.seq;
        cache_.reserve(s.blocks, s.blocks.length + take);
        ForwardSeq f;
        f.cache = &s.blocks;
        f.tokens = std::span<const int32_t>(s.tokens).subspan(size_t(s.blocks.length), size_t(take));
        f.start = s.blocks.length;
        f.all_logits = s.all_logits;
        batch.push_back(f);
        batch_seqs.push_back(&s);
        ran.push_back({it.id, it.seq, take});
        budget -= take;
    }
    if (batch.empty()) return {};

    const int64_t vocab = model_->config().vocab_size, logit_rows = Model::logit_rows(batch);
    const bool on_device = output != StepOutput::LOGITS;  // the token is chosen where the model runs
    const bool need_logits =
        !on_device || std::any_of(batch.begin(), batch.end(), [](const ForwardSeq& f) { return f.all_logits; });
    logits_.resize(need_logits ? size_t(logit_rows * vocab) : 0);
    chosen_.resize(on_device ? size_t(logit_rows) : 0);
    const TokenChoice choice = output == StepOutput::SAMPLED ? token_choice(batch, batch_seqs) : TokenChoice{};
    model_->forward(batch, cache_, logits_, &scratch_, chosen_, choice);

    std::vector<SeqLogits> out;
    int64_t row = 0;
    for (const Item& it : ran) {
        Seq& s = *it.seq;
        const int64_t take = it.pending, rows = s.all_logits ? take : 1;
        s.blocks.length += take;
        const bool done = s.blocks.length == int64_t(s.tokens.size());
        if (s.all_logits || done) {
            SeqLogits r;
            r.seq = it.id;
            r.rows = rows;
            r.position = s.blocks.length - rows;
            if (!on_device || s.all_logits) {
                r.logits = std::span<const float>(logits_).subspan(size_t(row * vocab), size_t(rows * vocab));
                check_finite(r);
            }
            if (on_device) {
                r.token = chosen_[size_t(row + rows - 1)];
                // Settings were validated on the host, so a bad row is bad logits (or all -inf).
                if (r.token < 0) fail_non_finite(r.seq, r.position + rows - 1, "a NaN or +inf logit, or only -inf");
            }
            out.push_back(r);
        }
        row += rows;
    }
    return out;
}

}  // namespace flashport::engine
