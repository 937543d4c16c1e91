// The GPU attention dispatcher: GPU-specific limits, the kernel name, and the launch. Kernels live in
// attention_naive.cu, attention_flash_portable*.cu, (CUDA only) attention_flash_mma*.cu and (HIP only)
// attention_flash_mfma*.cu, attention_flash_dot2_f16.cu.
#include "backends/gpu/attention_gpu.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backends/gpu/attention_kernels.h"
#include "backends/gpu/blas.h"
#include "backends/gpu/head_dim_switch.h"
#include "backends/gpu/runtime.h"
#include "backends/gpu/sm90.h"
#include "backends/gpu/view_strides.h"
#include "flashport/device.h"
#include "flashport/memory.h"

namespace flashport::gpu {
namespace {

std::atomic<FlashVariant>& variant_slot() {
    static std::atomic<FlashVariant> v{[] {
        const char* env = std::getenv("FLASHPORT_GPU_FLASH");
        if (env && std::strcmp(env, "mfma") == 0) return FlashVariant::MFMA;
        if (env && std::strcmp(env, "dot2") == 0) return FlashVariant::DOT2;
        if (env && std::strcmp(env, "wgmma") == 0) return FlashVariant::WGMMA;
        if (env && std::strcmp(env, "mma") == 0) return FlashVariant::MMA;  // AUTO would take wgmma at d128
        return env && std::strcmp(env, "portable") == 0 ? FlashVariant::PORTABLE : FlashVariant::AUTO;
    }()};
    return v;
}

// The wgmma kernel's TMA route for dense calls (attention_flash_wgmma.cu): FLASHPORT_GPU_WGMMA_TMA=1 or 0
// in the environment, else the build's default (WGMMA_TMA_BY_DEFAULT).
std::atomic<bool>& wgmma_tma_slot() {
    static std::atomic<bool> on{[] {
        const char* env = std::getenv("FLASHPORT_GPU_WGMMA_TMA");
        return env ? std::strcmp(env, "0") != 0 : WGMMA_TMA_BY_DEFAULT;
    }()};
    return on;
}

void check_gpu_view(const TensorView& t, const char* name, int device_index) {
    FP_CHECK(t.device.index == device_index, "attention: ", name, " is on ", t.device.name(), " but q is on gpu:",
             device_index);
    FP_CHECK(t.stride[3] == 1, "attention on GPU: ", name, " must have a contiguous head_dim (stride 1), got ",
             t.describe());
}

AttentionArgs make_args(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                        const TensorView& v, const TensorView* lse) {
    const AttentionShape& s = plan.shape;
    AttentionArgs a =
        attention_args(out, q, k, v, lse, plan.params.scale, plan.params.causal, plan.params.window_left);
    a.batch = int(s.batch);
    a.q_len = int(s.q_len);
    a.kv_len = int(s.kv_len);
    a.n_heads = int(s.n_heads);
    a.n_kv_heads = int(s.n_kv_heads);
    return a;
}

}  // namespace

AttentionArgs attention_args(const TensorView& out, const TensorView& q, const TensorView& k, const TensorView& v,
                             const TensorView* lse, float scale, bool causal, int64_t window_left) {
    AttentionArgs a{};
    a.q = q.data;
    a.k = k.data;
    a.v = v.data;
    a.out = out.data;
    a.lse = lse ? static_cast<float*>(lse->data) : nullptr;
    a.head_dim = int(q.dim(q.ndim - 1));
    // Views are [batch, len, heads, dim] (caches [block, slot, heads, dim]); the kernels take the three
    // outer strides.
    copy_strides(a.q_stride, &q);
    copy_strides(a.k_stride, &k);
    copy_strides(a.v_stride, &v);
    copy_strides(a.o_stride, &out);
    copy_strides(a.lse_stride, lse);
    a.scale = scale;
    a.scale_log2 = scale * LOG2E;
    a.causal = causal;
    a.window_left = window_left;
    return a;
}

// Where AUTO takes wgmma over mma.sync on compute capability 9.0: head dims whose wgmma tile is no wider
// than mma.sync's (so neither pads more) and where wgmma was measured ahead.
// - 97-128 (the 128 tile): ahead on the all-thread instance too (H200, 1.04-1.21x, 512-8192 tokens,
//   causal or not, GQA 7; docs/perf.md, "The pipelined wgmma kernel").
// - 33-64 and 161-256 (the 40, 64 and 256 tiles): ahead with the TMA route only (H100, 2026-12-05: d40
//   1.33x, d64 1.56x, d256 causal 2.27x mma.sync; the all-thread instance was slower at 64 and 256).
// - 65-96 and 129-160 (80, 96, 160) are unmeasured against mma.sync, 16 and 32 would pad to 40: mma.sync.
bool wgmma_beats_mma(int64_t head_dim, bool tma) {
    const int tile = WgmmaHeadDims::at_least(head_dim);
    if (tile == 0 || tile != FlashHeadDims::at_least(head_dim)) return false;
    return tile == 128 || (tma && (tile == 40 || tile == 64 || tile == 256));
}

AttentionKernel select_flash_kernel(FlashVariant variant, DType dtype, int64_t head_dim, const FlashTarget& target) {
    const bool mfma = target.mfma_built && matrix_cores_cover(target.matrix_cores, dtype);
    const bool dot2 = target.mfma_built && target.dot2_f16 && dtype == DType::F16;
    switch (variant) {
        case FlashVariant::AUTO:
            if (target.sm90_wgmma && wgmma_beats_mma(head_dim, target.wgmma_tma))
                return AttentionKernel::GPU_FLASH_WGMMA;
            if (target.nvidia_mma) return AttentionKernel::GPU_FLASH_MMA;
            if (mfma) return AttentionKernel::GPU_FLASH_MFMA;
            return dot2 ? AttentionKernel::GPU_FLASH_DOT2 : AttentionKernel::GPU_FLASH_PORTABLE;
        case FlashVariant::MMA:
            return target.nvidia_mma ? AttentionKernel::GPU_FLASH_MMA : AttentionKernel::GPU_FLASH_PORTABLE;
        case FlashVariant::MFMA:
            // A build without the kernel (CUDA) serves it with the portable one, as before; a HIP build on
            // a chip without the instructions says so instead of launching a kernel that traps.
            FP_CHECK(mfma || !target.mfma_built, "attention: the MFMA flash kernel (FLASHPORT_GPU_FLASH=mfma) needs ",
                     "AMD matrix cores for ", dtype_name(dtype), " (gfx90a, gfx940", dtype == DType::F16 ? ", gfx908" : "",
                     "); this device is ", target.arch, ". Unset FLASHPORT_GPU_FLASH or set it to portable");
            return mfma ? AttentionKernel::GPU_FLASH_MFMA : AttentionKernel::GPU_FLASH_PORTABLE;
        case FlashVariant::DOT2:
            // As MFMA: portable in a build without the AMD kernels, an error where the kernel would trap
            // (no v_dot2_f32_f16) or cannot serve (bf16: gfx906 has no bf16 dot2).
            FP_CHECK(dot2 || !target.mfma_built, "attention: the dot2 flash kernel (FLASHPORT_GPU_FLASH=dot2) ",
                     dtype == DType::F16 ? concat("needs v_dot2_f32_f16 (gfx906, gfx908, gfx90a, gfx940, gfx1030); "
                                                  "this device is ",
                                                  target.arch)
                                         : concat("takes fp16 only, got ", dtype_name(dtype)),
                     ". Unset FLASHPORT_GPU_FLASH or set it to portable");
            return dot2 ? AttentionKernel::GPU_FLASH_DOT2 : AttentionKernel::GPU_FLASH_PORTABLE;
        case FlashVariant::WGMMA:
            // Every head dim on compute capability 9.0; elsewhere as MMA.
            if (target.sm90_wgmma) return AttentionKernel::GPU_FLASH_WGMMA;
            return target.nvidia_mma ? AttentionKernel::GPU_FLASH_MMA : AttentionKernel::GPU_FLASH_PORTABLE;
        case FlashVariant::PORTABLE:
            break;
    }
    return AttentionKernel::GPU_FLASH_PORTABLE;
}

AttentionKernel flash_kernel(DType dtype, int64_t head_dim) {
    const DeviceInfo& dev = current_device_info();
    FlashTarget target;
#if defined(FLASHPORT_GPU_CUDA)
    target.nvidia_mma = dev.major >= 8;
    target.sm90_wgmma = sm90_available();
    target.wgmma_tma = wgmma_tma_enabled();
#endif
    target.mfma_built = mfma_kernels_built();
    target.matrix_cores = dev.matrix_cores;
    target.dot2_f16 = dot2_f16_of_arch(dev.arch);
    target.arch = dev.arch;
    return select_flash_kernel(variant_slot().load(), dtype, head_dim, target);
}

void set_wgmma_tma(bool on) { wgmma_tma_slot().store(on); }
bool wgmma_tma_enabled() { return wgmma_tma_slot().load(); }

bool mfma_kernels_built() {
#if defined(FLASHPORT_GPU_MFMA_KERNELS)
    return true;
#else
    return false;
#endif
}

bool mfma_flash_available(DType dtype) {
    return mfma_kernels_built() && matrix_cores_cover(current_device_info().matrix_cores, dtype);
}

bool dot2_flash_available() {
    return mfma_kernels_built() && dot2_f16_of_arch(current_device_info().arch);
}

void launch_flash_route(const AttentionArgs& args, DType dtype, int head_dim, AttentionKernel route, void* stream) {
    if (route == AttentionKernel::GPU_FLASH_WGMMA) {
#if defined(FLASHPORT_GPU_CUDA)
        flash_fwd_wgmma(args, dtype, head_dim, stream);
        return;
#else
        fail("attention: the wgmma flash kernel is not in this build (CUDA only)");
#endif
    }
    if (route == AttentionKernel::GPU_FLASH_MFMA) {
#if defined(FLASHPORT_GPU_MFMA_KERNELS)
        dtype == DType::F16 ? flash_fwd_mfma_cdna<DType::F16>(args, head_dim, stream)
                            : flash_fwd_mfma_cdna<DType::BF16>(args, head_dim, stream);
        return;
#else
        fail("attention: the MFMA flash kernel is not in this build (HIP only)");
#endif
    }
    if (route == AttentionKernel::GPU_FLASH_DOT2) {
#if defined(FLASHPORT_GPU_MFMA_KERNELS)
        FP_CHECK(dtype == DType::F16, "attention: the dot2 flash kernel takes fp16 only");
        flash_fwd_dot2<DType::F16>(args, head_dim, stream);
        return;
#else
        fail("attention: the dot2 flash kernel is not in this build (HIP only)");
#endif
    }
    launch_flash(args, dtype, head_dim, route == AttentionKernel::GPU_FLASH_MMA, stream);
}

void launch_flash(const AttentionArgs& args, DType dtype, int head_dim, bool mma, void* stream) {
#if defined(FLASHPORT_GPU_CUDA)
    if (mma) {
        dtype == DType::F16 ? flash_fwd_mma<DType::F16>(args, head_dim, stream)
                            : flash_fwd_mma<DType::BF16>(args, head_dim, stream);
        return;
    }
#else
    FP_CHECK(!mma, "attention: the tensor-core flash kernel exists only in CUDA builds");
#endif
    dtype == DType::F16 ? flash_fwd_portable<DType::F16>(args, head_dim, stream)
                        : flash_fwd_portable<DType::BF16>(args, head_dim, stream);
}

void set_flash_variant(FlashVariant variant) { variant_slot().store(variant); }
FlashVariant flash_variant() { return variant_slot().load(); }

void check_attention_views(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                           const TensorView& v, const TensorView* lse) {
    const AttentionShape& s = plan.shape;
    const int dev = q.device.index;
    FP_CHECK(dev >= 0 && dev < gpu_device_count(), "attention: ", q.device.name(), " does not exist (",
             gpu_device_count(), " GPU(s) present)");
    for (auto [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}}) check_gpu_view(*t, name, dev);
    if (lse) FP_CHECK(lse->device.index == dev, "attention: lse is on ", lse->device.name(), ", q on ", q.device.name());
    constexpr int64_t MAX_INT = 2147483647;
    for (int64_t x : {s.batch, s.q_len, s.kv_len, s.n_heads})
        FP_CHECK(x <= MAX_INT, "attention on GPU: sizes must fit in 32 bits, got ", x);
    FP_CHECK(s.batch <= 65535 && s.n_heads <= 65535, "attention on GPU: batch (", s.batch, ") and n_heads (",
             s.n_heads, ") must each be at most 65535 (grid limits)");
}

