// The attention op-test harness, in the spirit of ggml's test-backend-ops: a case is a plain struct
// (shape, dtype, flags, layout, implementation, device, tolerance floor); the harness draws fresh
// random inputs on the host, copies them to the case's device, poisons the outputs, runs the op,
// copies the outputs back and compares them with the float64 CPU reference.
//
// Device-generic on purpose: inputs are made on the CPU and moved with flashport::copy_bytes, so the
// GPU tests (tests/gpu) reuse this file unchanged with `c.device = Device::gpu()`.
//
// The paged and varlen harnesses run on the same core: this file's NanAt and CaseResult, and
// attention_check.h's emulation and row checks. Seeds and tolerances are tests/support's (seed.h,
// tolerance.h): one rule for every op test.
//
// Environment:
//   FLASHPORT_TEST_SEED=N      the run seed (support/seed.h; unset 0, `random` draws one); every
//                              failure prints the one it used
//   FLASHPORT_TEST_FILTER=a,b  run only cases whose name contains every comma-separated part
//   FLASHPORT_TEST_PERF=1      also time each case (median of a few calls) and print ms
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "flashport/attention.h"
#include "support/seed.h"
#include "support/tolerance.h"

namespace flashport::test {

// How q, k, v and out sit in memory. lse is always a contiguous fp32 [batch, n_heads, q_len].
enum class Layout : uint8_t {
    BLHD,         // [batch, len, heads, dim] contiguous: FlashAttention's order
    BHLD,         // PyTorch's [batch, heads, len, dim]: a transposed view of a contiguous buffer
    BLHD_PADDED,  // [batch, len, heads, dim] inside a bigger buffer: head pitch head_dim+5, spare
                  // positions after len (like a KV cache's capacity). The padding holds NaN, so a
                  // kernel that reads past the view poisons its own output.
    DIM_STRIDED,  // BLHD with a stride of 2 on head_dim (every other element): a non-unit inner stride
};
const char* layout_name(Layout layout);

// Where run_case plants one NaN in the inputs, to check that NaN propagates as in PyTorch's math path:
// a NaN score makes its whole row NaN (output and LSE), a NaN in V makes that column NaN in the rows
// that see its key, and a NaN in a key a row does not see (masked) leaves that row alone. The float64
// reference does exactly this; the output must be NaN where it is NaN and match it elsewhere.
enum class NanAt : uint8_t {
    NONE,
    Q,  // one element of one query row: every score of that row is NaN (the "all-NaN row")
    K,  // one element of one key: one score column is NaN, for the rows that see the key
    V,  // one element of one value row
};

struct AttentionCase {
    int64_t batch = 1, q_len = 1, kv_len = 1, n_heads = 1, n_kv_heads = 1, head_dim = 64;
    DType dtype = DType::F32;
    bool causal = false;
    int64_t window_left = -1;
    Layout layout = Layout::BLHD;
    AttentionImpl impl = AttentionImpl::FLASH;
    Device device = Device::cpu();
    bool lse = false;
    float scale = 0.0f;  // 0: the API default, 1/sqrt(head_dim)
    // The CPU micro-kernel table (FLASHPORT_CPU_ISA) to run: "" is the best this CPU has; a table the
    // CPU lacks makes the case skip.
    std::string cpu_isa;
    int threads = 0;      // OpenMP threads for the call (CPU); 0 keeps the process default
    double floor = -1.0;  // tolerance floor; < 0 means default_floor(dtype)
    NanAt nan_at = NanAt::NONE;

    // Unique and made of [A-Za-z0-9_], so it doubles as the gtest parameter name.
    std::string name() const;
};

// gtest prints a parameter with this (instead of its bytes).
void PrintTo(const AttentionCase& c, std::ostream* os);

// What a dense, paged or varlen attention case found (PagedResult adds to it).
struct CaseResult {
    std::string name;
    uint64_t seed = 0;      // the case's own seed, derived from its name and the run seed
    uint64_t run_seed = 0;  // what FLASHPORT_TEST_SEED must be to reproduce
    std::string kernel;     // what plan_attention chose
    bool skipped = false;
    std::string skip_reason;

    int64_t rows_total = 0, rows_checked = 0;  // query rows (batch × heads × q_len) and how many were compared
    double err = 0.0;        // ‖out − ref‖ / ‖ref‖ over the checked rows
    double err_naive = 0.0;  // the same for the naive same-precision emulation
    double floor = 0.0;      // default_floor(dtype) unless the case sets its own
    double bound = 0.0;      // 2 · err_naive + floor (support/tolerance.h)
    double lse_max_err = 0.0, lse_tol = 0.0;
    double ms = -1.0;  // median call time in perf mode, or the CallTimer's

    std::vector<std::string> failures;  // empty: the case passed
    bool ok() const { return failures.empty(); }
    std::string summary() const;        // one paragraph: the numbers and how to reproduce
};

// Starts a result: the name, the run seed, the case's seed (support/seed.h's case_seed) and the floor.
CaseResult start_result(const std::string& name, uint64_t run, DType dtype, double floor = -1.0);

bool perf_mode();     // FLASHPORT_TEST_PERF=1
bool case_selected(const std::string& name);  // FLASHPORT_TEST_FILTER

// `tamper`, for the harness's own tests, may alter the output (host copy of the whole buffer, through
// the view) and LSE after the run and before the checks, to prove the checks catch a wrong result.
using Tamper = std::function<void(const TensorView& out, const TensorView& lse)>;
// `timer`, for the bench (bench/ops.cpp), times the call after the first run (which it may repeat;
// the call does not synchronise) and returns seconds per call; the checks then read the last run's
// output. The paged and varlen harnesses take one too.
using CallTimer = std::function<double(const std::function<void()>& call)>;
CaseResult run_case(const AttentionCase& c, uint64_t seed = run_seed(), const Tamper& tamper = {},
                    const CallTimer& timer = {});

// gtest glue: skips a case outside FLASHPORT_TEST_FILTER or whose ISA the CPU lacks, runs it, and
// fails with the full summary (numbers, seed) when anything is wrong. Prints ms in perf mode.
void check_case(const AttentionCase& c);

}  // namespace flashport::test
