// linear (flashport/linear.h): validation, then the kernel its plan names (LinearKernel): the GPU's
// GEMV (backends/gpu/linear.cu; a norm before it in its own launch unless norm_in_prologue), or the
// composition of rms_norm, matmul and add / swiglu
// through the caller's workspace. Its float64 reference is cpu::linear_reference
// (backends/cpu/linear.cpp).
#include "flashport/linear.h"

#include <cstdint>

#include "flashport/error.h"
#include "flashport/paged_cache.h"
#include "ops/op_checks.h"
#ifdef FLASHPORT_GPU
#include "backends/gpu/ops_gpu.h"
#endif

namespace flashport {
namespace {

constexpr size_t ALIGN = 256;  // each workspace part starts on a 256-byte boundary (vector loads)

size_t align_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

// What runs, decided once by plan_linear; routing switches on it, never on a name.
enum class LinearKernel : uint8_t {
    COMPOSED,             // rms_norm, matmul, add / swiglu / rope_qk_cache_write one after the other
                          // (any device, dtype, tokens)
    GPU_GEMV_FUSED,       // one GEMV launch with the norm prologue and the add / SwiGLU / RoPE epilogue
    GPU_GEMV_NORM_APART,  // rms_norm into the workspace, then the GEMV with its epilogue (a norm without
                          // norm_in_prologue)
};

struct LinearPlan {
    LinearKernel kernel = LinearKernel::COMPOSED;
    bool gpu = false;
    size_t h_bytes = 0, y_bytes = 0;  // the composition's normalised x and product
    bool accumulate = false;          // composed: the GPU GEMM adds onto out, the residual (no y, no add)
};

// out's q, k and v heads for rope_cache: [tokens, heads, head_dim] views of its packed columns.
struct QkvViews {
    TensorView q, k, v;
};
QkvViews qkv_views(const TensorView& out, const RopeCacheWrite& rc) {
    FP_CHECK(rc.k_cache.ndim == 4, "linear: rope_cache's k_cache must be [num_blocks, block_size, n_kv_heads, ",
             "head_dim], got ", rc.k_cache.describe());
    const int64_t head_dim = rc.k_cache.dim(3), cols = out.dim(1);
    // Bounded by cols first, so the product below cannot overflow.
    FP_CHECK(rc.n_heads > 0 && rc.n_kv_heads > 0 && head_dim > 0 && rc.n_heads <= cols && rc.n_kv_heads <= cols &&
                 head_dim <= cols && (rc.n_heads + 2 * rc.n_kv_heads) * head_dim == cols,
             "linear: with rope_cache out must be [tokens, (n_heads + 2 · n_kv_heads) · head_dim] with n_heads ",
             rc.n_heads, ", n_kv_heads ", rc.n_kv_heads, " and the cache's head_dim ", head_dim, ", got ",
             out.describe());
    const int64_t q_cols = rc.n_heads * head_dim, kv_cols = rc.n_kv_heads * head_dim;
    return {out.narrowed(1, 0, q_cols).split_heads(head_dim), out.narrowed(1, q_cols, kv_cols).split_heads(head_dim),
            out.narrowed(1, q_cols + kv_cols, kv_cols).split_heads(head_dim)};
}

LinearPlan plan_linear(const TensorView& out, const TensorView& x, const TensorView& weight, const LinearParams& p) {
    using namespace ops_detail;
    constexpr const char* OP = "linear";
    check_view(OP, "x", x, 2);
    check_view(OP, "weight", weight, 2);
    check_view(OP, "out", out, 2);
    const int64_t tokens = x.dim(0), in = x.dim(1), rows = weight.dim(0);
    FP_CHECK(weight.dim(1) == in, "linear: weight must be [rows, in] with in = x's last dimension (", in, "), got ",
             weight.describe());
    FP_CHECK(!(p.swiglu && p.residual), "linear: swiglu and a residual can't be combined");
    FP_CHECK(!p.swiglu || rows % 2 == 0, "linear: with swiglu, weight must be [gate; up] with an even number of rows, got ",
             weight.describe());
    const int64_t cols = p.swiglu ? rows / 2 : rows;
    FP_CHECK(out.dim(0) == tokens && out.dim(1) == cols, "linear: out must be [tokens, ", p.swiglu ? "rows / 2" : "rows",
             "] = [", tokens, ", ", cols, "], got ", out.describe());
    FP_CHECK(out.data != x.data && out.data != weight.data, "linear: out must not alias x or weight (not in place)");
    if (p.bias) {
        check_view(OP, "bias", *p.bias, 1);
        FP_CHECK(p.bias->dim(0) == rows, "linear: bias must be [rows] = [", rows, "], got ", p.bias->describe());
    }
    if (p.norm_weight) {
        check_view(OP, "norm_weight", *p.norm_weight, 1);
        FP_CHECK(p.norm_weight->dim(0) == in, "linear: norm_weight must be [in] = [", in, "], got ",
                 p.norm_weight->describe());
    }
    if (p.residual) {
        check_view(OP, "residual", *p.residual, 2);
        check_same_shape(OP, "residual", *p.residual, "out", out);
    }
    if (p.rope_cache) {  // every check before anything is written, as rope_qk_cache_write's own
        FP_CHECK(!p.swiglu && !p.residual, "linear: rope_cache can't be combined with swiglu or a residual");
        const RopeCacheWrite& rc = *p.rope_cache;
        const QkvViews v = qkv_views(out, rc);
        check_rope_qk_cache_write("linear (rope_cache)", v.q, v.k, v.v, rc.positions, rc.rope, rc.k_cache, rc.v_cache,
                                  rc.slots);
    }
    // An absent optional tensor stands in as x, which is trivially on x's device.
    const auto or_x = [&x](const TensorView* t) { return t ? t : &x; };
    const bool gpu = check_device(OP, x, {&weight, &out, or_x(p.bias), or_x(p.norm_weight), or_x(p.residual)});
    LinearPlan plan;
    plan.gpu = gpu;
#ifdef FLASHPORT_GPU
    if (gpu && gpu::use_linear_gemv(out, x, weight, p)) {
        // More than one token runs the matrix-core GEMV, which has no norm prologue.
        const bool apart = p.norm_weight && (!p.norm_in_prologue || tokens > 1);
        plan.kernel = apart ? LinearKernel::GPU_GEMV_NORM_APART : LinearKernel::GPU_GEMV_FUSED;
    }
#endif
    if (plan.kernel == LinearKernel::GPU_GEMV_FUSED) return plan;
#ifdef FLASHPORT_GPU
    // In place (out is the residual): the GEMM adds the product to it (beta = 1), with no add launch.
    plan.accumulate = gpu && p.residual && p.residual_in_gemm &&
                      gpu::matmul_accumulate_serves(out, x, weight, *p.residual, p.bias, p.impl);
#endif
    // The norm apart takes the composition's workspace too, so that it can fall back to it.
    if (p.norm_weight) plan.h_bytes = align_up(size_t(tokens * in) * dtype_size(x.dtype));
    if (p.swiglu || p.residual) plan.y_bytes = align_up(size_t(tokens * rows) * dtype_size(out.dtype));
    return plan;
}

void check_workspace(const LinearPlan& plan, const void* workspace, size_t workspace_bytes) {
    FP_CHECK(workspace_bytes >= plan.h_bytes + plan.y_bytes, "linear: the workspace holds ", workspace_bytes,
             " bytes, this call needs ", plan.h_bytes + plan.y_bytes, " (linear_workspace_bytes)");
    FP_CHECK(workspace || plan.h_bytes + plan.y_bytes == 0, "linear: the workspace has no data (null pointer)");
}

// x normalised into the workspace's first part: [tokens, in].
TensorView normalised(const TensorView& x, const LinearParams& p, void* workspace, void* stream) {
    const TensorView h(workspace, x.dtype, {x.dim(0), x.dim(1)}, x.device);
    rms_norm(h, x, *p.norm_weight, p.eps, stream);
    return h;
}

// The composition: "cpu.linear.composed(rms_norm+cpu.matmul.blas+add)" names what ran inside; in
// place on the GPU's GEMM, "gpu.linear.composed(gpu.matmul.blas.accumulate)".
std::string run_composed(const LinearPlan& plan, const TensorView& out, const TensorView& x, const TensorView& weight,
                         const LinearParams& p, void* workspace, size_t workspace_bytes, void* stream) {
    check_workspace(plan, workspace, workspace_bytes);
    const int64_t tokens = x.dim(0), rows = weight.dim(0);
    char* ws = static_cast<char*>(workspace);
    std::string parts;

    TensorView h = x;  // [tokens, in]
    if (p.norm_weight) {
        h = normalised(x, p, workspace, stream);
        parts = "rms_norm+";
    }
    if (!p.swiglu && !p.residual) {
        parts += matmul(out, h, weight, p.bias, p.impl, stream);
        if (p.rope_cache) {
            const RopeCacheWrite& rc = *p.rope_cache;
            const QkvViews v = qkv_views(out, rc);
            rope_qk_cache_write(v.q, v.k, v.v, rc.positions, rc.rope, rc.k_cache, rc.v_cache, rc.slots, stream);
            parts += "+rope_qk_cache_write";
        }
    } else if (plan.accumulate) {
#ifdef FLASHPORT_GPU
        parts += gpu::matmul_accumulate(out, h, weight, stream);
#endif
    } else {
        const TensorView y(ws + plan.h_bytes, out.dtype, {tokens, rows}, x.device);  // [tokens, rows]
        parts += matmul(y, h, weight, p.bias, p.impl, stream);
        if (p.residual) {
            add(out, *p.residual, y, stream);
            parts += "+add";
        } else {
            swiglu(out, y.narrowed(1, 0, rows / 2), y.narrowed(1, rows / 2, rows / 2), stream);
            parts += "+swiglu";
        }
    }
    return std::string(plan.gpu ? "gpu" : "cpu") + ".linear.composed(" + parts + ")";
}

}  // namespace

size_t linear_workspace_bytes(const TensorView& out, const TensorView& x, const TensorView& weight,
                              const LinearParams& params) {
    const LinearPlan plan = plan_linear(out, x, weight, params);
    return plan.h_bytes + plan.y_bytes;
}

std::string linear(const TensorView& out, const TensorView& x, const TensorView& weight, const LinearParams& p,
                   void* workspace, size_t workspace_bytes, void* stream) {
    const LinearPlan plan = plan_linear(out, x, weight, p);
    switch (plan.kernel) {
        case LinearKernel::GPU_GEMV_FUSED:
#ifdef FLASHPORT_GPU
            return std::string("gpu.linear.") + gpu::linear_gemv(out, x, weight, p, stream);
#endif
            break;
        case LinearKernel::GPU_GEMV_NORM_APART: {
            check_workspace(plan, workspace, workspace_bytes);
            // The GEMV's 16-byte loads of the normalised x: a workspace off that boundary composes.
            if (reinterpret_cast<uintptr_t>(workspace) % 16 != 0) break;
#ifdef FLASHPORT_GPU
            LinearParams without_norm = p;
            without_norm.norm_weight = nullptr;
            return std::string("gpu.linear.rms_norm+") +
                   gpu::linear_gemv(out, normalised(x, p, workspace, stream), weight, without_norm, stream);
#endif
            break;
        }
        case LinearKernel::COMPOSED: break;
    }
    return run_composed(plan, out, x, weight, p, workspace, workspace_bytes, stream);
}

}  // namespace flashport
