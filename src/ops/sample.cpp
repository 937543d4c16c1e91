// sample and mark_seen (flashport/sample.h): validation and dispatch.
#include "backends/cpu/sample.h"

#include <cmath>

#include "core/counter_rng.h"
#include "flashport/error.h"
#include "flashport/sample.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/ops_gpu.h"
#endif

namespace flashport {

double sample_uniform(uint64_t seed, int64_t counter) {
    return detail::counter_uniform(seed, counter);
}

void validate(const SampleParams& p, int64_t seen_rows) {
    // The words of engine::validate(SamplingParams), so a setting is refused the same way everywhere.
    FP_CHECK(std::isfinite(p.temperature) && p.temperature >= 0.0f,
             "sampling: temperature must be finite and >= 0 (0 means greedy), got ", p.temperature);
    FP_CHECK(p.top_k >= 0, "sampling: top_k must be >= 0 (0 turns it off), got ", p.top_k);
    FP_CHECK(p.top_p >= 0.0f && p.top_p <= 1.0f, "sampling: top_p must be in [0, 1] (1 turns it off), got ", p.top_p);
    FP_CHECK(p.min_p >= 0.0f && p.min_p <= 1.0f, "sampling: min_p must be in [0, 1] (0 turns it off), got ", p.min_p);
    FP_CHECK(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0f,
             "sampling: repetition_penalty must be finite and > 0 (1 turns it off), got ", p.repetition_penalty);
    FP_CHECK(p.seen_row >= -1 && p.seen_row < seen_rows, "sampling: seen_row must be -1 (none) or in [0, ", seen_rows,
             ") (the seen sets' rows), got ", p.seen_row);
}

namespace {

void check_seen(const char* op, const SeenSets& seen, Device device) {
    FP_CHECK(seen.rows >= 0 && seen.words >= 0, op, ": the seen sets' rows and words must be >= 0, got ", seen.rows,
             " and ", seen.words);
    FP_CHECK(seen.data != nullptr || seen.rows == 0, op, ": the seen sets have no data (null pointer)");
    FP_CHECK(seen.rows == 0 || seen.device == device, op, ": the seen sets must be on ", device.name(), ", got ",
             seen.device.name());
}

}  // namespace

size_t sample_workspace_bytes(const TensorView& x) {
    if (x.device.is_cpu() || x.ndim != 2) return 0;
#ifdef FLASHPORT_GPU
    return gpu::sample_workspace_bytes(x.dim(0), x.dim(1));
#else
    return 0;
#endif
}

void sample(int32_t* ids, const TensorView& x, const SampleParams* params, const SeenSets& seen, void* workspace,
            size_t workspace_bytes, void* stream) {
    using namespace ops_detail;
    check_view("sample", "x", x, 2);
    const int64_t rows = x.dim(0), vocab = x.dim(1);
    FP_CHECK(vocab >= 1 && vocab <= 0x7fffffff, "sample: x must be [rows, vocab] with 1 <= vocab < 2^31, got ",
             x.describe());
    FP_CHECK(ids != nullptr || rows == 0, "sample: ids has no data (null pointer)");
    FP_CHECK(params != nullptr || rows == 0, "sample: params has no data (null pointer)");
    check_seen("sample", seen, x.device);
    FP_CHECK(seen.rows == 0 || seen.words * 32 >= vocab, "sample: the seen sets' ", seen.words,
             " words per row hold ids below ", seen.words * 32, ", fewer than the vocabulary's ", vocab);
    const size_t need = sample_workspace_bytes(x);
    FP_CHECK(workspace_bytes >= need && (workspace != nullptr || need == 0), "sample: the workspace must be ", need,
             " bytes (sample_workspace_bytes), got ", workspace_bytes, workspace ? "" : " (null)");
    if (check_device("sample", x, {})) {
#ifdef FLASHPORT_GPU
        gpu::sample(ids, x, params, seen, workspace, stream);
#endif
        return;
    }
    (void)stream;  // the CPU kernels run on the calling thread
    for (int64_t r = 0; r < rows; ++r) validate(params[r], seen.rows);
    cpu::sample(ids, x, params, seen);
}

void mark_seen(const SeenSets& seen, const IndexView& ids, const int32_t* slots, void* stream) {
    using namespace ops_detail;
    check_seen("mark_seen", seen, seen.device);
    check_indices("mark_seen", "ids", ids, seen.device);
    FP_CHECK(ids.type == IndexView::Type::I32, "mark_seen: ids must be int32");
    FP_CHECK(slots != nullptr || ids.size == 0, "mark_seen: slots has no data (null pointer)");
    if (ids.size == 0) return;
    FP_CHECK(seen.rows > 0, "mark_seen: there are no seen sets (0 rows)");
    if (!seen.device.is_cpu()) {
#ifdef FLASHPORT_GPU
        gpu::mark_seen(seen, ids, slots, stream);
        return;
#else
        fail("mark_seen on ", seen.device.name(), " needs a GPU build; configure with --preset cuda or --preset hip");
#endif
    }
    (void)stream;
    cpu::mark_seen(seen, ids, slots);
}

}  // namespace flashport
