// The SVG plot writer: files are complete SVG documents, text is escaped, no coordinate is ever
// NaN/inf whatever the data, and bad requests fail with flashport::Error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include <unistd.h>

#include "flashport/error.h"
#include "flashport/plot.h"

namespace fs = std::filesystem;
using flashport::app::PlotPanel;
using flashport::app::PlotSeries;
using flashport::app::render_svg;
using flashport::app::write_plot;

namespace {

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_v = std::numeric_limits<double>::infinity();

std::string read_all(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

fs::path temp_path(const std::string& name) {
    return fs::temp_directory_path() / ("flashport_test_plot_" + std::to_string(::getpid()) + "_" + name);
}

// Memory and time against sequence length, the shape `bench attention --sweep` produces.
std::vector<PlotPanel> sample_panels() {
    PlotSeries naive_mem{"naive", {}, {}}, flash_mem{"flash", {}, {}};
    PlotSeries naive_ms{"naive", {}, {}}, flash_ms{"flash", {}, {}};
    for (double n = 1024; n <= 8192; n *= 2) {
        naive_mem.x.push_back(n), naive_mem.y.push_back(4 * n * n / 1e6);
        flash_mem.x.push_back(n), flash_mem.y.push_back(0.5 * n / 1e3);
        naive_ms.x.push_back(n), naive_ms.y.push_back(n == 8192 ? nan_v : 2e-8 * n * n);
        flash_ms.x.push_back(n), flash_ms.y.push_back(1e-8 * n * n);
    }
    return {{"Peak memory", "sequence length", "memory (MB)", true, true, {naive_mem, flash_mem}},
            {"Forward time", "sequence length", "time (ms)", true, true, {naive_ms, flash_ms}}};
}

// Structural checks every output must pass.
void expect_sane_svg(const std::string& svg) {
    ASSERT_EQ(svg.rfind("<svg", 0), 0u) << "must start with <svg";
    std::string trimmed = svg.substr(0, svg.find_last_not_of(" \n\r\t") + 1);
    ASSERT_GE(trimmed.size(), 6u);
    EXPECT_EQ(trimmed.substr(trimmed.size() - 6), "</svg>");
    // Attribute values hold every coordinate; none may be NaN or infinite.
    static const std::regex bad(R"re(="[^"]*(nan|inf)[^"]*")re", std::regex::icase);
    EXPECT_FALSE(std::regex_search(svg, bad)) << svg;
}

}  // namespace

TEST(Plot, WritesSvgWithSeriesAndTicks) {
    auto path = temp_path("sample.svg");
    auto panels = sample_panels();
    panels[0].series[0].name = "naive <O(N^2)> & \"quoted\"";
    write_plot(path.string(), "Attention sweep", panels);
    ASSERT_TRUE(fs::exists(path));
    std::string svg = read_all(path);
    expect_sane_svg(svg);
    EXPECT_NE(svg.find("naive &lt;O(N^2)&gt; &amp; &quot;quoted&quot;"), std::string::npos);
    EXPECT_EQ(svg.find("<O(N^2)>"), std::string::npos);
    EXPECT_NE(svg.find(">flash<"), std::string::npos);
    EXPECT_NE(svg.find(">1k<"), std::string::npos) << "powers of two label as 1k..8k";
    EXPECT_NE(svg.find(">8k<"), std::string::npos);
    EXPECT_NE(svg.find(">Attention sweep<"), std::string::npos);
    fs::remove(path);
}

TEST(Plot, SameNameSameColourAcrossPanels) {
    std::string svg = render_svg("t", sample_panels());
    std::regex stroke(R"re(<polyline[^>]*stroke="(#[0-9a-f]{6})")re");
    std::set<std::string> colours;
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), stroke); it != std::sregex_iterator(); ++it)
        colours.insert((*it)[1]);
    EXPECT_EQ(colours.size(), 2u) << "two names over two panels must use exactly two colours";
}

TEST(Plot, LogYTicksAreOneTwoFive) {
    PlotPanel p{"", "n", "ms", true, true, {{"s", {1, 10, 100}, {0.1, 1, 10}}}};
    std::string svg = render_svg("t", {p});
    for (const char* label : {">0.1<", ">1<", ">10<"}) EXPECT_NE(svg.find(label), std::string::npos) << label;
}

