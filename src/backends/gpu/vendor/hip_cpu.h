// What ROCm's HIP CPU Runtime (../shared/third_party/hip-cpu) lacks for flashport's kernels. With it,
// the portable kernels compile as host C++ and run on the CPU with a 64-wide wavefront (warpSize 64:
// the GCN/CDNA width of the MI50..MI300), so their wave64 logic is executed in CI, not only compiled.
// It says nothing about speed. Included by vendor/hip.h when FLASHPORT_HIP_CPU is defined.
//
// How that runtime executes a block, and what follows for kernels: each thread of a block is a fiber
// on one host thread; __syncthreads and every shuffle are a round-robin yield through all the block's
// fibers. A block's threads must therefore all reach the same sequence of barriers and shuffles (no
// shuffle inside a branch that only some warps take, no early return before a barrier); otherwise the
// runtime silently pairs one thread's shuffle with another's barrier. Real GPUs only need a warp's
// lanes to agree on shuffles, so kernels can break this unnoticed: here every barrier and shuffle is
// logged per block (fp_hip_cpu::BlockLog) and a thread that strays aborts the test with a message.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <vector>

// ---- Fiber stacks ---------------------------------------------------------------------------------
// The runtime asks libco for 7 KB fiber stacks, which a kernel's frame can outgrow, and libco's malloc'd
// stacks would then overflow silently into the heap. libco's allocation hook (LIBCO_MALLOC/FREE, used
// as `LIBCO_MALLOC(size)` on the stack size variable) gives every fiber FP_FIBER_STACK bytes instead,
// above a PROT_NONE guard page, so a deeper kernel faults instead of corrupting memory.
inline constexpr unsigned FP_FIBER_STACK = 256u << 10;
inline void* fp_fiber_stack_alloc(unsigned& size) noexcept {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    void* base =
        mmap(nullptr, page + FP_FIBER_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (base == MAP_FAILED) return nullptr;
    mprotect(base, page, PROT_NONE);
    size = FP_FIBER_STACK;
    return static_cast<char*>(base) + page;
}
inline void fp_fiber_stack_free(void* stack) noexcept {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    munmap(static_cast<char*>(stack) - page, page + FP_FIBER_STACK);
}
#define LIBCO_MALLOC(size) fp_fiber_stack_alloc(size)
#define LIBCO_FREE(stack) fp_fiber_stack_free(stack)

#include <hip/hip_runtime.h>

#define FLASHPORT_GPU_VENDOR "HIP-CPU"  // gpu_backend_name(): tests skip what this runtime lacks (graphs)

// The runtime marks kernels and device functions `simd` (vector clones, for speed), which GCC refuses
// for struct arguments; flashport runs them here for their results only.
#undef __global__
#define __global__ __attribute__((flatten))
#undef __device__
#define __device__

using std::isinf;
using std::isnan;

// CUDA's fast exp; glibc declares an internal __expf that it does not export, hence the new name.
inline float fp_hip_cpu_expf(float x) noexcept {
    return std::exp(x);
}
#define __expf fp_hip_cpu_expf
// CUDA's fast division (HIP's headers have it; the CPU runtime does not).
inline float __fdividef(float x, float y) noexcept {
    return x / y;
}

// ---- Uniform barriers, checked --------------------------------------------------------------------
// Each block runs on one host thread, so a thread_local log is the block's. Thread 0 runs first and
// starts it; every barrier or shuffle is checked against what the first thread to reach that step
// did; the last thread to leave checks that all reached the same number of steps.
namespace fp_hip_cpu {
enum Step : uint8_t { BARRIER, SHUFFLE };
struct BlockLog {
    std::vector<uint8_t> steps;     // what the step-n barrier of this block is
    std::vector<uint32_t> reached;  // steps each thread has reached
    uint32_t left = 0;              // threads that have returned
};
inline BlockLog& block_log() {
    thread_local BlockLog log;
    return log;
}
inline uint32_t flat_thread() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
inline uint32_t block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
[[noreturn]] inline void stray(const char* what, uint32_t thread, uint32_t step) {
    std::fprintf(stderr,
                 "HIP-CPU: block (%u, %u, %u): thread %u %s at step %u; every thread of a block must reach the "
                 "same barriers and shuffles in the same order (src/backends/gpu/vendor/hip_cpu.h)\n",
                 unsigned(blockIdx.x), unsigned(blockIdx.y), unsigned(blockIdx.z), thread, what, step);
    std::abort();
}
inline void step(Step kind) {
    BlockLog& log = block_log();
    const uint32_t t = flat_thread(), n = log.reached[t]++;
    if (n == log.steps.size())
        log.steps.push_back(kind);
    else if (log.steps[n] != kind)
        stray(kind == SHUFFLE ? "shuffled where another thread waited at a barrier"
                              : "waited at a barrier where another thread shuffled",
              t, n);
}
inline void enter() {
    BlockLog& log = block_log();
    if (flat_thread() == 0) {
        log.steps.clear();
        log.reached.assign(block_threads(), 0);
        log.left = 0;
    }
}
inline void leave() {
    BlockLog& log = block_log();
    if (++log.left < block_threads()) return;
    for (uint32_t t = 0; t < block_threads(); ++t)
        if (log.reached[t] != log.steps.size()) stray("returned after a different number of steps", t, log.reached[t]);
}
}  // namespace fp_hip_cpu

#define __syncthreads() (fp_hip_cpu::step(fp_hip_cpu::BARRIER), __syncthreads())
#define FP_SHFL_XOR(mask, value, lane_mask, width) \
    (fp_hip_cpu::step(fp_hip_cpu::SHUFFLE), __shfl_xor((value), (lane_mask), (width)))
#define FP_SHFL(mask, value, src_lane, width) (fp_hip_cpu::step(fp_hip_cpu::SHUFFLE), __shfl((value), (src_lane), (width)))

// ---- Device intrinsics the runtime does not define ---------------------------------------------
inline float __uint_as_float(uint32_t x) noexcept {
    return std::bit_cast<float>(x);
}
inline uint32_t __float_as_uint(float x) noexcept {
    return std::bit_cast<uint32_t>(x);
}
inline float __int_as_float(int32_t x) noexcept {
    return std::bit_cast<float>(x);
}
inline int32_t __float_as_int(float x) noexcept {
    return std::bit_cast<int32_t>(x);
}

// CUDA and HIP define min/max for every integer width in device code; mixed operands compare in their
// common type, as the built-ins' usual promotions do.
template <typename A, typename B, std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>, int> = 0>
inline auto min(A a, B b) noexcept {
    using T = std::common_type_t<A, B>;
    return T(b) < T(a) ? T(b) : T(a);
}
template <typename A, typename B, std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>, int> = 0>
inline auto max(A a, B b) noexcept {
    using T = std::common_type_t<A, B>;
    return T(a) < T(b) ? T(b) : T(a);
}

// Non-zero in every thread when `predicate` is non-zero in any thread of the block. The fibers of a
// block run one at a time between barriers, so a block-wide flag needs no atomics: thread 0 clears
// it, every thread sets it, all read it, and the last barrier keeps the next call's clear behind
// this call's reads.
inline int __syncthreads_or(int predicate) noexcept {
    thread_local int flag;
    const bool first = threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
    __syncthreads();
    if (first) flag = 0;
    __syncthreads();
    if (predicate) flag = 1;
    __syncthreads();
    const int any = flag;
    __syncthreads();
    return any;
}

// ---- Runtime calls the runtime does not have ---------------------------------------------------
// Attributes: one "multiprocessor" per host thread is what the grid heuristics need; the shared
// memory limit is HIP's usual 64 KiB.
enum FpHipCpuAttribute { hipDeviceAttributeMultiprocessorCount, hipDeviceAttributeSharedMemPerBlockOptin };
inline hipError_t hipDeviceGetAttribute(int* value, FpHipCpuAttribute attribute, int device) noexcept {
    if (device != 0) return hipErrorInvalidDevice;
    hipDeviceProp_t p{};
    if (const hipError_t e = hipGetDeviceProperties(&p, device); e != hipSuccess) return e;
    *value = attribute == hipDeviceAttributeMultiprocessorCount ? p.multiProcessorCount : 64 * 1024;
    return hipSuccess;
}

// Graphs: not in this runtime. A capture fails cleanly, so the engine runs its decode steps eagerly
// (ForwardScratch::run_graph) and the graph tests skip.
using hipGraph_t = struct FpHipCpuGraph*;
using hipGraphExec_t = struct FpHipCpuGraphExec*;
enum hipStreamCaptureMode { hipStreamCaptureModeThreadLocal };
inline hipError_t hipStreamBeginCapture(hipStream_t, hipStreamCaptureMode) noexcept {
    return hipErrorNotSupported;
}
enum hipStreamCaptureStatus { hipStreamCaptureStatusNone, hipStreamCaptureStatusActive };
inline hipError_t hipStreamIsCapturing(hipStream_t, hipStreamCaptureStatus* status) noexcept {
    *status = hipStreamCaptureStatusNone;  // no capture ever begins
    return hipSuccess;
}
inline hipError_t hipStreamEndCapture(hipStream_t, hipGraph_t* graph) noexcept {
    *graph = nullptr;
    return hipErrorNotSupported;
}
inline hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t*, hipGraph_t, unsigned long long) noexcept {
    return hipErrorNotSupported;
}
inline hipError_t hipGraphLaunch(hipGraphExec_t, hipStream_t) noexcept {
    return hipErrorNotSupported;
}
inline hipError_t hipGraphExecDestroy(hipGraphExec_t) noexcept {
    return hipSuccess;
}
inline hipError_t hipGraphDestroy(hipGraph_t) noexcept {
    return hipSuccess;
}

