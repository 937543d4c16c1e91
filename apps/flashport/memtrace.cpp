// The FLASHPORT_MEMTRACE summary; see memtrace.h.
#include "flashport/memtrace.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "flashport/error.h"
#include "units.h"

namespace flashport::app {
namespace {

constexpr size_t MAX_LINE = 64 * 1024;

enum class Kind { Alloc, Free, LeakReport, Leak };

struct Event {
    Kind kind;
    std::string_view ptr, device, site;
    int64_t bytes = 0;
};

// The next space-separated field of `rest`, consumed.
std::string_view field(std::string_view& rest) {
    const size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return rest = {}, std::string_view{};
    rest.remove_prefix(start);
    const size_t end = std::min(rest.find(' '), rest.size());
    std::string_view f = rest.substr(0, end);
    rest.remove_prefix(end);
    return f;
}

// A field for an error message: at most 40 bytes, anything unprintable as '?', so the message stays one
// readable line whatever the file holds.
std::string shown(std::string_view text) {
    std::string out(text.substr(0, 40));
    for (char& c : out)
        if (c < 0x20 || c > 0x7e) c = '?';
    return out;
}

// "cpu" or "gpu:<index>" with at most three digits: what Device::name() writes. Checked because the
// replay keeps a table per device.
bool is_device_name(std::string_view d) {
    if (d == "cpu") return true;
    if (d.size() < 5 || d.size() > 7 || d.substr(0, 4) != "gpu:") return false;
    return std::all_of(d.begin() + 4, d.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int64_t parse_bytes(std::string_view text, int64_t line) {
    int64_t v = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    FP_CHECK(
        ec == std::errc() && end == text.data() + text.size() && v >= 0 && v <= std::numeric_limits<int64_t>::max() / 2,
        "memtrace: line ", line, ": '", shown(text), "' is not a byte count");
    return v;
}

Event parse(std::string_view text, int64_t line) {
    std::string_view rest = text;
    const std::string_view kind = field(rest);
    Event e{};
    if (kind == "leak-report") {  // "leak-report <n> allocations, <bytes> bytes still live"
        e.kind = Kind::LeakReport;
        return e;
    }
    if (kind == "alloc")
        e.kind = Kind::Alloc;
    else if (kind == "free")
        e.kind = Kind::Free;
    else if (kind == "leak")
        e.kind = Kind::Leak;
    else
        throw Error("memtrace: line " + std::to_string(line) + " starts with '" + shown(kind) +
                    "', not alloc, free, leak or leak-report: is this a FLASHPORT_MEMTRACE log?");
    e.ptr = field(rest);
    e.bytes = parse_bytes(field(rest), line);
    e.device = field(rest);
    FP_CHECK(!e.ptr.empty() && !e.device.empty(), "memtrace: line ", line, ": '", kind,
             "' needs a pointer, a byte count and a device");
    FP_CHECK(is_device_name(e.device), "memtrace: line ", line, ": '", shown(e.device),
             "' is not a device (cpu, gpu:0, ...)");
    if (e.kind != Kind::Free) {
        const size_t start = rest.find_first_not_of(' ');
        e.site = start == std::string_view::npos ? std::string_view{} : rest.substr(start);
        FP_CHECK(!e.site.empty(), "memtrace: line ", line, ": '", kind, "' has no call site");
    }
    return e;
}

int64_t checked_add(int64_t a, int64_t b, int64_t line) {
    int64_t sum = 0;
    FP_CHECK(!__builtin_add_overflow(a, b, &sum), "memtrace: line ", line, ": the live bytes overflow 64 bits");
    return sum;
}

// Calls `on_line(number, text)` for each line; lines longer than MAX_LINE are an Error.
template <typename F>
void for_each_line(const std::string& path, F on_line) {
    std::ifstream in(path, std::ios::binary);
    FP_CHECK(in, "memtrace: cannot open '", path, "'");
    std::string buf(MAX_LINE + 1, '\0');
    for (int64_t number = 1;; ++number) {
        in.getline(buf.data(), std::streamsize(buf.size()));
        const std::streamsize got = in.gcount();
        if (in.fail() && !in.eof()) {
            FP_CHECK(got < std::streamsize(MAX_LINE), "memtrace: line ", number, " of '", path, "' is longer than ",
                     MAX_LINE, " bytes: is this a FLASHPORT_MEMTRACE log?");
            throw Error("memtrace: cannot read '" + path + "'");
        }
        if (got == 0 && in.eof()) return;
        // gcount counts the newline that getline consumed; the last line may lack one.
        size_t len = size_t(got) - (in.eof() ? 0 : 1);
        if (len > 0 && buf[len - 1] == '\r') --len;
        if (len > 0) on_line(number, std::string_view(buf.data(), len));
        if (in.eof()) return;
    }
}

// The allocator's state as the log replays it.
struct Replay {
    struct Live {
        int64_t bytes;
        int site;
    };
    struct DeviceState {
        int64_t live = 0;
        std::vector<int64_t> site_live, site_count;  // by site id
    };
    std::unordered_map<std::string, int> site_ids;
    std::vector<std::string> sites;
    std::map<std::string, DeviceState, std::less<>> devices;
    std::vector<std::string> device_order;
    std::unordered_map<std::string, Live> live;  // by "<device> <ptr>"
    int64_t inconsistencies = 0;

    int site_id(std::string_view site) {
        auto [it, added] = site_ids.try_emplace(std::string(site), int(sites.size()));
        if (added) sites.emplace_back(site);
        return it->second;
    }
    DeviceState& device(std::string_view name) {
        auto it = devices.find(name);
        if (it == devices.end()) {
            it = devices.emplace(std::string(name), DeviceState{}).first;
            device_order.emplace_back(name);
        }
        DeviceState& d = it->second;
        d.site_live.resize(sites.size());
        d.site_count.resize(sites.size());
        return d;
    }
    // Applies an alloc or a free; returns the device it changed.
    DeviceState& apply(const Event& e, int64_t line) {
        std::string key = std::string(e.device) + ' ' + std::string(e.ptr);
        if (e.kind == Kind::Alloc) {
            const int site = site_id(e.site);
            DeviceState& d = device(e.device);
            if (auto it = live.find(key); it != live.end()) {  // allocated twice: the first one is gone
                ++inconsistencies;
                release(d, it->second);
                live.erase(it);
            }
            live.emplace(std::move(key), Live{e.bytes, site});
            d.live = checked_add(d.live, e.bytes, line);
            d.site_live[size_t(site)] += e.bytes;  // bounded by d.live
            ++d.site_count[size_t(site)];
            return d;
        }
        DeviceState& d = device(e.device);
        auto it = live.find(key);
        if (it == live.end()) {
            ++inconsistencies;
            return d;
        }
        release(d, it->second);
        live.erase(it);
        return d;
    }
    static void release(DeviceState& d, const Live& l) {
        d.live -= l.bytes;
        d.site_live[size_t(l.site)] -= l.bytes;
        --d.site_count[size_t(l.site)];
    }
};

std::vector<SiteBytes> largest_first(std::vector<SiteBytes> v) {
    std::erase_if(v, [](const SiteBytes& s) { return s.bytes == 0 && s.count == 0; });
    std::stable_sort(v.begin(), v.end(), [](const SiteBytes& a, const SiteBytes& b) { return a.bytes > b.bytes; });
    return v;
}

}  // namespace

MemtraceSummary summarise_memtrace(const std::string& path) {
    MemtraceSummary s;
    // Pass 1: counts, each device's peak and its line, each site's own peak, the leak report.
    Replay one;
    std::map<std::string, MemtraceDevice, std::less<>> devices;
    std::map<std::string, SiteBytes> leaks;
    int64_t last_line = 0;
    for_each_line(path, [&](int64_t line, std::string_view text) {
        last_line = line;
        const Event e = parse(text, line);
        FP_CHECK(!s.complete || e.kind == Kind::Leak, "memtrace: line ", line,
                 ": an allocation event after the leak report (two logs in one file?)");
        if (e.kind == Kind::LeakReport) {
            s.complete = true;
            return;
        }
        if (e.kind == Kind::Leak) {
            FP_CHECK(s.complete, "memtrace: line ", line, ": a leak line before the leak report");
            SiteBytes& l = leaks[std::string(e.device) + ' ' + std::string(e.site)];
            l.bytes = checked_add(l.bytes, e.bytes, line);
            ++l.count;
            s.leak_bytes = checked_add(s.leak_bytes, e.bytes, line);
            ++s.leak_count;
            return;
        }
        Replay::DeviceState& d = one.apply(e, line);
        MemtraceDevice& out = devices[std::string(e.device)];
        out.device = e.device;
        if (e.kind == Kind::Alloc) {
            ++out.allocations;
            const int site = one.site_ids.at(std::string(e.site));
            out.site_peaks.resize(one.sites.size());
            SiteBytes& sp = out.site_peaks[size_t(site)];
            if (d.site_live[size_t(site)] > sp.bytes) {
                sp.bytes = d.site_live[size_t(site)];
                sp.count = d.site_count[size_t(site)];
            }
            if (d.live > out.peak_bytes) {
                out.peak_bytes = d.live;
                out.peak_line = line;
            }
        } else {
            ++out.frees;
        }
    });
    s.lines = last_line;
    s.inconsistencies = one.inconsistencies;

    // Without a leak report, what is live at the end of the log is what leaked (or was in use when
    // the process died).
    if (!s.complete)
        for (const auto& [key, l] : one.live) {
            const std::string device = key.substr(0, key.find(' '));
            SiteBytes& out = leaks[device + ' ' + one.sites[size_t(l.site)]];
            out.bytes = checked_add(out.bytes, l.bytes, last_line);
            ++out.count;
            s.leak_bytes = checked_add(s.leak_bytes, l.bytes, last_line);
            ++s.leak_count;
        }
    for (auto& [site, l] : leaks) {
        l.site = site;
        s.leaks.push_back(l);
    }
    s.leaks = largest_first(std::move(s.leaks));

    // Pass 2: replay to each device's peak line and take the live set by site there.
    Replay two;
    for_each_line(path, [&](int64_t line, std::string_view text) {
        const Event e = parse(text, line);
        if (e.kind != Kind::Alloc && e.kind != Kind::Free) return;
        Replay::DeviceState& d = two.apply(e, line);
        MemtraceDevice& out = devices.at(std::string(e.device));
        if (line != out.peak_line) return;
        for (size_t i = 0; i < d.site_live.size(); ++i)
            if (d.site_count[i] > 0) out.at_peak.push_back({two.sites[i], d.site_live[i], d.site_count[i]});
    });
    for (const std::string& name : one.device_order) {
        MemtraceDevice d = std::move(devices.at(name));
        for (size_t i = 0; i < d.site_peaks.size(); ++i) d.site_peaks[i].site = one.sites[i];
        d.site_peaks = largest_first(std::move(d.site_peaks));
        d.at_peak = largest_first(std::move(d.at_peak));
        s.devices.push_back(std::move(d));
    }
    return s;
}

namespace {

void list_sites(std::ostringstream& os, const std::vector<SiteBytes>& sites, size_t top) {
    for (size_t i = 0; i < sites.size() && i < top; ++i) {
        char head[64];
        std::snprintf(head, sizeof head, "    %12s  %6lld x  ", human_bytes(double(sites[i].bytes)).c_str(),
                      (long long)sites[i].count);
        os << head << sites[i].site << '\n';
    }
    if (sites.size() > top) {
        int64_t rest = 0;
        for (size_t i = top; i < sites.size(); ++i) rest += sites[i].bytes;
        os << "    ... and " << sites.size() - top << " more call sites (" << human_bytes(double(rest)) << ")\n";
    }
}

nlohmann::json sites_json(const std::vector<SiteBytes>& sites) {
    nlohmann::json j = nlohmann::json::array();
    for (const SiteBytes& s : sites) j.push_back({{"site", s.site}, {"bytes", s.bytes}, {"count", s.count}});
    return j;
}

}  // namespace

std::string memtrace_report(const MemtraceSummary& s, const std::string& path, size_t top) {
    std::ostringstream os;
    os << path << ": " << s.lines << " lines, "
       << (s.complete ? "complete (the process exited and wrote its leak report)"
                      : "no leak report at the end (the process did not exit normally, or is still running)")
       << '\n';
    if (s.inconsistencies > 0)
        os << "warning: " << s.inconsistencies
           << " events do not fit the replay (frees of pointers not live, or allocs of live ones)\n";
    for (const MemtraceDevice& d : s.devices) {
        os << '\n'
           << d.device << ": " << d.allocations << " allocations, " << d.frees << " frees; peak "
           << human_bytes(double(d.peak_bytes)) << " live at line " << d.peak_line << '\n';
        os << "  live at the peak, by call site:\n";
        list_sites(os, d.at_peak, top);
        os << "  each call site's own highest live bytes:\n";
        list_sites(os, d.site_peaks, top);
    }
    os << '\n'
       << (s.complete ? "leaks: " : "live at the end of the log: ") << s.leak_count << " allocations, "
       << human_bytes(double(s.leak_bytes)) << '\n';
    list_sites(os, s.leaks, top);
    return os.str();
}

nlohmann::json memtrace_json(const MemtraceSummary& s) {
    nlohmann::json devices = nlohmann::json::array();
    for (const MemtraceDevice& d : s.devices)
        devices.push_back({{"device", d.device},
                           {"allocations", d.allocations},
                           {"frees", d.frees},
                           {"peak_bytes", d.peak_bytes},
                           {"peak_line", d.peak_line},
                           {"live_at_peak", sites_json(d.at_peak)},
                           {"site_peaks", sites_json(d.site_peaks)}});
    return {{"lines", s.lines},
            {"complete", s.complete},
            {"inconsistencies", s.inconsistencies},
            {"devices", devices},
            {"leak_count", s.leak_count},
            {"leak_bytes", s.leak_bytes},
            {"leaks", sites_json(s.leaks)}};
}

}  // namespace flashport::app
