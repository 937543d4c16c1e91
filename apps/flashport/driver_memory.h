// The driver's view of a GPU's memory over a command's run, for the memory figures of `generate` and
// `bench engine`: used bytes sampled once before the model loads (the CUDA context already exists, so
// it is excluded), then polled on a background thread, so the peak covers loading, prefill and decode.
//
// Why poll rather than read "used now" at the end: the engine allocates a forward pass's activations
// with the device allocator and frees them when the pass ends, so after the run they are gone from the
// driver's count. cudaMemGetInfo / hipMemGetInfo neither synchronises nor allocates, and at one call
// per millisecond costs nothing measurable. An allocation that lives shorter than the interval can be
// missed; the engine's activations live for a whole forward pass (milliseconds on a 7B model, and the
// logits copy to the host ends the pass).
//
// FLASHPORT_DRIVER_TRACE=<file> writes the polled readings as a timeline: one line
// "<ms since the watch started> <driver used - before> <tracked live bytes>" whenever either moved by
// 1 MiB or more. A rise in the driver's figure with none in the tracked one is memory the allocator
// never saw (a BLAS workspace, graph or module memory, the context's own pools).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <thread>

#include "flashport/tensor.h"

namespace flashport::app {

class DriverMemoryWatch {
public:
    // On the CPU nothing is sampled and every figure is 0. On a GPU the first sample is taken here
    // (an Error if the build has no GPU backend or the device does not exist), and with `poll` the
    // background thread starts; without it (a chat that runs for hours) only the readings below count.
    DriverMemoryWatch(Device device, bool poll);
    ~DriverMemoryWatch();
    DriverMemoryWatch(const DriverMemoryWatch&) = delete;
    DriverMemoryWatch& operator=(const DriverMemoryWatch&) = delete;

    // Used bytes before loading.
    size_t before() const { return before_; }
    // The highest used bytes seen since construction or the last reset_peak(), minus before().
    int64_t peak_delta() const;
    // Used bytes now, minus before().
    int64_t now_delta() const;
    // Starts a new peak from the current use (e.g. between the batch sizes of a benchmark).
    void reset_peak();

private:
    void poll();
    size_t sample() const;
    void raise_peak(size_t used) const;

    static constexpr std::chrono::milliseconds INTERVAL{1};

    Device device_;
    size_t before_ = 0;
    mutable std::atomic<size_t> peak_{0};  // raised by const readers too
    std::atomic<bool> stop_{false};
    FILE* trace_ = nullptr;  // FLASHPORT_DRIVER_TRACE's file, written by the polling thread only
    std::thread thread_;
};

}  // namespace flashport::app