// ---- Work runs when it is issued ---------------------------------------------------------------
// The runtime queues kernels, copies, fills and frees on streams that a background thread drains, and
// its null stream can have two batches of work in flight at once (two consumers take turns draining
// it), which reorders dependent launches; its hipMallocAsync also sets the pointer only when the
// stream gets there. Here every operation runs when it is issued, on the calling thread (and, for a
// kernel's blocks, TBB's workers), so each stream's order holds trivially. Copies therefore read the
// source before returning, as CUDA's do from the pageable memory flashport copies from.
namespace fp_hip_cpu {
template <typename F, typename... Args>
void run_kernel(dim3 grid, dim3 block, size_t smem, F fn, Args... args) {
    const std::tuple<Args...> tuple{args...};
    struct {
        const F* fn;
        const std::tuple<Args...>* args;
        void operator()() const { std::apply(*fn, *args); }
    } body{&fn, &tuple};
    const hip::detail::Tiled_domain domain{block, grid, uint32_t(smem), body};
    for_each_tile(domain, fn, tuple);
}
}  // namespace fp_hip_cpu
inline hipError_t fp_hip_cpu_malloc_async(void** ptr, size_t bytes, hipStream_t) { return hipMalloc(ptr, bytes); }
inline hipError_t fp_hip_cpu_free_async(void* ptr, hipStream_t) { return hipFree(ptr); }
inline hipError_t fp_hip_cpu_memcpy_async(void* dst, const void* src, size_t bytes, hipMemcpyKind, hipStream_t) {
    if (bytes) std::memcpy(dst, src, bytes);
    return hipSuccess;
}
inline hipError_t fp_hip_cpu_memset_async(void* dst, int value, size_t bytes, hipStream_t) {
    if (bytes) std::memset(dst, value, bytes);
    return hipSuccess;
}
#define hipMallocAsync fp_hip_cpu_malloc_async
#define hipFreeAsync fp_hip_cpu_free_async
#define hipMemcpyAsync fp_hip_cpu_memcpy_async
#define hipMemsetAsync fp_hip_cpu_memset_async

// Dynamic shared memory: the runtime's own macro, since `extern __shared__` has no meaning here.
#define FP_DYNAMIC_SHARED(type, name) HIP_DYNAMIC_SHARED(type, name)
