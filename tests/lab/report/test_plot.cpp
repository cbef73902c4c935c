// The figure driver (lab/report/plot.h): the CSV beside every figure holds each point, gnuplot
// draws a PNG, an SVG and a PDF with the titles, axis labels and legends, labels with quotes or
// backquotes neither break the script nor run anything, a series keeps its colour across
// panels, and a missing or failing gnuplot is an IOError that names it while the CSV is kept.
// The drawing tests skip without gnuplot; the others stand in for it with small executables.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "lab/report/plot.h"
#include "tensor/error.h"
#include "tests/support/error_checks.h"
#include "tests/support/test_support.h"

using namespace qkv;
using namespace qkv::report;
namespace fs = std::filesystem;

namespace {

const std::string kQuoted = "it's a \"quoted\" \\ label; # @x $d";

// Sets an environment variable for a scope and puts back what was there.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old) ::setenv(name.c_str(), old->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

// Two line panels sharing labels in a different order (one with a gap and a log axis), and a
// 2x3 heat map.
Figure sample(const std::string& odd_label) {
  Figure f;
  f.title = "sample figure";
  f.lines.push_back({"reverse: training loss",
                     {"epoch"},
                     {"training loss", true},
                     {{"QKV", {1, 2, 3, 4}, {2.0, 0.5, NAN, 0.125}}, {odd_label, {1, 2, 3}, {1.5, 0.75, 0.3}}}});
  f.lines.push_back({"reverse: validation accuracy",
                     {"epoch"},
                     {"validation accuracy", false, 0.0, 1.0},
                     {{odd_label, {1, 2}, {0.25, 0.5}}, {"QKV", {1, 2}, {0.5, 0.875}}}});
  f.heatmaps.push_back({"copy: Q=K=V", 2, 3, {0.5, 0.25, 0.25, 0.0, 1.0, 0.0}, "key", "query"});
  return f;
}

// RFC 4180 fields of one CSV file, row by row.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool in_quotes = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') rows.back().back() += '"', ++i;
      else if (c == '"') in_quotes = false;
      else rows.back().back() += c;
    } else if (c == '"') {
      in_quotes = true;
    } else if (c == ',') {
      rows.back().emplace_back();
    } else if (c == '\n') {
      rows.emplace_back(1);
    } else {
      rows.back().back() += c;
    }
  }
  if (rows.back() == std::vector<std::string>(1)) rows.pop_back();
  return rows;
}

void check_csv(const Figure& f, const fs::path& csv) {
  const auto rows = parse_csv(test::read_file(csv));
  REQUIRE(!rows.empty());
  CHECK(rows[0] == std::vector<std::string>{"panel", "series", "x", "y", "value"});
  size_t r = 1;
  for (const LinePanel& p : f.lines)
    for (const Series& s : p.series)
      for (size_t i = 0; i < s.x.size(); ++i, ++r) {
        REQUIRE(r < rows.size());
        REQUIRE(rows[r].size() == 5);
        CHECK(rows[r][0] == p.title);
        CHECK(rows[r][1] == s.label);
        CHECK(std::stod(rows[r][2]) == s.x[i]);
        if (std::isfinite(s.y[i])) CHECK(std::stod(rows[r][3]) == s.y[i]);
        else CHECK(rows[r][3].empty());  // a gap
      }
  for (const HeatmapPanel& h : f.heatmaps)
    for (int64_t i = 0; i < h.rows * h.cols; ++i, ++r) {
      REQUIRE(r < rows.size());
      REQUIRE(rows[r].size() == 5);
      CHECK(rows[r][0] == h.title);
      CHECK(std::stoll(rows[r][2]) == i % h.cols);
      CHECK(std::stoll(rows[r][3]) == i / h.cols);
      CHECK(std::stod(rows[r][4]) == h.values[size_t(i)]);
    }
  CHECK(r == rows.size());
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

uint32_t big_endian(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | uint8_t(s[at + i]);
  return v;
}

std::string executable(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.write(name, text);
  ::chmod(path.c_str(), 0755);
  return path;
}

}  // namespace

TEST_CASE("plot: the CSV beside a figure holds every point with its gaps and heat-map cells") {
  test::TempDir dir("plot");
  const Figure f = sample("Q=K=V, \"shared\"");
  ScopedEnv env("QKV_GNUPLOT", executable(dir, "silent-gnuplot", "#!/bin/sh\nexit 0\n"));
  // A gnuplot that exits 0 without drawing is a failure too, and the CSV is there all the same.
  const std::string e = test::error_of<IOError>([&] { write_figure(f, dir.path / "fig"); });
  test::check_contains(e, {"gnuplot", "wrote no .png", "fig.csv"});
  check_csv(f, dir.path / "fig.csv");
  CHECK(names_in(dir.path) == std::vector<std::string>{"fig.csv", "silent-gnuplot"});
}

TEST_CASE("plot: QKV_GNUPLOT naming a missing file is an IOError saying what to install after the CSV") {
  test::TempDir dir("plot");
  const std::string missing = (dir.path / "no-such-gnuplot").string();
  const char* before = std::getenv("QKV_GNUPLOT");
  const std::string saved = before ? before : "";
  {
    ScopedEnv env("QKV_GNUPLOT", missing);
    CHECK_FALSE(gnuplot_available());
    CHECK(gnuplot_executable().empty());
    const Figure f = sample("MQA");
    // An extension on the stem is replaced, not doubled.
    const std::string e = test::error_of<IOError>([&] { write_figure(f, dir.path / "curves.png"); });
    test::check_contains(e,
                         {"gnuplot", cat("QKV_GNUPLOT=", missing), "gnuplot-nox", (dir.path / "curves.csv").string()});
    check_csv(f, dir.path / "curves.csv");
    CHECK(names_in(dir.path) == std::vector<std::string>{"curves.csv"});
  }
  const char* after = std::getenv("QKV_GNUPLOT");
  CHECK(bool(after) == bool(before));
  CHECK((after ? std::string(after) : std::string()) == saved);
}

