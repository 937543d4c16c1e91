// The shared op cases (tests/ops/op_case.h) on the GPU: copies of a case's tensors, index and
// workspace on the device (and its int32 output, argmax's ids), the run, and the outputs copied back for the case's own float64 check.
// Used by tests/gpu/test_gpu_ops.cpp and the bench (bench/ops.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "flashport/device.h"
#include "flashport/memory.h"
#include "gpu_ops_util.h"
#include "ops/op_case.h"

namespace flashport::test {

class GpuOpRun {
public:
    GpuOpRun(const OpCase& c, const OpData& d) {
        for (const auto& t : d.tensors) {
            tensors_.push_back(std::make_unique<GpuTensor>(*t));
            views_.t.push_back(tensors_.back()->view);
        }
        const size_t n = d.index.size(), es = d.wide_index ? sizeof(int64_t) : sizeof(int32_t);
        index_ = Buffer(std::max<size_t>(n * es, 1), Device::gpu());
        const void* src = d.wide_index ? static_cast<const void*>(d.index.data()) : d.index32.data();
        copy_bytes(index_.data(), Device::gpu(), src, Device::cpu(), n * es);
        views_.index = d.wide_index ? IndexView(static_cast<const int64_t*>(index_.data()), int64_t(n), Device::gpu())
                                    : IndexView(static_cast<const int32_t*>(index_.data()), int64_t(n), Device::gpu());
        ids_ = Buffer(std::max<size_t>(d.ids.size() * sizeof(int32_t), 1), Device::gpu());
        copy_bytes(ids_.data(), Device::gpu(), d.ids.data(), Device::cpu(), d.ids.size() * sizeof(int32_t));
        views_.ids = ids_.as<int32_t>();
        workspace_ = Buffer(c.workspace_bytes ? std::max<size_t>(c.workspace_bytes(views_), 1) : 1, Device::gpu());
        views_.workspace = workspace_.data();
        views_.workspace_bytes = workspace_.size();
    }
    const OpViews& views() const { return views_; }
    // Waits for the GPU, then copies the outputs back into d's host tensors.
    void download(OpData& d) const {
        synchronize(Device::gpu());
        for (size_t o : d.outputs) tensors_[o]->download(*d.tensors[o]);
        copy_bytes(d.ids.data(), Device::cpu(), ids_.data(), Device::gpu(), d.ids.size() * sizeof(int32_t));
    }

private:
    std::vector<std::unique_ptr<GpuTensor>> tensors_;
    Buffer index_, ids_, workspace_;
    OpViews views_;
};

// Runs each case that has a GPU form on the GPU and checks every output against its reference.
inline void expect_cases_on_gpu(const std::vector<OpCase>& cases, Rng& rng) {
    for (const OpCase& c : cases) {
        if (!c.on_gpu) continue;
        SCOPED_TRACE(c.full_name());
        OpData d = c.make(rng);
        GpuOpRun run(c, d);
        EXPECT_FALSE(c.run(run.views(), nullptr).empty());
        run.download(d);
        expect_outputs_match(d);
    }
}

}  // namespace flashport::test
