// argmax on the CPU: the first maximum of each row, -1 for a row with a NaN or +inf.
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/ops_cpu.h"

namespace flashport::cpu {

void argmax(int32_t* ids, const TensorView& x) {
    const Rows rows(x);
    const int64_t n = x.dim(1);
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows.count(); ++r) {
        load_row(row.data(), rows(r), x.dtype, n);
        int64_t best = 0;
        bool bad = false;
        for (int64_t i = 0; i < n; ++i) {
            bad |= std::isnan(row[size_t(i)]) || row[size_t(i)] == std::numeric_limits<float>::infinity();
            if (row[size_t(i)] > row[size_t(best)]) best = i;
        }
        ids[r] = bad ? -1 : int32_t(best);
    }
}

}  // namespace flashport::cpu