TEST_CASE("plot: a failing gnuplot's exit status and messages are in the error and no partial figure is left") {
  test::TempDir dir("plot");
  // It gets the script as its argument, stdin from /dev/null (cat returns at once) and a HOME of
  // its own (no ~/.gnuplot); its stdout and stderr are the message.
  ScopedEnv env("QKV_GNUPLOT", executable(dir, "broken",
                                          "#!/bin/sh\necho 'unknown terminal pngcairo' >&2\necho \"home=$HOME\"\ncat\n"
                                          "grep -q 'set terminal svg' \"$1\" && echo 'script has svg'\nexit 3\n"));
  const std::string e = test::error_of<IOError>([&] { write_figure(sample("MQA"), dir.path / "maps"); });
  test::check_contains(e, {"gnuplot", "exit status 3", "unknown terminal pngcairo", "maps.csv", "script has svg",
                           cat("home=", (fs::temp_directory_path() / "qkvlab-plot-").string())});
  CHECK(names_in(dir.path) == std::vector<std::string>{"broken", "maps.csv"});
}

TEST_CASE("plot: an inconsistent figure is a ValueError naming the panel and series and nothing is written") {
  test::TempDir dir("plot");
  Figure f = sample("MQA");
  f.lines[1].series[0].y.push_back(1.0);
  test::check_contains(test::error_of<ValueError>([&] { write_figure(f, dir.path / "bad"); }),
                       {"reverse: validation accuracy", "series 'MQA'", "2 x values but 3 y values"});
  f = sample("MQA");
  f.heatmaps[0].values.pop_back();
  test::check_contains(test::error_of<ValueError>([&] { write_figure(f, dir.path / "bad"); }),
                       {"copy: Q=K=V", "5 values for 2x3 cells"});
  f = sample("MQA");
  f.lines[0].y.min = 0.0;  // a log axis cannot start at 0
  test::check_contains(test::error_of<ValueError>([&] { write_figure(f, dir.path / "bad"); }),
                       {"reverse: training loss", "logarithmic"});
  CHECK(names_in(dir.path).empty());
}

TEST_CASE("plot: the script quotes labels and gives a series label one colour in every panel") {
  const Figure f = sample(kQuoted);
  const std::string s = gnuplot_script(f, "a.png", "a.svg", "a.pdf");
  CHECK(s.find("'it''s a \"quoted\" \\ label; # @x $d'") != std::string::npos);
  CHECK(s.find("set logscale y") != std::string::npos);
  const std::regex plot_item(R"(lc rgb '(#[0-9a-f]{6})' dt \d+ title '(QKV|it''s[^\n]*?)'(?=,|\n))");
  std::map<std::string, std::set<std::string>> colours;
  size_t items = 0;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), plot_item); it != std::sregex_iterator(); ++it, ++items)
    colours[(*it)[2].str().substr(0, 3)].insert((*it)[1].str());
  CHECK(items == 3 * 4);  // two series in two panels, once per terminal
  REQUIRE(colours.size() == 2);
  CHECK(colours["QKV"].size() == 1);
  CHECK(colours["it'"].size() == 1);
  CHECK(colours["QKV"] != colours["it'"]);
  // A long label is cut in the legend only.
  Figure wide;
  wide.lines.push_back({"p", {"x"}, {"y"}, {{std::string(50, 'w'), {1}, {1}}}});
  const std::string t = gnuplot_script(wide, "a.png", "a.svg", "a.pdf");
  CHECK(t.find(cat("title '", std::string(37, 'w'), "...'")) != std::string::npos);
  CHECK(t.find(std::string(38, 'w')) == std::string::npos);
}

TEST_CASE("plot: gnuplot draws the figure as PNG and SVG and PDF with titles and axis labels and legends") {
  if (!gnuplot_available()) {
    test::skip("needs gnuplot (Debian: gnuplot-nox) or QKV_GNUPLOT");
    return;
  }
  test::TempDir dir("plot");
  // A backquote would run a shell command inside a double-quoted gnuplot string.
  const std::string marker = (dir.path / "ran").string();
  Figure f = sample(kQuoted);
  f.lines[0].x.label = cat("epoch `touch ", marker, "`");
  const FigureFiles files = write_figure(f, dir.path / "fig");
  CHECK(files.png == dir.path / "fig.png");
  CHECK(names_in(dir.path) == std::vector<std::string>{"fig.csv", "fig.pdf", "fig.png", "fig.svg"});
  CHECK_FALSE(fs::exists(marker));
  check_csv(f, files.csv);

  const std::string png = test::read_file(files.png);
  REQUIRE(png.size() > 24);
  CHECK(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  CHECK(png.substr(12, 4) == "IHDR");
  const uint32_t w = big_endian(png, 16), h = big_endian(png, 20);
  CHECK(w >= 400);  // two columns of panels side by side
  CHECK(w <= 4000);
  CHECK(h >= 300);
  CHECK(h <= 4000);

  const std::string svg = test::read_file(files.svg);
  CHECK(svg.find("<svg") != std::string::npos);
  test::check_contains(svg, {"sample figure", "reverse: training loss", "reverse: validation accuracy", "copy: Q=K=V",
                             "epoch", "training loss", "validation accuracy", "query", ">QKV<",
                             "it's a \"quoted\" \\ label; # @x $d", "epoch `touch"});
  CHECK(test::read_file(files.pdf).substr(0, 5) == "%PDF-");
}
