// Embedding lookup on the CPU: out[t, :] = table[ids[t], :], converted when the dtypes differ. The
// op has checked every id against the vocabulary.
#include <cstring>

#include "backends/cpu/ops_cpu.h"
#include "flashport/memory.h"

namespace flashport::cpu {

void embedding(const TensorView& out, const TensorView& table, const IndexView& ids) {
    const int64_t tokens = ids.size, hidden = table.dim(1);
    if (tokens == 0 || hidden == 0) return;
    const size_t row_bytes = size_t(hidden) * dtype_size(table.dtype);
    if (out.dtype == table.dtype) {
        for (int64_t t = 0; t < tokens; ++t) std::memcpy(out.at(t), table.at(ids[t]), row_bytes);
        return;
    }
    Buffer row(sizeof(float) * size_t(hidden));
    for (int64_t t = 0; t < tokens; ++t) {
        load_row(row.as<float>(), table.at(ids[t]), table.dtype, hidden);
        store_row(out.at(t), out.dtype, row.as<float>(), hidden);
    }
}

}  // namespace flashport::cpu
