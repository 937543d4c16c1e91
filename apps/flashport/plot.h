// Line charts for `flashport bench attention --sweep ... --plot FILE`: panels side by side under a
// shared title and legend, log or linear axes, one colour per series name across all panels.
// Written as plain SVG so the bench has no plotting dependency; PNG goes through `rsvg-convert`.
#pragma once

#include <string>
#include <vector>

namespace flashport::app {

// Points are drawn in the order given. A non-finite y (NaN = out of memory / skipped) breaks the
// line there; so does a point that is zero or negative on a log axis.
struct PlotSeries {
    std::string name;
    std::vector<double> x, y;
    bool markers = true;  // a marker on every point; off for dense lines such as a timeline
};

// A shaded band over an x range, labelled where the label fits (e.g. a run's phase: load, decode).
struct PlotSpan {
    std::string label;
    double x0, x1;
};

struct PlotPanel {
    std::string title, x_label, y_label;  // the caller puts units in the labels, e.g. "time (ms)"
    bool log_x = true, log_y = true;
    std::vector<PlotSeries> series;
    std::vector<PlotSpan> spans = {};  // drawn under the series, in alternating shades
};

// The whole figure as an SVG document (what write_plot writes for ".svg").
std::string render_svg(const std::string& title, const std::vector<PlotPanel>& panels);

// Throws flashport::Error unless `path` ends in ".svg" or ".png" (any case): for commands that check
// their plot option before a long run rather than at its end.
void check_plot_path(const std::string& path);

// `path` must end in ".svg" or ".png"; throws flashport::Error otherwise, when the file cannot be
// written, or when a PNG is asked for and rsvg-convert (Debian: librsvg2-bin) is missing or fails.
void write_plot(const std::string& path, const std::string& title, const std::vector<PlotPanel>& panels);

}  // namespace flashport::app
