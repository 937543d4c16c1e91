// The rule table. C-family patterns run on the source with comments and string literals blanked
// (lexer.h), except the header name of an #include; Python patterns run with comments blanked.
// Adding a rule is adding an entry; tests/unit/test_port_check.cpp gives each a positive snippet.
#include "portcheck/rules.h"

#include <array>

namespace flashport::portcheck {

namespace {

// An #include of a header under NAME (a PCRE2 fragment), its column at the header name.
#define FP_INCLUDE(NAME) R"(^[ \t]*#[ \t]*include[ \t]*[<"]()" NAME ")"

constexpr std::array kRules{
    // ---- Warp width: AMD's GCN/CDNA chips (MI50 to MI300) run 64-wide wavefronts.
    Rule{"warp-size-32", Severity::error, kCFamily, R"(\b(warpSize\s*[!=]=\s*32)\b|\b(32\s*[!=]=\s*warpSize)\b)",
         "warpSize compared with 32: it is 64 on AMD GCN/CDNA (MI50..MI300)",
         "derive lane and warp counts from warpSize (or a compile-time wave size per target)", "warpSize"},
    // Two entries, not one alternation: each pattern then has a fixed start (a line start, a `const`)
    // that PCRE2 finds quickly.
    Rule{"warp-size-define", Severity::error, kCFamily,
         R"(^[ \t]*#[ \t]*define[ \t]+(\w*(?i:warp|wave|lane)\w*)[ \t]+\(?32\b)",
         "warp size defined as 32: a wavefront is 64 lanes on AMD GCN/CDNA",
         "use warpSize in device code, or a per-target constant (64 for gfx8/gfx9, 32 for gfx10+/NVIDIA)", "define"},
    Rule{"warp-size-constant", Severity::error, kCFamily,
         R"(\b(?:constexpr|const)\s+(?:static\s+)?(?:unsigned\s+|signed\s+|int\s+|long\s+|auto\s+|size_t\s+|)"
         R"(std::u?int\d+_t\s+|u?int\d+_t\s+)+(\w*(?i:warp|wave)\w*)\s*[={]\s*32\b)",
         "warp size hard-coded as 32: a wavefront is 64 lanes on AMD GCN/CDNA",
         "use warpSize in device code, or a per-target constant (64 for gfx8/gfx9, 32 for gfx10+/NVIDIA)", "32"},
    Rule{"full-mask-32", Severity::error, kCFamily,
         R"(\b(__(?:shfl(?:_up|_down|_xor)?|ballot|any|all|uni|match_any|match_all|reduce_\w+)_sync)\s*\(\s*)"
         R"((?:0[xX][fF]{8}[uUlL]*|~0[uU]?|\(unsigned(?: int)?\)\s*-1|0[xX]FFFFFFFF))",
         "32-bit full-lane mask: HIP's *_sync intrinsics take a 64-bit mask and a 32-bit one covers half a wavefront",
         "pass a 64-bit mask built for the wave size (e.g. ~0ull on HIP, 0xffffffff on CUDA), or use the mask-free "
         "__shfl/__ballot forms",
         "_sync"},
    Rule{"activemask", Severity::warning, kCFamily, R"(\b(__activemask)\s*\()",
         "__activemask() is 64 bits on AMD: storing it in a 32-bit unsigned drops half the wavefront",
         "hold lane masks in a 64-bit type (unsigned long long) and count lanes with __popcll", "__activemask"},
    Rule{"lane-arithmetic-32", Severity::error, kCFamily,
         R"(\b(threadIdx\.[xyz]|tid|thread_id)\s*(?:&\s*(?:31|0[xX]1[fF])|%\s*32|/\s*32|>>\s*5)\b)",
         "lane or warp index computed with a fixed width of 32 from a thread index",
         "use `& (warpSize - 1)` / `% warpSize` and `/ warpSize` (or the per-target wave-size constant)",
         "threadIdx|tid|thread_id"},

    // ---- NVIDIA-only code, each with its ROCm counterpart.
    Rule{"inline-ptx", Severity::error, kCuda, R"(\b(asm|__asm__)\s*(?:volatile\s*|__volatile__\s*)?\()",
         "inline assembly in CUDA source is PTX, which HIP cannot compile",
         "use a CUDA/HIP intrinsic, or guard it for NVIDIA and give AMD a path (HIP builtins, GCN asm)", "asm"},
    Rule{"nvidia-header-cublaslt", Severity::error, kCFamily, FP_INCLUDE(R"(cublasLt\.h)"), "cuBLASLt is NVIDIA-only",
         "use hipBLASLt (<hipblaslt/hipblaslt.h>)", "cublasLt.h"},
    Rule{"nvidia-header-cudnn", Severity::error, kCFamily, FP_INCLUDE(R"(cudnn\w*\.h)"),
         "cuDNN used directly is NVIDIA-only", "use MIOpen (<miopen/miopen.h>), or hipDNN where available", "cudnn"},
    Rule{"nvidia-header-cutlass", Severity::error, kCFamily, FP_INCLUDE(R"((?:cutlass|cute)/)"),
         "CUTLASS/CuTe targets NVIDIA tensor cores only", "use composable_kernel (CK) or rocWMMA on ROCm",
         "cutlass/|cute/"},
    Rule{"nvidia-header-nvml", Severity::error, kCFamily, FP_INCLUDE(R"(nvml\.h)"), "NVML is NVIDIA-only",
         "use amdsmi (<amd_smi/amdsmi.h>) or rocm_smi (<rocm_smi/rocm_smi.h>)", "nvml.h"},
    Rule{"nvidia-header-cupti", Severity::error, kCFamily, FP_INCLUDE(R"(cupti\w*\.h)"), "CUPTI is NVIDIA-only",
         "use rocprofiler-sdk or roctracer", "cupti"},
    Rule{"nvidia-header-nvtx", Severity::warning, kCFamily, FP_INCLUDE(R"((?:nvToolsExt\w*\.h|nvtx3/))"),
         "NVTX ranges are NVIDIA-only", "use roctx (<roctracer/roctx.h>)", "nvToolsExt|nvtx3/"},
    Rule{"nvidia-header-bf16", Severity::warning, kCFamily, FP_INCLUDE(R"(cuda_bf16\.h)"),
         "cuda_bf16.h has no HIP equivalent under that name", "include <hip/hip_bf16.h> on HIP", "cuda_bf16.h"},
    Rule{"nvidia-header-fp8", Severity::warning, kCFamily, FP_INCLUDE(R"(cuda_fp8\.h)"),
         "cuda_fp8.h has no HIP equivalent under that name",
         "include <hip/hip_fp8.h> on HIP (MI300 uses the FNUZ fp8 formats)", "cuda_fp8.h"},
    Rule{"nvidia-type-bf16", Severity::warning, kCFamily, R"(\b(__nv_bfloat162?)\b)",
         "__nv_bfloat16 is CUDA's type name", "use __hip_bfloat16 (hip_bf16.h), or a name map for both",
         "__nv_bfloat16"},

    // ---- Hardware limits: types the oldest supported AMD chips lack.
    Rule{"hw-bf16", Severity::note, kCFamily, R"(\b(__nv_bfloat162?|__hip_bfloat162?|hip_bfloat16)\b)",
         "bf16 has no hardware support on gfx906 (MI50/MI60) and gfx908 lacks bf16 dot instructions: emulated, slow",
         "keep an fp16 or fp32 path for gfx906, or check the arch before choosing bf16", "bfloat16"},
    Rule{"hw-fp8", Severity::note, kCFamily, R"(\b(__nv_fp8\w*|__hip_fp8\w*)\b)",
         "fp8 needs gfx942 (MI300) or newer; MI300 uses the FNUZ variants (e4m3fnuz/e5m2fnuz)",
         "keep a wider type for older chips and select the FNUZ format on gfx942", "_fp8"},

    // ---- Python.
    Rule{"torch-version-cuda", Severity::warning, kPython, R"(\b(torch\.version\.cuda)\b)",
         "torch.version.cuda is None on ROCm builds of PyTorch",
         "test torch.cuda.is_available() for a GPU, torch.version.hip for ROCm", "torch.version.cuda"},
    Rule{"nvidia-smi", Severity::warning, kPython, R"((nvidia-smi)\b)", "nvidia-smi does not exist on ROCm machines",
         "use amd-smi (or rocm-smi) on ROCm, or torch.cuda.* queries that work on both", "nvidia-smi", true},
    Rule{"import-xformers", Severity::warning, kPython, R"(^[ \t]*(?:from|import)[ \t]+(xformers)\b)",
         "xformers' ROCm support covers only some ops and versions",
         "use torch.nn.functional.scaled_dot_product_attention, or a ROCm build of xformers", "xformers"},
    Rule{"import-flash-attn", Severity::warning, kPython, R"(^[ \t]*(?:from|import)[ \t]+(flash_attn)\b)",
         "the flash_attn wheel is CUDA-only; ROCm has a separate build (CK for MI200/MI300, Triton) and none "
         "for gfx906",
         "install ROCm's flash-attention build, or fall back to scaled_dot_product_attention (or flashport)",
         "flash_attn"},
    Rule{"import-bitsandbytes", Severity::warning, kPython, R"(^[ \t]*(?:from|import)[ \t]+(bitsandbytes)\b)",
         "bitsandbytes' ROCm support is recent and partial",
         "check the ROCm build's op coverage, or quantize another way", "bitsandbytes"},
    Rule{"import-apex", Severity::warning, kPython, R"(^[ \t]*(?:from|import)[ \t]+(apex)\b)",
         "NVIDIA apex needs ROCm's fork (ROCm/apex) to build on AMD",
         "use torch.amp and PyTorch's fused optimizers, or install ROCm's apex", "apex"},
    Rule{"hw-bf16-torch", Severity::note, kPython, R"(\b(torch\.bfloat16)\b)",
         "bf16 has no hardware support on gfx906 (MI50/MI60): emulated, slow",
         "keep a float16 path and pick it on gfx906", "torch.bfloat16"},
    Rule{"hw-fp8-torch", Severity::note, kPython, R"(\b(torch\.float8_\w+))",
         "fp8 needs gfx942 (MI300) or newer, which uses the FNUZ variants",
         "use torch.float8_e4m3fnuz / float8_e5m2fnuz on gfx942, a wider type before it", "torch.float8_"},
};
#undef FP_INCLUDE

// Raised by the scanner, listed so outputs (SARIF's rules[]) and suppressions know them.
constexpr std::array kScannerRules{
    Rule{kUnjustifiedSuppression, Severity::error, kCFamily | kPython, nullptr,
         "port-check suppression without a reason", "add `-- why this is safe on ROCm` after the rule ids", nullptr},
    Rule{kUnknownSuppression, Severity::error, kCFamily | kPython, nullptr,
         "port-check suppression names no known rule", "use a rule id from `docs/port-check.md`", nullptr},
};

constexpr auto all_rules() {
    std::array<Rule, kRules.size() + kScannerRules.size()> all{};
    for (size_t i = 0; i < kRules.size(); ++i) all[i] = kRules[i];
    for (size_t i = 0; i < kScannerRules.size(); ++i) all[kRules.size() + i] = kScannerRules[i];
    return all;
}
constexpr auto kAllRules = all_rules();

}  // namespace

std::span<const Rule> rules() {
    return kAllRules;
}

const Rule* find_rule(std::string_view id) {
    for (const Rule& r : kAllRules)
        if (id == r.id) return &r;
    return nullptr;
}

}  // namespace flashport::portcheck