std::string flash_limit(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                        const TensorView& v) {
    if (q.dtype != DType::F16 && q.dtype != DType::BF16)
        return concat("attention (flash) on GPU takes fp16 or bf16, got ", dtype_name(q.dtype),
                      "; use impl=naive for fp32");
    if (plan.shape.head_dim % 8 != 0 || FlashHeadDims::at_least(plan.shape.head_dim) == 0)
        return concat("attention (flash) on GPU supports head dims that are multiples of 8 up to ",
                      FlashHeadDims::values[FlashHeadDims::count - 1], ", got ", plan.shape.head_dim,
                      "; use impl=naive for other sizes");
    for (auto [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}}) {
        std::string why = misaligned_16_byte_rows("attention (flash, GPU)", *t, name);
        if (!why.empty()) return why;
    }
    return {};
}

const char* flash_route_name(AttentionKernel route) {
    switch (route) {
        case AttentionKernel::GPU_FLASH_MMA:
            return "mma";
        case AttentionKernel::GPU_FLASH_MFMA:
            return "mfma";
        case AttentionKernel::GPU_FLASH_DOT2:
            return "dot2";
        case AttentionKernel::GPU_FLASH_WGMMA:
            return "wgmma";
        case AttentionKernel::GPU_FLASH_PORTABLE:
            return "portable";
        default:
            fail("attention: route ", int(route), " is not a GPU flash kernel");
    }
}

