// SVG line-chart writer; see plot.h. SVG has no text layout, so text extents are estimated from
// character counts and margins are sized from those estimates rather than fixed.
#include "flashport/plot.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <unistd.h>

#include "flashport/error.h"
#include "output_file.h"

namespace flashport::app {
namespace {

constexpr double panel_w = 520, panel_h = 380;
constexpr double margin_top = 34, margin_right = 20, margin_bottom = 58;
constexpr double tick_font = 12, label_font = 13, title_font = 17;
constexpr size_t max_x_ticks = 10, max_y_ticks = 9;
// Tableau 10: distinguishable on white and for the common colour-vision deficiencies, especially
// together with the per-series marker shapes.
const char* const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr size_t palette_size = sizeof(palette) / sizeof(palette[0]);

// Average advance of a sans-serif glyph is about 0.6 em; erring wide keeps labels from touching.
double text_width(const std::string& s, double font) { return 0.6 * font * double(s.size()); }

// Shrinks a font so the text fits `room` px: long titles must not run into the next panel. Bold
// glyphs are about 0.68 em wide on average.
double fit_font(const std::string& s, double font, double room, bool bold = false) {
    double em = (bold ? 0.68 : 0.6) * double(std::max<size_t>(s.size(), 1));
    return std::max(9.0, std::min(font, room / em));
}

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        default: out += c;
        }
    }
    return out;
}

// Coordinates with one decimal: sub-pixel precision that keeps files small.
std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
}

// Tick labels: "1k", "128k", "2.5M". Multiples of 256 that are not round decimals use base 1024,
// because sweep sizes (sequence lengths, head dims) are powers of two and 131072 should read 128k.
std::string tick_label(double v) {
    if (v == 0) return "0";
    const char* const suffix[] = {"", "k", "M", "G", "T"};
    double a = std::abs(v);
    bool binary = a >= 1024 && std::fmod(a, 256) == 0 && std::fmod(a, 1000) != 0;
    double base = binary ? 1024 : 1000;
    int i = 0;
    while (std::abs(v) >= base && i < 4) v /= base, ++i;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g%s", v, suffix[i]);
    return buf;
}

// Beyond 1e300 a linear span could overflow to inf and poison every coordinate.
bool usable(double v, bool log) { return std::abs(v) < 1e300 && (!log || v > 0); }

bool is_pow2(double v) {
    int e;
    return v > 0 && std::frexp(v, &e) == 0.5;
}

// 1-2-5 steps scaled to a power of ten, aiming at about `target` intervals over `span`.
double nice_step(double span, double target) {
    double raw = span / target, mag = std::pow(10.0, std::floor(std::log10(raw)));
    double norm = raw / mag;
    return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

std::vector<double> linear_ticks(double lo, double hi, double step) {
    std::vector<double> ticks;
    for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; ++k)
        ticks.push_back(std::abs(k * step) < step * 1e-9 ? 0 : k * step);  // no "-2.8e-17" labels
    return ticks;
}

struct Axis {
    bool log = false;
    double lo = 0, hi = 1;      // domain, in log10 units on a log axis
    std::vector<double> ticks;  // data units
    double frac(double v) const { return ((log ? std::log10(v) : v) - lo) / (hi - lo); }
};

// Decade-based ticks for log10 domain [lo, hi]: 1-2-5 per decade when they fit, else whole
// decades (thinned), else, for a domain narrower than a decade, plain linear steps.
std::vector<double> log_ticks(double lo, double hi, size_t max_ticks) {
    auto in = [&](double v) { return std::log10(v) >= lo - 1e-9 && std::log10(v) <= hi + 1e-9; };
    int d0 = int(std::floor(lo)), d1 = int(std::ceil(hi));
    std::vector<double> ticks;
    for (const std::vector<int>& mantissas : {std::vector<int>{1, 2, 5}, std::vector<int>{1}}) {
        ticks.clear();
        for (int d = d0; d <= d1; ++d)
            for (int m : mantissas)
                if (double v = m * std::pow(10.0, d); in(v)) ticks.push_back(v);
        if (ticks.size() <= max_ticks) break;
    }
    for (int stride = 2; ticks.size() > max_ticks; ++stride) {
        ticks.clear();
        for (int d = d0; d <= d1; ++d)
            if (d % stride == 0 && in(std::pow(10.0, d))) ticks.push_back(std::pow(10.0, d));
    }
    if (ticks.size() < 3 && hi - lo < 1.2) {
        double a = std::pow(10.0, lo), b = std::pow(10.0, hi);
        auto lin = linear_ticks(a, b, nice_step(b - a, 5));
        std::erase_if(lin, [](double v) { return v <= 0; });
        if (lin.size() > ticks.size()) ticks = lin;
    }
    return ticks;
}

