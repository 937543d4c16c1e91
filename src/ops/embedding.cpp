// embedding: validation (including every id against the vocabulary, where the ids are on the host)
// and dispatch.
#include "backends/cpu/ops_cpu.h"
#include "flashport/ops.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/ops_gpu.h"
#endif

namespace flashport {

void embedding(const TensorView& out, const TensorView& table, const IndexView& ids, void* stream) {
    using namespace ops_detail;
    check_view("embedding", "table", table, 2);
    check_view("embedding", "out", out, 2);
    const bool gpu = check_device("embedding", table, {&out});
    check_indices("embedding", "ids", ids, table.device);
    const int64_t vocab = table.dim(0), hidden = table.dim(1);
    FP_CHECK(out.dim(0) == ids.size && out.dim(1) == hidden, "embedding: out must be [tokens, hidden] = [", ids.size,
             ", ", hidden, "], got ", out.describe());
    if (gpu) {  // ids in device memory: the kernel checks them and writes NaN rows for bad ones
#ifdef FLASHPORT_GPU
        gpu::embedding(out, table, ids, stream);
#endif
        return;
    }
    for (int64_t t = 0; t < ids.size; ++t) {
        const int64_t id = ids[t];
        FP_CHECK(id >= 0 && id < vocab, "embedding: token id ", id, " at position ", t,
                 " is outside the vocabulary [0, ", vocab, ")");
    }
    (void)stream;  // the CPU kernels run on the calling thread
    cpu::embedding(out, table, ids);
}

}  // namespace flashport