std::string attention_kernel_name(const AttentionPlan& plan, DType dtype) {
    switch (plan.route) {
        case AttentionKernel::GPU_NAIVE:  // its GEMMs take the inputs' dtype
            return std::string("gpu.naive.") + blas::gemm_name(dtype);
        case AttentionKernel::GPU_FLASH_MMA:
        case AttentionKernel::GPU_FLASH_PORTABLE:
        case AttentionKernel::GPU_FLASH_MFMA:
        case AttentionKernel::GPU_FLASH_DOT2:
        case AttentionKernel::GPU_FLASH_WGMMA:
            return std::string("gpu.flash.") + flash_route_name(plan.route) + ".d" + std::to_string(plan.shape.head_dim);
        default:
            fail("attention: route ", int(plan.route), " is not a GPU kernel");
    }
}

size_t attention_workspace_bytes(const AttentionPlan& plan, DType dtype) {
    if (plan.route != AttentionKernel::GPU_NAIVE) return 0;
    return naive_workspace_bytes(plan, dtype);
}

void run_attention_with_workspace(const AttentionPlan& plan, const TensorView& out, const TensorView& q,
                                  const TensorView& k, const TensorView& v, const TensorView* lse, void* workspace,
                                  void* stream) {
    const AttentionArgs args = make_args(plan, out, q, k, v, lse);
    if (args.batch == 0 || args.q_len == 0 || args.n_heads == 0) return;
    check_current_device("attention", q.device);
    if (plan.route == AttentionKernel::GPU_NAIVE) {
        attention_naive(out, args, plan.shape.head_dim, workspace, stream);
        return;
    }
    launch_flash_route(args, q.dtype, int(plan.shape.head_dim), plan.route, stream);
}