// `values` are the usable coordinates; powers-of-two ticks are for sweep axes (sequence length).
Axis make_axis(std::vector<double> values, bool log, bool allow_pow2, size_t max_ticks) {
    Axis a;
    a.log = log;
    if (values.empty()) values = log ? std::vector<double>{1, 10} : std::vector<double>{0, 1};
    auto [mn, mx] = std::minmax_element(values.begin(), values.end());
    double lo = log ? std::log10(*mn) : *mn, hi = log ? std::log10(*mx) : *mx;
    if (hi - lo <= (log ? 1e-9 : 1e-12 * std::max(std::abs(lo), std::abs(hi)))) {
        // All equal: widen so the value sits mid-panel between real ticks.
        double pad = log ? 0.5 : (lo == 0 ? 1 : 0.5 * std::abs(lo));
        lo -= pad, hi += pad;
    }
    // Pad by a few percent so markers at the extremes don't sit on the frame.
    double pad = 0.05 * (hi - lo);
    a.lo = lo - pad, a.hi = hi + pad;
    if (!log) {
        a.ticks = linear_ticks(a.lo, a.hi, nice_step(hi - lo, 6));
        return a;
    }
    if (allow_pow2 && std::all_of(values.begin(), values.end(), is_pow2)) {
        int e0 = int(std::ceil(a.lo / std::log10(2.0))), e1 = int(std::floor(a.hi / std::log10(2.0)));
        int stride = 1;
        while (size_t((e1 - e0) / stride + 1) > max_ticks) ++stride;
        for (int e = e0; e <= e1; e += stride) a.ticks.push_back(std::ldexp(1.0, e));
    } else {
        a.ticks = log_ticks(a.lo, a.hi, max_ticks);
    }
    return a;
}

// Which ticks get a label: every `stride`-th, with the smallest stride whose labels don't collide.
// `extent(i)` is label i's size along the axis.
template <typename Extent>
size_t label_stride(const std::vector<double>& pos, Extent extent, double gap) {
    for (size_t stride = 1;; ++stride) {
        bool ok = true;
        for (size_t i = stride; i < pos.size() && ok; i += stride)
            ok = std::abs(pos[i] - pos[i - stride]) >= (extent(i) + extent(i - stride)) / 2 + gap;
        if (ok || stride >= pos.size()) return stride;
    }
}

// Shapes as well as colours tell series apart, for readers who can't rely on colour.
std::string marker(size_t shape, double x, double y, const char* colour) {
    std::string style = std::string("\" fill=\"") + colour + "\" stroke=\"white\" stroke-width=\"0.8\"/>\n";
    auto pt = [](double u, double v) { return num(u) + "," + num(v) + " "; };
    switch (shape % 4) {
    case 0: return "<circle cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"3.6" + style;
    case 1: return "<rect x=\"" + num(x - 3.3) + "\" y=\"" + num(y - 3.3) + "\" width=\"6.6\" height=\"6.6" + style;
    case 2: return "<polygon points=\"" + pt(x, y - 4.6) + pt(x + 4.6, y) + pt(x, y + 4.6) + pt(x - 4.6, y) + style;
    default: return "<polygon points=\"" + pt(x, y - 4.4) + pt(x + 4.2, y + 3.2) + pt(x - 4.2, y + 3.2) + style;
    }
}

