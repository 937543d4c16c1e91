// Times paged decode attention on the GPU (flashport/paged_attention.h) for one shape and prints one JSON
// object: kernel, splits, ms per call and the K+V bandwidth. bench/gpu/decode_peers.py runs it beside
// PyTorch SDPA and a device-to-device copy in the same run.
//
// The cache holds exactly the batch's tokens (batch · ceil(seq / block_size) blocks) in a shuffled
// block table, as a server's would look after some churn. Timing: `iters` calls back to back, then one
// synchronise, host clock around the lot; the median of `reps` such runs, per call. The same method
// times the peers in decode_peers.py.
//
// The split kernel is the library's default (tensor cores on NVIDIA sm_80+); FLASHPORT_GPU_DECODE=portable
// in the environment selects the portable one. The kernel name in the output says which ran.
//
// Usage: flashport_bench_paged_attention [--batch 1] [--seq 32768] [--heads 28] [--kv-heads 4]
//        [--head-dim 128] [--dtype bf16] [--block-size 16] [--q-len 1] [--splits 0] [--iters 50] [--reps 7]
//        [--graph 0]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "flashport/device.h"
#include "flashport/error.h"
#include "flashport/memory.h"
#include "flashport/paged_attention.h"
#include "support/rng.h"  // tests/support: the one generator of the tests and benchmarks

using namespace flashport;

namespace {

struct Options {
    int64_t batch = 1, seq = 32768, heads = 28, kv_heads = 4, head_dim = 128, block_size = 16, q_len = 1;
    int splits = 0, iters = 50, reps = 7;
    bool graph = false;
    DType dtype = DType::BF16;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        FP_CHECK(i + 1 < argc, "missing value after ", a);
        const char* v = argv[++i];
        if (a == "--batch") o.batch = std::atoll(v);
        else if (a == "--seq") o.seq = std::atoll(v);
        else if (a == "--heads") o.heads = std::atoll(v);
        else if (a == "--kv-heads") o.kv_heads = std::atoll(v);
        else if (a == "--head-dim") o.head_dim = std::atoll(v);
        else if (a == "--block-size") o.block_size = std::atoll(v);
        else if (a == "--q-len") o.q_len = std::atoll(v);
        else if (a == "--splits") o.splits = std::atoi(v);
        else if (a == "--iters") o.iters = std::atoi(v);
        else if (a == "--reps") o.reps = std::atoi(v);
        else if (a == "--graph") o.graph = std::atoi(v) != 0;
        else if (a == "--dtype") o.dtype = parse_dtype(v);
        else fail("unknown option ", a);
    }
    return o;
}

// Fills a device buffer of 16-bit values with uniform values in [-1, 1), through a reused host chunk.
void fill(void* dst, size_t count, DType dt, test::Rng& rng) {
    std::vector<uint16_t> chunk(std::min<size_t>(count, size_t(1) << 24));
    for (uint16_t& x : chunk) store_from_float(&x, dt, float(rng.uniform(-1.0, 1.0)));
    for (size_t off = 0; off < count; off += chunk.size()) {
        const size_t n = std::min(chunk.size(), count - off);
        copy_bytes(static_cast<uint16_t*>(dst) + off, Device::gpu(), chunk.data(), Device::cpu(), n * 2);
    }
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const Options o = parse(argc, argv);
        FP_CHECK(gpu_device_count() > 0, "no GPU present (backend ", gpu_backend_name(), ")");
        const Device gpu = Device::gpu(0);
        const int64_t per_seq = (o.seq + o.block_size - 1) / o.block_size, num_blocks = o.batch * per_seq;
        test::Rng rng(42);

        Tensor k(o.dtype, {num_blocks, o.block_size, o.kv_heads, o.head_dim}, gpu);
        Tensor v(o.dtype, {num_blocks, o.block_size, o.kv_heads, o.head_dim}, gpu);
        Tensor q(o.dtype, {o.batch, o.q_len, o.heads, o.head_dim}, gpu), out(o.dtype, {o.batch, o.q_len, o.heads, o.head_dim}, gpu);
        fill(k.view.data, size_t(k.view.numel()), o.dtype, rng);
        fill(v.view.data, size_t(v.view.numel()), o.dtype, rng);
        fill(q.view.data, size_t(q.view.numel()), o.dtype, rng);
        std::vector<int32_t> table(static_cast<size_t>(num_blocks)), lens(size_t(o.batch), int32_t(o.seq));
        std::iota(table.begin(), table.end(), 0);
        for (int64_t i = num_blocks - 1; i > 0; --i) std::swap(table[size_t(i)], table[size_t(rng.below(i + 1))]);
        Buffer table_dev(table.size() * 4, gpu), lens_dev(lens.size() * 4, gpu);
        copy_bytes(table_dev.data(), gpu, table.data(), Device::cpu(), table.size() * 4);
        copy_bytes(lens_dev.data(), gpu, lens.data(), Device::cpu(), lens.size() * 4);

        PagedKVCache kv;
        kv.k_cache = k.view, kv.v_cache = v.view;
        kv.block_table = table_dev.as<int32_t>(), kv.max_blocks_per_seq = per_seq, kv.seq_lens = lens_dev.as<int32_t>();
        PagedAttentionParams p;
        p.num_splits = o.splits;
        const PagedAttentionPlan plan = plan_paged_attention(out.view, q.view, kv, nullptr, p);
        Buffer ws(std::max<size_t>(plan.workspace_bytes, 16), gpu);
        const GpuStream stream(gpu);
        auto call = [&] { paged_attention(out.view, q.view, kv, nullptr, p, ws.data(), ws.size(), stream.get()); };
        auto calls = [&] {
            for (int i = 0; i < o.iters; ++i) call();
        };
        std::optional<GpuGraph> graph;
        if (o.graph) graph = GpuGraph::capture(stream, calls);

        for (int i = 0; i < 3; ++i) call();
        stream.synchronize();
        std::vector<double> ms;
        for (int r = 0; r < o.reps; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            if (graph) graph->replay(stream);
            else calls();
            stream.synchronize();
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / o.iters);
        }
        std::sort(ms.begin(), ms.end());
        const double med = ms[ms.size() / 2];
        const double kv_bytes = 2.0 * double(o.batch) * double(o.seq) * double(o.kv_heads) * double(o.head_dim) *
                                double(dtype_size(o.dtype));
        std::printf("{\"kernel\": \"%s\", \"num_splits\": %d, \"workspace_bytes\": %zu, \"batch\": %lld, \"seq\": %lld, "
                    "\"heads\": %lld, \"kv_heads\": %lld, \"head_dim\": %lld, \"q_len\": %lld, \"block_size\": %lld, "
                    "\"graph\": %s, \"median_ms\": %.6f, \"min_ms\": %.6f, \"kv_bytes\": %.0f, \"kv_gbps\": %.1f, \"device\": \"%s\"}\n",
                    plan.kernel.c_str(), plan.params.num_splits, plan.workspace_bytes, (long long)o.batch,
                    (long long)o.seq, (long long)o.heads, (long long)o.kv_heads, (long long)o.head_dim,
                    (long long)o.q_len, (long long)o.block_size, o.graph ? "true" : "false", med, ms.front(), kv_bytes, kv_bytes / (med * 1e-3) / 1e9,
                    gpu_device_description(0).c_str());
        return 0;
    } catch (const Error& e) {
        std::fprintf(stderr, "flashport_bench_paged_attention: %s\n", e.what());
        return 1;
    }
}
