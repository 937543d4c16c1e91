// Token sampling where the logits are (`sample`), and the repetition penalty's seen sets (`mark_seen`).
//
// `sample` applies what engine::Sampler (src/engine/sampler.h) applies, with the same semantics: the
// repetition penalty, then temperature -> top-k -> top-p -> min-p as transformers' warpers, then an
// inverse-CDF draw over the kept tokens in id order. Unlike the Sampler it takes its uniform number
// from a counter-based generator (`sample_uniform(seed, counter)`), so a draw depends on nothing but
// the row, its settings and (seed, counter): no generator state lives between calls, and a decode
// step recorded in a CUDA graph can sample on the device. Everything per row (settings, seen sets) is
// read from memory on x's device, so replaying a graph with new settings needs no re-recording.
//
// On the CPU the filters compute probabilities in double (as the Sampler, which shares the code); on
// a GPU in fp32, so the two pick the same token for the same u except where u, a top-p or a min-p
// boundary lies within fp32 rounding of a cumulative sum (tests/ops/sample_case.h measures how often).
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashport/ops.h"
#include "flashport/tensor.h"

namespace flashport {

// One logit row's settings (a POD: on a GPU, an array of these lives in device memory).
struct SampleParams {
    float temperature = 1.0f;         // >= 0; 0: greedy, the first maximum of the penalised row
    int32_t top_k = 0;                // >= 0: keep the k highest scores, ties with the k-th kept; 0: off
    float top_p = 1.0f;               // [0, 1]: keep the smallest top set with probability >= top_p; 1: off
    float min_p = 0.0f;               // [0, 1]: drop tokens with p < min_p · p_max; 0: off
    float repetition_penalty = 1.0f;  // > 0; 1: off. Seen ids' scores: s > 0 -> s / r, else s · r
    int32_t seen_row = -1;            // the row of `seen` holding this row's seen ids; -1: none
    uint64_t seed = 0;
    int64_t counter = 0;  // which draw of the seed this is (the engine: the position of the token chosen)
};

// The seen sets of the repetition penalty: a [rows, words] bitmask in which id i is bit i % 32 of
// word i / 32. One row per sequence slot; mark_seen fills it, sample reads it.
struct SeenSets {
    uint32_t* data = nullptr;  // null with rows == 0: no seen sets
    int64_t rows = 0;
    int64_t words = 0;  // per row; sample needs words · 32 >= vocab
    Device device;
};

// What sample writes for a row that yields no token.
constexpr int32_t SAMPLE_BAD_ROW = -1;     // a NaN or +inf logit (a diverged forward pass), or every score -inf
constexpr int32_t SAMPLE_BAD_PARAMS = -2;  // GPU only (the CPU throws): invalid settings or seen_row

// The uniform number of draw `counter` of `seed`: [0, 1) with 53 random bits, the counter-th output
// of splitmix64 seeded by splitmix64(seed). Pure integer arithmetic, the same on host and device.
double sample_uniform(uint64_t seed, int64_t counter);

// Throws flashport::Error naming the field and its allowed range (the checks of
// engine::validate(SamplingParams)), or seen_row outside [-1, seen_rows).
void validate(const SampleParams& params, int64_t seen_rows);

// The workspace `sample` needs for x: 0 on the CPU; on a GPU a few bytes per logit (fp32 scores, and
// for batches of <= 32 rows the partials of the blocks each row is split over).
size_t sample_workspace_bytes(const TensorView& x);

// ids[r] = the token drawn from row r of x under params[r] with u = sample_uniform(seed, counter),
// or SAMPLE_BAD_ROW / SAMPLE_BAD_PARAMS.
//   x          [rows, vocab], 1 <= vocab < 2^31, fp32/fp16/bf16, rows may be strided
//   params     [rows] on x's device
//   seen       on x's device; each row with a penalty and seen_row >= 0 reads seen row seen_row
//   ids        [rows] int32 on x's device
//   workspace  sample_workspace_bytes(x) bytes on x's device (null when 0)
// On a GPU it runs on `stream` without allocating or synchronising (graph-capturable); the settings
// are checked there, a bad row's id being SAMPLE_BAD_PARAMS. On the CPU they are checked up front.
void sample(int32_t* ids, const TensorView& x, const SampleParams* params, const SeenSets& seen, void* workspace,
            size_t workspace_bytes, void* stream = nullptr);

// Marks a step's input tokens in their sequences' seen sets: for every t with slots[t] >= 0,
// seen row slots[t] gets bit ids[t]. ids and slots ([ids.size] int32) on seen's device. On the CPU an
// id outside [0, words · 32) or a slot past the rows is an error; on a GPU that entry is skipped.
void mark_seen(const SeenSets& seen, const IndexView& ids, const int32_t* slots, void* stream = nullptr);

}  // namespace flashport
