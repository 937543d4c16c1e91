// `flashport memtrace FILE`: a FLASHPORT_MEMTRACE log (memory.h) summarised. Per device: the peak of
// live bytes, what was live at that moment grouped by call site, and the highest live bytes each call
// site reached on its own; then what leaked: the log's leak report, or where the process did not exit
// normally (no report at the end), what was still live where the log stops.
//
// The log's lines, as the allocator writes them:
//   alloc <ptr> <bytes> <device> <file>:<line> <function>
//   free <ptr> <bytes> <device>
//   leak-report <n> allocations, <bytes> bytes still live
//   leak <ptr> <bytes> <device> <file>:<line> <function>
// A line of any other shape is an Error naming its number. Lines that do not fit the replay (a free of
// a pointer that is not live, an alloc of one that is) are counted as inconsistencies, not errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashport::app {

struct SiteBytes {
    std::string site;  // "<file>:<line> <function>"
    int64_t bytes = 0;
    int64_t count = 0;  // allocations making up `bytes`
};

struct MemtraceDevice {
    std::string device;  // "cpu", "gpu:0"
    int64_t allocations = 0, frees = 0;
    int64_t peak_bytes = 0;
    int64_t peak_line = 0;              // the log line that reached the peak (1-based; 0: nothing allocated)
    std::vector<SiteBytes> at_peak;     // live at the peak, by site, largest first
    std::vector<SiteBytes> site_peaks;  // each site's own highest live bytes, largest first (count: at that time)
};

struct MemtraceSummary {
    int64_t lines = 0;
    std::vector<MemtraceDevice> devices;  // in order of first appearance
    bool complete = false;                // ends with the allocator's leak report: the process exited normally
    std::vector<SiteBytes> leaks;         // by "<device> <site>", largest first
    int64_t leak_bytes = 0, leak_count = 0;
    int64_t inconsistencies = 0;  // frees of pointers not live, allocs of pointers already live
};

// Reads the log twice (the peaks, then the live sets at them). Throws flashport::Error for an
// unreadable file, a malformed line (its number and why), a line over 64 KiB, or sizes whose sums
// overflow.
MemtraceSummary summarise_memtrace(const std::string& path);

// The report: per device the peak and its top `top` sites both ways, then the leaks.
std::string memtrace_report(const MemtraceSummary& s, const std::string& path, size_t top);
nlohmann::json memtrace_json(const MemtraceSummary& s);

}  // namespace flashport::app
