#include "backends/cpu/blas.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "flashport/error.h"

namespace flashport::cpu {
namespace {

// The CBLAS enum values (cblas.h); OpenBLAS's Debian build uses 32-bit integers (LP64).
constexpr int CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112;
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                         int);
using NameFn = char* (*)();
using IntFn = int (*)();
using SetIntFn = void (*)(int);

SgemmFn g_sgemm = nullptr;
IntFn g_get_threads = nullptr;
SetIntFn g_set_threads = nullptr;

// The best OpenBLAS core this CPU can run, for when OpenBLAS's own detection is older than the CPU.
const char* best_coretype() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return nullptr;
}

Blas load() {
    Blas blas;
    // OpenBLAS reads OPENBLAS_CORETYPE once, while loading, so it must be set before dlopen. A value
    // the user set wins; a library already loaded by the host process keeps the core it chose.
    std::string core_note;
    if (!std::getenv("OPENBLAS_CORETYPE")) {
        if (const char* core = best_coretype()) {
            setenv("OPENBLAS_CORETYPE", core, 0);
            core_note = "OPENBLAS_CORETYPE=" + std::string(core) + " set by flashport from CPUID";
        }
    } else {
        core_note = "OPENBLAS_CORETYPE=" + std::string(std::getenv("OPENBLAS_CORETYPE")) + " from the environment";
    }
    void* lib = nullptr;
    for (const char* name : {"libopenblas.so.0", "libopenblas.so"}) {
        if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    }
    FP_CHECK(lib, "the CPU naive attention needs OpenBLAS (libopenblas.so.0), which could not be loaded: ", dlerror(),
             ". Install it with scripts/install-deps.sh (Debian package libopenblas0)");
    g_sgemm = reinterpret_cast<SgemmFn>(dlsym(lib, "cblas_sgemm"));
    FP_CHECK(g_sgemm, "OpenBLAS was loaded but has no cblas_sgemm symbol");
    auto corename = reinterpret_cast<NameFn>(dlsym(lib, "openblas_get_corename"));
    auto config = reinterpret_cast<NameFn>(dlsym(lib, "openblas_get_config"));
    auto threads = reinterpret_cast<IntFn>(dlsym(lib, "openblas_get_num_threads"));
    g_get_threads = threads;
    g_set_threads = reinterpret_cast<SetIntFn>(dlsym(lib, "openblas_set_num_threads"));
    blas.description = config ? config() : "OpenBLAS";
    blas.description += std::string(" | core ") + (corename ? corename() : "?");
    if (!core_note.empty()) blas.description += " (" + core_note + ")";
    if (threads) blas.description += " | " + std::to_string(threads()) + " threads";
    return blas;
}

}  // namespace

void Blas::sgemm(bool b_transposed, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                 int ldb, float beta, float* c, int ldc) const {
    g_sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, b_transposed ? CBLAS_TRANS : CBLAS_NO_TRANS, m, n, k, alpha, a, lda, b,
            ldb, beta, c, ldc);
}

int Blas::threads() const {
    return g_get_threads && g_set_threads ? g_get_threads() : 0;
}

void Blas::set_threads(int n) const {
    if (g_set_threads) g_set_threads(n);
}

const Blas& blas() {
    static std::once_flag once;
    static Blas instance;
    static std::string error;
    std::call_once(once, [] {
        try {
            instance = load();
        } catch (const Error& e) {
            error = e.what();
        }
    });
    FP_CHECK(error.empty(), error);
    return instance;
}

}  // namespace flashport::cpu
