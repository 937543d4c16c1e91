// argmax (flashport/ops.h): validation and dispatch.
#include "backends/cpu/ops_cpu.h"
#include "flashport/error.h"
#include "flashport/ops.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/ops_gpu.h"
#endif

namespace flashport {

size_t argmax_workspace_bytes(const TensorView& x) {
    if (x.device.is_cpu() || x.ndim != 2) return 0;
#ifdef FLASHPORT_GPU
    return gpu::argmax_workspace_bytes(x.dim(0), x.dim(1));
#else
    return 0;
#endif
}

void argmax(int32_t* ids, const TensorView& x, void* workspace, size_t workspace_bytes, void* stream) {
    using namespace ops_detail;
    check_view("argmax", "x", x, 2);
    FP_CHECK(x.dim(1) >= 1 && x.dim(1) <= 0x7fffffff, "argmax: x must be [rows, n] with 1 <= n < 2^31, got ",
             x.describe());
    FP_CHECK(ids != nullptr || x.dim(0) == 0, "argmax: ids has no data (null pointer)");
    FP_CHECK(workspace == nullptr || workspace_bytes >= argmax_workspace_bytes(x), "argmax: the workspace must be ",
             argmax_workspace_bytes(x), " bytes (argmax_workspace_bytes), got ", workspace_bytes);
    if (check_device("argmax", x, {})) {
#ifdef FLASHPORT_GPU
        gpu::argmax(ids, x, workspace, workspace_bytes, stream);
#endif
        return;
    }
    (void)stream;  // the CPU kernels run on the calling thread
    cpu::argmax(ids, x);
}

void argmax(int32_t* ids, const TensorView& x, void* stream) {
    argmax(ids, x, nullptr, 0, stream);
}

}  // namespace flashport
