// The one seed rule of the tests (docs/testing.md, "Seeds"):
//
//   FLASHPORT_TEST_SEED is the run seed: decimal or 0x-hex. Unset (or `random`), each process draws
//   a fresh one, so every run, CI's included, tests new inputs; a failure prints the seed it drew,
//   and setting it reruns exactly those inputs.
//   A case (or a gtest test) seeds its generator with case_seed(name) = fnv1a(name) ^ mix(run seed):
//   cases differ from each other, and a run seed reproduces every one of them.
//   Every failure prints reproduce_line(): the run seed and the gtest filter that rerun the case.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include "rng.h"

namespace flashport::test {

inline uint64_t run_seed() {
    static const uint64_t seed = [] {
        const char* s = std::getenv("FLASHPORT_TEST_SEED");
        if (s && *s && std::string(s) != "random") return uint64_t(std::strtoull(s, nullptr, 0));
        std::random_device rd;
        return (uint64_t(rd()) << 32) ^ rd();
    }();
    return seed;
}

inline uint64_t case_seed(const std::string& name, uint64_t run = run_seed()) {
    return fnv1a(name) ^ splitmix64(run);
}

// The running gtest test as Suite.Name ("" outside a test).
inline std::string current_test_name() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return info ? std::string(info->test_suite_name()) + "." + info->name() : std::string();
}

// The seed of the running gtest test: for tests that are not harness cases (tests/ops).
inline uint64_t test_seed() { return case_seed(current_test_name()); }

// "reproduce: FLASHPORT_TEST_SEED=<run> --gtest_filter=<test>" (the filter names the running test).
inline std::string reproduce_line(uint64_t run = run_seed()) {
    std::string line = "reproduce: FLASHPORT_TEST_SEED=" + std::to_string(run);
    const std::string test = current_test_name();
    if (!test.empty()) line += " --gtest_filter='" + test + "'";
    return line;
}

// Adds the reproduce line to every failure of the test that declares it (gtest's SCOPED_TRACE).
#define FP_TRACE_SEED() SCOPED_TRACE(::flashport::test::reproduce_line())

}  // namespace flashport::test
