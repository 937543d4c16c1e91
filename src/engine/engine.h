// The batching engine: many sequences of different lengths share one model and one paged KV cache,
// and each step() runs one forward pass over all of them. This is what a server's scheduler drives.
//
//   Engine engine(model);
//   SeqId a = engine.add_sequence(prompt_a), b = engine.add_sequence(prompt_b);
//   while (live) {
//       for (const SeqLogits& r : engine.step()) {       // a prefill (or a chunk of one) or a decode step
//           int32_t next = sampler.sample(r.last(), ...);
//           if (done) engine.release(r.seq); else engine.append(r.seq, next);
//       }
//   }
//
// A sequence holds its token ids; those not yet run through the model are "pending". add_sequence
// and append add pending tokens; step() feeds every sequence's pending tokens (up to
// max_step_tokens in total: a long prompt is prefilled in chunks over several steps, while other
// sequences keep decoding) and returns logits for each sequence whose pending tokens are all
// consumed: the next-token logits of its last token, or with all_logits every new position's (for
// scoring text). A sequence that is waiting for its caller (no pending tokens) costs nothing, so
// sequences finish and join independently. release() frees a sequence's cache blocks for reuse.
//
// Not thread-safe: one thread drives an Engine. Errors (a token id outside the vocabulary, a
// sequence longer than the context, a full cache) are flashport::Errors naming the limit.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "flashport/memory.h"
#include "flashport/sample.h"

namespace flashport::engine {

using SeqId = int64_t;

struct EngineOptions {
    int64_t block_size = 16;        // KV-cache tokens per block (a multiple of 16)
    int64_t max_cache_tokens = 0;   // KV-cache capacity over all sequences, allocated up front; 0: grows
                                    // as needed
    int64_t initial_cache_tokens = 0;  // with max_cache_tokens 0: blocks for this many tokens allocated up
                                       // front, which the pool grows past as needed
    // Tokens per forward pass: bounds activation memory for long prompts (~160 KB a token for
    // Qwen2.5-7B, so ~330 MB at 2048) and how long one step keeps other sequences waiting. Prefill
    // GEMMs of 2048 rows run near the BLAS's full rate; 512-row ones did not (docs/perf.md).
    int64_t max_step_tokens = 2048;
    // GPU: a single sequence's greedy decode step is replayed from a recorded graph (ForwardScratch in
    // forward_scratch.h); false runs every step eagerly (as FLASHPORT_DECODE_GRAPH=0 does).
    bool decode_graph = true;
    // Paged block tables are padded to whole multiples of this many tokens, so that a recorded decode
    // graph serves a sequence for this much growth (ForwardScratch::table_quantum_tokens).
    int64_t graph_table_tokens = 1024;
    // GPU: pay the one-time costs (kernel images, BLAS handles and heuristics, the forward's buffers,
    // the first decode step) at construction, on a scratch sequence, rather than in the first request.
    // The warm-up prompt is min(max_step_tokens, warm_up_tokens) long: prompts up to that length (a
    // chat turn) meet nothing new, while a longer one grows the buffers and meets its GEMM shapes in
    // its first chunk, a few ms against a prefill of 100 ms and more. Warming up at 2048 tokens would
    // keep ~300 MB of activations (Qwen2.5-7B) that most runs never use. Nothing happens on the CPU.
    bool warm_up = true;
    int64_t warm_up_tokens = 512;
};

// What step() brings back for each sequence it finishes.
enum class StepOutput : uint8_t {
    LOGITS,   // the logits (any sampler)
    GREEDY,   // the argmax of the last row only, computed where the model runs (greedy decoding without
              // a repetition penalty); logits only for all_logits sequences
    SAMPLED,  // the last row's token drawn where the model runs, under each sequence's set_sampling
              // settings (the argmax for a sequence without them; flashport/sample.h's draw, whose
              // uniform number comes from the seed and the token's position); logits only for
              // all_logits sequences
};

struct SeqLogits {
    SeqId seq = -1;
    int32_t token = -1;             // GREEDY / SAMPLED: the last row's chosen token
    int64_t position = 0;           // the position of the token row 0 follows (predicts position + 1)
    int64_t rows = 0;               // 1, or the positions run this step for an all_logits sequence
    std::span<const float> logits;  // rows × vocab_size; valid until the next step()