// SVG snippets; `extra` carries further attributes such as a weight or a transform.
void text(std::ostringstream& os, double x, double y, const char* anchor, double font,
          const std::string& body, const std::string& extra = "") {
    os << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" text-anchor=\"" << anchor << "\" font-size=\""
       << num(font) << '"' << extra << '>' << body << "</text>\n";
}

void line(std::ostringstream& os, double x1, double y1, double x2, double y2, const std::string& extra = "") {
    os << "<line x1=\"" << num(x1) << "\" y1=\"" << num(y1) << "\" x2=\"" << num(x2) << "\" y2=\"" << num(y2)
       << '"' << extra << "/>\n";
}

// Spans as bands clipped to the plot area, alternating two shades so neighbours stay apart; the label
// sits at the band's top left when it fits inside, else runs down the band when the band is wide
// enough for a line of text (a PNG has no tooltips), and every band carries a tooltip (<title>).
void draw_spans(std::ostringstream& os, const PlotPanel& p, const Axis& ax, double left, double right, double top,
                double bottom) {
    const char* const shades[] = {"#eef2f8", "#f6efe6"};
    size_t n = 0;
    for (const PlotSpan& sp : p.spans) {
        if (!usable(sp.x0, p.log_x) || !usable(sp.x1, p.log_x) || sp.x1 < sp.x0) continue;
        const double x0 = std::clamp(left + ax.frac(sp.x0) * (right - left), left, right);
        const double x1 = std::clamp(left + ax.frac(sp.x1) * (right - left), left, right);
        os << "<rect x=\"" << num(x0) << "\" y=\"" << num(top) << "\" width=\"" << num(std::max(x1 - x0, 0.5))
           << "\" height=\"" << num(bottom - top) << "\" fill=\"" << shades[n++ % 2] << "\"><title>"
           << escape(sp.label) << "</title></rect>\n";
        const double font = tick_font - 1;
        if (text_width(sp.label, font) + 6 <= x1 - x0) {
            text(os, x0 + 3, top + 13, "start", font, escape(sp.label), " fill=\"#555\"");
        } else if (font + 4 <= x1 - x0 && text_width(sp.label, font) + 12 <= bottom - top) {
            // Turned a quarter clockwise about its start: it reads downwards, its glyphs to the right.
            const double x = x0 + 3, y = top + 6;
            text(os, x, y, "start", font, escape(sp.label),
                 " fill=\"#555\" transform=\"rotate(90 " + num(x) + " " + num(y) + ")\"");
        }
    }
}

