// The paper's tables rebuilt from the runs under a folder (`qkvlab table DIR`, and the end of
// `qkvlab run`), each with the paper's numbers beside ours (paper_dir/table<N>.yaml), written to
// DIR/table<N>.md and .csv and printed (language models: the table of their model shape, else
// DIR/lm.md without paper numbers; a run over several contexts also DIR/ablation-context.md);
// plus the figures, drawn by gnuplot as .png, .svg and .pdf with their data in .csv: attention
// maps of the synthetic runs (Fig. 3, DIR/attention_maps.*), training curves of the vision runs
// (Fig. 2, DIR/curves.*) and validation-loss curves of the language models (DIR/lm_curves.*).
// Without gnuplot only the figures' CSVs are written, and one line says so.
#pragma once
#include <filesystem>
#include <ostream>

namespace qkv::report {

// Writes the tables and figures of the runs under `dir` and prints the tables to `os`; damaged
// results and figures that could not be drawn are reported on `warnings` and skipped.
void write_folder_tables(const std::filesystem::path& dir, const std::filesystem::path& paper_dir, std::ostream& os,
                         std::ostream& warnings);

}  // namespace qkv::report