// A band wide enough for its label has it across its top; a narrow one runs it down the band (a PNG
// has no tooltips); one narrower than a line of text only has the tooltip.
TEST(Plot, SpanLabelsAcrossOrDownTheBand) {
    PlotPanel p{"", "s", "GiB", false, false, {{"tracked", {0, 100}, {0, 1}}}};
    p.spans = {{"a wide phase", 0, 60}, {"narrow", 60, 66}, {"thin", 66, 66.1}};
    const std::string svg = render_svg("t", {p});
    expect_sane_svg(svg);
    const std::regex across(R"re(<text[^>]*>a wide phase</text>)re"), down(R"re(<text[^>]*rotate\(90[^>]*>narrow</text>)re");
    EXPECT_TRUE(std::regex_search(svg, across)) << svg;
    EXPECT_FALSE(std::regex_search(svg, std::regex(R"re(<text[^>]*rotate[^>]*>a wide phase<)re")));
    EXPECT_TRUE(std::regex_search(svg, down)) << svg;
    EXPECT_EQ(svg.find(">thin</text>"), std::string::npos);
    EXPECT_NE(svg.find("<title>thin</title>"), std::string::npos);
}

TEST(Plot, BadExtensionThrows) {
    try {
        write_plot(temp_path("x.jpg").string(), "t", sample_panels());
        FAIL() << "expected flashport::Error";
    } catch (const flashport::Error& e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find(".svg"), std::string::npos);
        EXPECT_NE(msg.find(".png"), std::string::npos);
    }
    EXPECT_THROW(write_plot(temp_path("noext").string(), "t", sample_panels()), flashport::Error);
    EXPECT_FALSE(fs::exists(temp_path("x.jpg")));
}

TEST(Plot, InvalidInputThrows) {
    EXPECT_THROW(render_svg("t", {}), flashport::Error);
    PlotPanel p{"", "", "", true, true, {{"s", {1, 2, 3}, {1, 2}}}};
    EXPECT_THROW(render_svg("t", {p}), flashport::Error);
}

TEST(Plot, EdgeCasesStaySane) {
    std::vector<PlotPanel> cases = {
        {"empty series", "x", "y", true, true, {{"e", {}, {}}}},
        {"no series", "x", "y", true, true, {}},
        {"single point", "x", "y", true, true, {{"one", {1024}, {3}}}},
        {"all equal", "x", "y", true, true, {{"flat", {5, 5, 5}, {7, 7, 7}}}},
        {"all equal linear", "x", "y", false, false, {{"flat", {0, 0}, {0, 0}}}},
        {"zero and negative on log", "x", "y", true, true, {{"neg", {0, -1, 2, 4, 8}, {1, 2, -3, 0, 5}}}},
        {"nan and inf", "x", "y", true, true, {{"nan", {1, 2, nan_v, 8, 16}, {nan_v, 2, 3, inf_v, 5}}}},
        {"all missing", "x", "y", true, true, {{"gone", {1, 2}, {nan_v, -inf_v}}}},
        {"linear negatives", "x", "y", false, false, {{"lin", {-3, 0, 0.1, 7}, {-1e-3, 2e-3, 0, 5e-4}}}},
        {"narrow log", "x", "y", true, true, {{"narrow", {1000, 1100}, {1.1, 1.9}}}},
        {"wide log", "x", "y", true, true, {{"wide", {1e-6, 1e12}, {1e-9, 1e15}}}},
    };
    for (const PlotPanel& p : cases) {
        SCOPED_TRACE(p.title);
        std::string svg;
        ASSERT_NO_THROW(svg = render_svg(p.title, {p}));
        expect_sane_svg(svg);
    }
}

TEST(Plot, PngViaRsvgConvert) {
    if (std::system("command -v rsvg-convert >/dev/null 2>&1") != 0) GTEST_SKIP() << "rsvg-convert not installed";
    auto path = temp_path("sample.png");
    write_plot(path.string(), "Attention sweep", sample_panels());
    std::string png = read_all(path);
    ASSERT_GE(png.size(), 8u);
    EXPECT_EQ(png.substr(1, 3), "PNG");
    fs::remove(path);
}

TEST(Plot, PngWithoutRsvgConvertSaysWhatToInstall) {
    std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", "/nonexistent", 1);
    try {
        write_plot(temp_path("missing.png").string(), "t", sample_panels());
        ::setenv("PATH", old_path.c_str(), 1);
        FAIL() << "expected flashport::Error";
    } catch (const flashport::Error& e) {
        ::setenv("PATH", old_path.c_str(), 1);
        EXPECT_NE(std::string(e.what()).find("rsvg-convert"), std::string::npos);
    }
}

// README command 1 on a fresh clone writes into out/, which does not exist yet (issue 11).
TEST(Plot, MissingFoldersAreCreated) {
    const fs::path dir = temp_path("dirs");
    const fs::path path = dir / "out" / "deeper" / "sweep.svg";
    write_plot(path.string(), "t", sample_panels());
    EXPECT_NE(read_all(path).find("</svg>"), std::string::npos);
    std::ofstream(dir / "blocker") << "a file where a folder should be";
    try {
        write_plot((dir / "blocker" / "x.svg").string(), "t", sample_panels());
        FAIL() << "no error";
    } catch (const flashport::Error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot create folder"), std::string::npos) << e.what();
    }
    fs::remove_all(dir);
}
