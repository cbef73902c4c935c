// Figures for the reports: a small description (line panels and heat maps on a grid) drawn by
// gnuplot (Debian's gnuplot-nox) to PNG, SVG and PDF, with every plotted number also written as
// CSV, so the data survives without gnuplot. gnuplot is $QKV_GNUPLOT when set, else `gnuplot`
// in PATH; it runs without a shell on a script file in a private temporary folder.
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tensor/error.h"

namespace qkv::report {

// write_figure's error when there is no gnuplot to run (the CSV has been written).
struct GnuplotMissing : IOError {
  using IOError::IOError;
};

// Every member has a default initializer, so a partial aggregate initialization (Axis{"epoch"})
// is complete (no -Wmissing-field-initializers).
struct Series {
  std::string label{};           // the legend entry; the same label has the same colour in every panel
  std::vector<double> x{}, y{};  // same length; a non-finite y (NaN) is a gap in the line
};

struct Axis {
  std::string label{};
  bool log = false;                    // points <= 0 are left out of a log axis
  std::optional<double> min{}, max{};  // unset: fitted to the data
};

struct LinePanel {
  std::string title{};
  Axis x{}, y{};
  std::vector<Series> series{};
};

// rows x cols values, row-major; row 0 is drawn at the top. A panel without cells (rows or cols
// 0) leaves its place in the grid empty.
struct HeatmapPanel {
  std::string title{};
  int64_t rows = 0, cols = 0;
  std::vector<double> values{};
  std::string x_label{}, y_label{};
  std::optional<double> min{}, max{};  // the colour range; unset: fitted to the panel's values
};

// Panels fill a grid of `columns` columns row by row: the line panels first, then the heat maps.
struct Figure {
  std::string title{};
  int columns = 2;
  std::vector<LinePanel> lines{};
  std::vector<HeatmapPanel> heatmaps{};
};

struct FigureFiles {
  std::filesystem::path png{}, svg{}, pdf{}, csv{};
};

// Writes stem.csv first and always (header `panel,series,x,y,value`: one row per line point,
// with y empty for a gap, and one per heat-map cell with x the column, y the row and the cell in
// `value`), then stem.png, stem.svg and stem.pdf through one gnuplot run. A stem ending in .png,
// .svg, .pdf or .csv has that ending replaced. Every file is written atomically. ValueError for
// an inconsistent figure (naming the panel and series); IOError naming gnuplot, and saying to
// install Debian's gnuplot-nox, when gnuplot fails or runs past its time limit, GnuplotMissing
// when there is none.
FigureFiles write_figure(const Figure& f, const std::filesystem::path& stem);

// A study's figure beside its tables: write_figure, then a line on `log` ("<who>: figure
// stem.png (.svg, .pdf; data in stem.csv)"), or, when gnuplot is missing or fails, a line saying
// why (the tables stand without the figure).
void write_study_figure(const Figure& f, const std::filesystem::path& stem, std::FILE* log, const std::string& who);

// Whether the gnuplot executable write_figure would run exists and is executable.
bool gnuplot_available();

// The executable write_figure runs: $QKV_GNUPLOT (looked up in PATH when it has no '/'), else
// `gnuplot` in PATH; empty when not found.
std::filesystem::path gnuplot_executable();

// The gnuplot script write_figure runs: the data as inline blocks, then the figure drawn once
// per terminal into `png`, `svg` and `pdf`. Exposed for tests.
std::string gnuplot_script(const Figure& f, const std::filesystem::path& png, const std::filesystem::path& svg,
                           const std::filesystem::path& pdf);

}  // namespace qkv::report
