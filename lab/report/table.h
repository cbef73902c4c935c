// Paper tables rebuilt from run folders: every result.json under an output directory, grouped
// by task (the table column) and attention variant, as mean +- std over seeds and grid points,
// with the paper's number beside each of ours (experiments/paper/table<N>.yaml). Markdown for
// reading, CSV for tools.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lab/experiment/result.h"

namespace qkv::report {

using experiment::ResultRow;

// Every run's result.json below `out` (folders without one are unfinished and skipped). A
// damaged one is not a row: its file and what is wrong with it go to `errors` (the others
// still make their tables).
struct Results {
  std::vector<ResultRow> rows;
  std::vector<std::string> errors;
};
Results collect_results(const std::filesystem::path& out);

// The paper's numbers: variant -> column -> value, in the file's row and column order.
struct PaperTable {
  int number = 0;  // the paper's table number
  std::string title;
  std::vector<std::string> columns;  // tasks, then "avg"
  std::vector<std::string> average;  // the tasks "Avg" averages
  std::vector<std::string> variants;
  std::map<std::string, std::map<std::string, double>> values;
  // A language-model table's `model:` — the shape the paper trained (layers, d_model, heads, ffn,
  // context, vocab) and its size ("300M"); runs of that shape get the table's numbers beside them.
  std::optional<experiment::LmShape> model;
  std::string model_size;
  std::optional<double> at(const std::string& variant, const std::string& column) const;
};
PaperTable load_paper_table(const std::string& path);  // IOError naming the file and key
// Every table<N>.yaml in `dir`, by number.
std::vector<PaperTable> load_paper_tables(const std::filesystem::path& dir);

// Ways a set-anomaly run differs from the paper's setup (its SetSource), as bits: a cell carries
// those of any of its runs, marked in the markdown with a footnote each and listed in the CSV.
inline constexpr unsigned kRandomWeights = 1;   // † ResNet34 with random weights, not ImageNet-pretrained
inline constexpr unsigned kStandInDataset = 2;  // ‡ sets of another dataset's images than CIFAR-100
inline constexpr unsigned kNot224 = 4;          // § images not resized to 224 px (or the size not recorded)

// Mean and std over the complete runs; runs that diverged (result.h) are counted apart, so a
// cell may have diverged runs only (its mean and std are then NaN).
struct Cell {
  double mean = 0, std = 0;
  int runs = 0;               // complete runs averaged
  int diverged = 0;           // runs that stopped as diverged
  unsigned not_as_paper = 0;  // kRandomWeights | kStandInDataset | kNot224 of any of its runs
};

struct Table {
  std::vector<std::string> tasks;                            // columns
  std::vector<std::string> variants;                         // rows: the paper's order first, then any others
  std::map<std::string, std::map<std::string, Cell>> cells;  // variant -> task -> cell
  std::map<std::string, double> average;  // variant -> mean of its task means over the averaged tasks
  // Set anomaly: variant -> the marks of the cells its Avg averages; whether any run recorded its
  // sets' setup (the CSV then has a not_as_paper column); for the footnotes, the datasets of
  // kStandInDataset and the image sizes of kNot224 ("32 px").
  std::map<std::string, unsigned> average_not_as_paper;
  bool set_sources = false;
  std::vector<std::string> stand_in_datasets, image_sizes;
  // task -> the experiment scales its runs were made at, as recorded ("" for none or unknown).
  std::map<std::string, std::vector<std::string>> scales;
};

// Groups the classification rows by (task, variant) over their test accuracy. With a paper
// table, only its tasks are kept and "Avg" covers its averaged tasks; without, every task counts.
// "Avg" needs a mean in every averaged task: a cell of diverged runs only leaves it out. Cells
// of set-anomaly runs that did not run as the paper (random weights, another dataset, images not
// resized to 224) are marked, and so is an Avg over them.
Table build_table(const std::vector<ResultRow>& results, const PaperTable* paper);
std::string to_markdown(const Table& t, const PaperTable* paper, const std::string& title);
std::string to_csv(const Table& t, const PaperTable* paper);

}  // namespace qkv::report
