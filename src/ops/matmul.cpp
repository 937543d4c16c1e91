// matmul: validation, the choice between GEMV and BLAS, and dispatch. plan_matmul is the one place
// that decides both whether a request is supported and which kernel serves it.
#include "backends/cpu/ops_cpu.h"
#include "flashport/ops.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/ops_gpu.h"
#endif

namespace flashport {
namespace {

// sgemm takes int sizes and leading dimensions.
constexpr int64_t BLAS_MAX_DIM = 0x7fffffff;

MatmulImpl resolve(MatmulImpl impl, int64_t tokens) {
    if (impl != MatmulImpl::AUTO) return impl;
    return tokens <= GEMV_MAX_TOKENS ? MatmulImpl::GEMV : MatmulImpl::BLAS;
}

}  // namespace

const char* matmul_impl_name(MatmulImpl impl) {
    switch (impl) {
        case MatmulImpl::AUTO: return "auto";
        case MatmulImpl::GEMV: return "gemv";
        case MatmulImpl::BLAS: return "blas";
    }
    return "?";
}

std::string plan_matmul(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias,
                        MatmulImpl impl) {
    using namespace ops_detail;
    check_view("matmul", "x", x, 2);
    check_view("matmul", "weight", weight, 2);
    check_view("matmul", "out", out, 2);
    const int64_t tokens = x.dim(0), in = x.dim(1), n_out = weight.dim(0);
    FP_CHECK(weight.dim(1) == in, "matmul: weight must be [out, in] with in = x's last dimension (", in, "), got ",
             weight.describe());
    FP_CHECK(out.dim(0) == tokens && out.dim(1) == n_out, "matmul: out must be [tokens, out] = [", tokens, ", ",
             n_out, "], got ", out.describe());
    FP_CHECK(out.data != x.data && out.data != weight.data, "matmul: out must not alias x or weight (not in place)");
    if (bias) {
        check_view("matmul", "bias", *bias, 1);
        FP_CHECK(bias->dim(0) == n_out, "matmul: bias must be [out] = [", n_out, "], got ", bias->describe());
    }
    const bool gpu = bias ? check_device("matmul", x, {&weight, &out, bias}) : check_device("matmul", x, {&weight, &out});
    // The GPU's choice is its own (gpu::plan_matmul); the int limit applies to its BLAS path as well
    // (vendor BLAS takes int sizes), and the GEMV is never chosen for sizes anywhere near it.
    const MatmulImpl resolved = gpu ? MatmulImpl::BLAS : resolve(impl, tokens);
    if (resolved == MatmulImpl::BLAS)
        FP_CHECK(tokens <= BLAS_MAX_DIM && in <= BLAS_MAX_DIM && n_out <= BLAS_MAX_DIM &&
                     weight.stride[0] <= BLAS_MAX_DIM && out.stride[0] <= BLAS_MAX_DIM && x.stride[0] <= BLAS_MAX_DIM,
                 "matmul: the BLAS path takes sizes and row strides up to 2^31 - 1, got x ", x.describe(),
                 ", weight ", weight.describe(), ", out ", out.describe());
    if (gpu) {
#ifdef FLASHPORT_GPU
        return gpu::plan_matmul(out, x, weight, bias, impl);
#endif
    }
    return cpu::matmul_kernel_name(resolved, x, weight);
}

std::string matmul(const TensorView& out, const TensorView& x, const TensorView& weight, const TensorView* bias,
                   MatmulImpl impl, void* stream) {
    std::string kernel = plan_matmul(out, x, weight, bias, impl);
    if (!x.device.is_cpu()) {
#ifdef FLASHPORT_GPU
        gpu::matmul(out, x, weight, bias, impl, stream);
#endif
        return kernel;
    }
    (void)stream;  // the CPU kernels run on the calling thread
    cpu::matmul(out, x, weight, bias, resolve(impl, x.dim(0)));
    return kernel;
}

}  // namespace flashport