AttentionArgs varlen_args(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView* lse, const VarlenSeqsView& seqs) {
    AttentionArgs args = make_args(plan, out, q, k, v, lse);
    // Sequence b's rows start at cu[b] on the packed axis: no batch stride.
    args.q_stride[0] = args.k_stride[0] = args.v_stride[0] = args.o_stride[0] = args.lse_stride[0] = 0;
    args.cu_q = seqs.cu_q;
    args.cu_k = seqs.cu_k;
    args.total_q = q.dim(1);
    args.total_k = k.dim(1);
    args.batch = int(seqs.batch);
    args.q_len = int(seqs.max_seqlen_q);
    args.kv_len = 0;  // per sequence, from cu_k
    return args;
}

void run_attention_varlen(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                          const TensorView& v, const TensorView* lse, const VarlenSeqsView& seqs, void* stream) {
    if (plan.route == AttentionKernel::GPU_FLASH_SPLIT_KV) {
        run_split_kv_varlen(plan, out, q, k, v, lse, seqs, stream);
        return;
    }
    FP_CHECK(plan.route == AttentionKernel::GPU_FLASH_MMA || plan.route == AttentionKernel::GPU_FLASH_PORTABLE ||
                 plan.route == AttentionKernel::GPU_FLASH_MFMA || plan.route == AttentionKernel::GPU_FLASH_DOT2 ||
                 plan.route == AttentionKernel::GPU_FLASH_WGMMA,
             "attention_varlen on GPU runs the flash kernel only");
    const AttentionArgs args = varlen_args(plan, out, q, k, v, lse, seqs);
    if (args.batch == 0 || args.q_len == 0 || args.n_heads == 0) return;
    check_current_device("attention_varlen", q.device);
    launch_flash_route(args, q.dtype, int(plan.shape.head_dim), plan.route, stream);
}

void run_attention(const AttentionPlan& plan, const TensorView& out, const TensorView& q, const TensorView& k,
                   const TensorView& v, const TensorView* lse, void* stream) {
    const size_t ws = attention_workspace_bytes(plan, q.dtype);
    if (ws == 0) {
        run_attention_with_workspace(plan, out, q, k, v, lse, nullptr, stream);
        return;
    }
    Buffer workspace(ws, q.device);  // freed on return; cudaFree waits for the kernels using it
    run_attention_with_workspace(plan, out, q, k, v, lse, workspace.data(), stream);
}

}  // namespace flashport::gpu
