// The paper's Fig. 3: attention maps of every variant on one example per task. For each task
// (row) and variant (column) under a run folder, the first finished run's best checkpoint is
// loaded and its last layer's head-0 attention probabilities on the first test example are drawn
// as a heat map (rows: queries, columns: keys). Q=K variants show near-symmetric maps.
#pragma once
#include <filesystem>

#include "lab/report/table.h"

namespace qkv::report {

// Draws the grid with gnuplot (plot.h) to stem.png, .svg and .pdf, the probabilities in
// stem.csv, rows and columns in the paper's order when `paper` is given; returns the number of
// maps drawn (0: nothing to draw, no file written). A run whose config or checkpoint cannot be
// read is named on stderr and left out. Throws write_figure's IOError when gnuplot is missing or
// fails, after writing stem.csv.
int write_attention_maps(const std::filesystem::path& out, const std::filesystem::path& stem,
                         const PaperTable* paper = nullptr);

}  // namespace qkv::report