void draw_panel(std::ostringstream& os, const PlotPanel& p, double ox, double oy,
                const std::vector<std::string>& names) {
    auto ok = [&](const PlotSeries& s, size_t i) {
        return usable(s.x[i], p.log_x) && usable(s.y[i], p.log_y);
    };
    std::vector<double> xs, ys;
    for (const PlotSeries& s : p.series)
        for (size_t i = 0; i < s.x.size(); ++i)
            if (ok(s, i)) xs.push_back(s.x[i]), ys.push_back(s.y[i]);
    const bool has_data = !xs.empty();
    for (const PlotSpan& sp : p.spans)
        for (double x : {sp.x0, sp.x1})
            if (usable(x, p.log_x)) xs.push_back(x);
    Axis ax = make_axis(xs, p.log_x, true, max_x_ticks), ay = make_axis(ys, p.log_y, false, max_y_ticks);

    std::vector<std::string> xlabels, ylabels;
    double ylabel_w = 0;
    for (double t : ax.ticks) xlabels.push_back(tick_label(t));
    for (double t : ay.ticks) ylabels.push_back(tick_label(t));
    for (const auto& l : ylabels) ylabel_w = std::max(ylabel_w, text_width(l, tick_font));
    // Room for the rotated y title, then the widest tick label.
    double left = ox + std::max(58.0, 42 + ylabel_w), right = ox + panel_w - margin_right;
    double top = oy + margin_top, bottom = oy + panel_h - margin_bottom, mid_x = (left + right) / 2;
    auto px = [&](double v) { return left + ax.frac(v) * (right - left); };
    auto py = [&](double v) { return bottom - ay.frac(v) * (bottom - top); };

    text(os, mid_x, oy + 22, "middle", fit_font(p.title, 15, panel_w - 20, true), escape(p.title),
         " font-weight=\"bold\"");
    draw_spans(os, p, ax, left, right, top, bottom);
    os << "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
    for (double t : ax.ticks) line(os, px(t), top, px(t), bottom);
    for (double t : ay.ticks) line(os, left, py(t), right, py(t));
    os << "</g>\n<rect x=\"" << num(left) << "\" y=\"" << num(top) << "\" width=\"" << num(right - left)
       << "\" height=\"" << num(bottom - top) << "\" fill=\"none\" stroke=\"#444\"/>\n";

    std::vector<double> xpos, ypos;
    for (double t : ax.ticks) xpos.push_back(px(t));
    for (double t : ay.ticks) ypos.push_back(py(t));
    size_t x_stride = label_stride(xpos, [&](size_t i) { return text_width(xlabels[i], tick_font); }, 8);
    size_t y_stride = label_stride(ypos, [](size_t) { return tick_font; }, 4);
    for (size_t i = 0; i < xpos.size(); i += x_stride)
        text(os, xpos[i], bottom + 17, "middle", tick_font, xlabels[i], " fill=\"#333\"");
    for (size_t i = 0; i < ypos.size(); i += y_stride)
        text(os, left - 6, ypos[i] + 4, "end", tick_font, ylabels[i], " fill=\"#333\"");
    text(os, mid_x, bottom + 42, "middle", fit_font(p.x_label, label_font, right - left), escape(p.x_label));
    double mid_y = (top + bottom) / 2;
    text(os, 0, 0, "middle", fit_font(p.y_label, label_font, bottom - top), escape(p.y_label),
         " transform=\"translate(" + num(ox + 18) + "," + num(mid_y) + ") rotate(-90)\"");
    if (!has_data) text(os, mid_x, mid_y, "middle", 14, "no data", " fill=\"#888\"");

    for (const PlotSeries& s : p.series) {
        size_t c = size_t(std::find(names.begin(), names.end(), s.name) - names.begin());
        const char* colour = palette[c % palette_size];
        // Runs of consecutive usable points become one polyline each: a missing point is a gap.
        std::vector<std::vector<std::pair<double, double>>> runs(1);
        for (size_t i = 0; i < s.x.size(); ++i) {
            if (ok(s, i)) runs.back().emplace_back(px(s.x[i]), py(s.y[i]));
            else if (!runs.back().empty()) runs.emplace_back();
        }
        for (const auto& run : runs) {
            if (run.size() < 2) continue;
            os << "<polyline fill=\"none\" stroke=\"" << colour
               << "\" stroke-width=\"2\" stroke-linejoin=\"round\" points=\"";
            for (const auto& [x, y] : run) os << num(x) << ',' << num(y) << ' ';
            os << "\"/>\n";
        }
        if (s.markers)
            for (const auto& run : runs)
                for (const auto& [x, y] : run) os << marker(c, x, y, colour);
    }
}

}  // namespace

