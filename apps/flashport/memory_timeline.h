// `--memory-plot FILE.svg` (generate, bench engine, serve): the tracked allocator's live bytes per
// device over the run, with the phases (load, prefill, decode, ...) as shaded bands and the system's
// own figure beside it: the driver's used memory on a GPU (as a change since the recording started, so
// the CUDA/HIP context and other processes drop out), the process's resident set on the CPU (which
// also counts mapped weight files, the stacks and the runtime).
//
// The tracked figure is exact: every allocation and free reports its new live bytes (memory.h's
// observer), and buckets keep their maximum, so no peak falls between samples. The system figures are
// polled every few milliseconds. A run of any length stays bounded: see Envelope.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "flashport/plot.h"
#include "flashport/tensor.h"

namespace flashport::app {

// A signal over time in at most `max_buckets` buckets of equal width. When a new bucket would exceed
// that, pairs of buckets merge and the width doubles, so the maximum of every interval stays exact and
// an hour-long serve costs as much as a second-long generate. Values arriving with an earlier time than
// the newest bucket's (concurrent allocations) go into the newest bucket.
class Envelope {
public:
    struct Bucket {
        int64_t index;      // covers [index * width, (index + 1) * width) seconds
        int64_t max, last;  // the largest and the latest value seen in it
    };
    explicit Envelope(double width_s = 1e-3, size_t max_buckets = 2048);
    void add(double t_s, int64_t value);
    const std::vector<Bucket>& buckets() const { return buckets_; }
    double width_s() const { return width_s_; }
    // Two points per bucket, (start, max) and (end, last): the line shows each peak and where it ended;
    // before a bucket that follows a gap, (start, the previous last), so the line holds, then steps.
    void points(std::vector<double>& t_s, std::vector<double>& values, double scale) const;

private:
    void coarsen();

    double width_s_;
    size_t max_buckets_;
    std::vector<Bucket> buckets_;
};

struct TimelinePhase {
    std::string name;
    double t0_s, t1_s;
};

// Records from construction to destruction (or finish()). One at a time per process: a second one is an
// Error. Thread-safe: allocations on any thread are recorded; phase() and finish() are for one thread.
class MemoryTimeline {
public:
    // `devices`: the panels, in order (e.g. cpu, gpu:0). Their system figures are polled; the tracked
    // figure of any other device that allocates is recorded too and gets a panel of its own.
    explicit MemoryTimeline(std::vector<Device> devices);
    ~MemoryTimeline();
    MemoryTimeline(const MemoryTimeline&) = delete;
    MemoryTimeline& operator=(const MemoryTimeline&) = delete;

    // Starts the phase `name` now, ending the current one.
    void phase(const std::string& name);
    // Ends the current phase and the recording (idempotent); panels() and write() call it.
    void finish();

    std::vector<TimelinePhase> phases() const;
    // One panel per device: time (s) against MiB or GiB, the phases as spans.
    std::vector<PlotPanel> panels();
    // `path` ends in .svg or .png (check_plot_path); the title names the command.
    void write(const std::string& path, const std::string& title);

private:
    std::vector<Device> devices_;
    bool finished_ = false;
};

}  // namespace flashport::app