    std::span<const float> row(int64_t r) const {
        const size_t vocab = logits.size() / size_t(rows);
        return logits.subspan(size_t(r) * vocab, vocab);
    }
    std::span<const float> last() const { return row(rows - 1); }
};

class Engine {
public:
    explicit Engine(const Model& model, const EngineOptions& options = {});

    // A new sequence with `prompt` (>= 1 token) pending. all_logits: return every position's logits.
    SeqId add_sequence(std::span<const int32_t> prompt, bool all_logits = false);
    // More tokens for a sequence: the token just sampled, or a new chat turn.
    void append(SeqId seq, std::span<const int32_t> tokens);
    void append(SeqId seq, int32_t token) { append(seq, std::span<const int32_t>(&token, 1)); }
    // Keeps the first `length` tokens (cached or pending) and forgets the rest, freeing cache blocks
    // past them: lets a conversation reuse the cached prefix it shares with a new prompt.
    void truncate(SeqId seq, int64_t length);
    // Runs one forward pass over the pending tokens (see above). Empty when nothing is pending. A
    // returned logit row holding a NaN or +-inf (NaN weights, a diverged forward pass) is an Error
    // naming the sequence and position, never logits to sample from; with GREEDY, rows that stay on
    // the device are checked by their argmax (-1 for NaN / +inf).
    std::vector<SeqLogits> step(StepOutput output = StepOutput::LOGITS);
    // How StepOutput::SAMPLED picks this sequence's tokens from now on (validated as
    // validate(SamplingParams) does). A repetition penalty gives the sequence a seen set where the
    // model runs, filled with its cached tokens now and with every token it is fed after.
    void set_sampling(SeqId seq, const SamplingParams& params);
    // Forgets the sequence; its blocks (and its seen set) return to the free lists.
    void release(SeqId seq);

    bool has_pending() const;
    bool contains(SeqId seq) const { return seqs_.count(seq) != 0; }
    const std::vector<int32_t>& tokens(SeqId seq) const;  // cached then pending
    int64_t cached(SeqId seq) const;                      // tokens already in the KV cache
    size_t live() const { return seqs_.size(); }
    int64_t context() const { return model_->config().max_position_embeddings; }

    const Model& model() const { return *model_; }
    const KvCache& cache() const { return cache_; }
    // Decode steps replayed from a recorded graph so far (EngineOptions::decode_graph).
    int64_t graph_replays() const { return scratch_.graph_replays(); }

private:
    struct Seq {
        std::vector<int32_t> tokens;
        BlockList blocks;  // blocks.length = tokens in the cache
        bool all_logits = false;
        std::optional<SamplingParams> sampling;  // set_sampling's; none: the argmax
        int32_t seen_row = -1;                   // its row of seen_ (a repetition penalty), or -1
    };
    Seq& get(SeqId seq);
    const Seq& get(SeqId seq) const;
    void check_tokens(std::span<const int32_t> tokens, int64_t new_length, const char* what) const;
    void warm_up();
    // The seen set row of a sequence: a free row, or one more (seen_ grows, keeping its rows); and
    // the row rewritten from the sequence's cached tokens.
    int32_t take_seen_row();
    void write_seen_row(const Seq& s);
    TokenChoice token_choice(std::span<const ForwardSeq> batch, std::span<const Seq* const> seqs);

    const Model* model_;
    EngineOptions options_;
    KvCache cache_;
    std::map<SeqId, Seq> seqs_;
    SeqId next_id_ = 0;
    std::vector<float> logits_;
    std::vector<int32_t> chosen_;  // GREEDY / SAMPLED: one token per logit row
    ForwardScratch scratch_;       // the forward pass's buffers, kept between steps
    // Repetition-penalty seen sets, one row per sequence that has one: [rows, words] where the model
    // runs (flashport/sample.h), rows reused through the free list.
    Buffer seen_;
    int64_t seen_rows_ = 0, seen_words_ = 0;
    std::vector<int32_t> free_seen_rows_;
    std::vector<SampleParams> sample_rows_;  // the last SAMPLED step's settings, one per logit row
    std::vector<int32_t> seen_slots_;        // ... and each input token's seen row
};

}  // namespace flashport::engine