std::string render_svg(const std::string& title, const std::vector<PlotPanel>& panels) {
    FP_CHECK(!panels.empty(), "plot '", title, "' has no panels: pass at least one PlotPanel");
    // Colours follow names in order of first appearance, so a series keeps its colour in every panel.
    std::vector<std::string> names;
    std::vector<bool> name_markers;  // the legend shows a series' marker where its first series has them
    for (const PlotPanel& p : panels)
        for (const PlotSeries& s : p.series) {
            FP_CHECK(s.x.size() == s.y.size(), "plot series '", s.name, "' has ", s.x.size(),
                     " x values but ", s.y.size(), " y values: they must be the same length");
            if (std::find(names.begin(), names.end(), s.name) == names.end()) {
                names.push_back(s.name);
                name_markers.push_back(s.markers);
            }
        }

    // One shared legend under the title, wrapped into centred rows, instead of one per panel: it can
    // never cover data and the colours mean the same thing in every panel.
    double width = panel_w * double(panels.size());
    auto item_w = [](const std::string& n) { return 30 + text_width(n, label_font) + 20; };
    std::vector<std::vector<size_t>> rows(1);
    double row_w = 0;
    for (size_t i = 0; i < names.size(); ++i) {
        if (!rows.back().empty() && row_w + item_w(names[i]) > width - 40) rows.emplace_back(), row_w = 0;
        rows.back().push_back(i), row_w += item_w(names[i]);
    }
    double title_h = title.empty() ? 8 : 36;
    double header = title_h + 8 + (names.empty() ? 0 : double(rows.size()) * 20);
    double height = header + panel_h;

    std::ostringstream os;
    os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width) << "\" height=\"" << num(height)
       << "\" viewBox=\"0 0 " << num(width) << ' ' << num(height)
       << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
       << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    if (!title.empty())
        text(os, width / 2, 28, "middle", fit_font(title, title_font, width - 20, true), escape(title),
             " font-weight=\"bold\"");
    for (size_t r = 0; r < rows.size() && !names.empty(); ++r) {
        double total = 0;
        for (size_t i : rows[r]) total += item_w(names[i]);
        double x = (width - total) / 2, y = title_h + 14 + 20 * double(r);
        for (size_t i : rows[r]) {
            const char* colour = palette[i % palette_size];
            line(os, x, y, x + 24, y, std::string(" stroke=\"") + colour + "\" stroke-width=\"2\"");
            if (name_markers[i]) os << marker(i, x + 12, y, colour);
            text(os, x + 30, y + 4.5, "start", label_font, escape(names[i]));
            x += item_w(names[i]);
        }
    }
    for (size_t i = 0; i < panels.size(); ++i) draw_panel(os, panels[i], panel_w * double(i), header, names);
    os << "</svg>\n";
    return os.str();
}

namespace {

// Single-quoted for /bin/sh, so paths with spaces or quotes survive.
std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// Whether `s` ends in `suffix` (lower case), in any case: "Sweep.SVG" ends in ".svg".
bool ends_with(const std::string& s, const std::string& suffix) {
    if (s.size() < suffix.size()) return false;
    return std::equal(suffix.begin(), suffix.end(), s.end() - std::ptrdiff_t(suffix.size()),
                      [](char want, char got) { return std::tolower((unsigned char)got) == want; });
}

}  // namespace

void check_plot_path(const std::string& path) {
    FP_CHECK(ends_with(path, ".png") || ends_with(path, ".svg"), "plot file '", path,
             "' has an unsupported extension: use .svg or .png");
}

void write_plot(const std::string& path, const std::string& title, const std::vector<PlotPanel>& panels) {
    check_plot_path(path);
    bool png = ends_with(path, ".png");
    std::string svg = render_svg(title, panels);  // validate before touching the file system
    if (!png) {
        write_output_file(path, svg, "plot file");
        return;
    }

    FP_CHECK(std::system("command -v rsvg-convert >/dev/null 2>&1") == 0,
             "cannot write '", path, "': PNG output needs rsvg-convert ",
             "(Debian/Ubuntu: apt-get install librsvg2-bin); or ask for a .svg file instead");
    // Unique per process so concurrent benches don't share a temporary.
    static std::atomic<int> counter = 0;
    auto tmp = std::filesystem::temp_directory_path() /
               ("flashport_plot_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".svg");
    write_output_file(tmp.string(), svg, "temporary plot file");
    make_parent_dirs(path, "plot file");
    // rsvg-convert's own diagnostics stay on stderr, where the user sees why it failed.
    std::string cmd =
        "rsvg-convert -b white -f png -o " + shell_quote(path) + " " + shell_quote(tmp.string());
    int rc = std::system(cmd.c_str());
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    FP_CHECK(rc == 0, "rsvg-convert failed (status ", rc, ") converting the plot to '", path,
             "': check that it is writable");
}

}  // namespace flashport::app
