#include "lab/report/table.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tensor/error.h"

namespace qkv::report {

namespace fs = std::filesystem;

Results collect_results(const fs::path& out) {
  check<IOError>(fs::is_directory(out), out.string(), ": not a directory of runs");
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(out))
    if (e.path().filename() == "result.json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  Results results;
  for (const fs::path& f : files) {
    try {
      results.rows.push_back(experiment::read_result_file(f));
    } catch (const Error& e) { results.errors.push_back(e.what()); }
  }
  return results;
}

std::optional<double> PaperTable::at(const std::string& variant, const std::string& column) const {
  auto r = values.find(variant);
  if (r == values.end()) return std::nullopt;
  auto c = r->second.find(column);
  if (c == r->second.end()) return std::nullopt;
  return c->second;
}

PaperTable load_paper_table(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) { throw IOError(cat(path, ": ", e.what())); }
  check<IOError>(root["tasks"].IsSequence() && root["rows"].IsMap(), path,
                 ": expected 'tasks' (a list) and 'rows' (a map of variant -> {task: value})");
  PaperTable t;
  t.number = root["table"] ? root["table"].as<int>() : 0;
  t.title = root["title"] ? root["title"].as<std::string>() : cat("Table ", t.number);
  for (const auto& task : root["tasks"]) t.columns.push_back(task.as<std::string>());
  if (root["average"])
    for (const auto& task : root["average"]) t.average.push_back(task.as<std::string>());
  else t.average = t.columns;
  t.columns.push_back("avg");
  for (const auto& row : root["rows"]) {
    const std::string variant = row.first.as<std::string>();
    t.variants.push_back(variant);
    check<IOError>(row.second.IsMap(), path, ": rows.", variant, " must map columns to numbers");
    for (const auto& cell : row.second) {
      try {
        t.values[variant][cell.first.as<std::string>()] = cell.second.as<double>();
      } catch (const YAML::Exception&) {
        throw IOError(cat(path, ": rows.", variant, ".", cell.first.as<std::string>(), " is not a number"));
      }
    }
  }
  return t;
}

std::vector<PaperTable> load_paper_tables(const fs::path& dir) {
  std::vector<PaperTable> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("table") && name.ends_with(".yaml")) out.push_back(load_paper_table(e.path().string()));
  }
  std::sort(out.begin(), out.end(), [](const PaperTable& a, const PaperTable& b) { return a.number < b.number; });
  return out;
}

Table build_table(const std::vector<ResultRow>& results, const PaperTable* paper) {
  std::map<std::string, std::map<std::string, std::vector<double>>> values;  // variant -> task -> values
  std::map<std::string, std::map<std::string, int>> diverged;                // variant -> task -> runs
  std::vector<std::string> tasks, variants;
  auto remember = [](std::vector<std::string>& list, const std::string& s) {
    if (std::find(list.begin(), list.end(), s) == list.end()) list.push_back(s);
  };
  for (const ResultRow& r : results) {
    const experiment::ClassificationResult* c = r.classification();
    if (!c) continue;  // language models report perplexity (lm_table.h)
    if (paper && std::find(paper->columns.begin(), paper->columns.end(), r.task) == paper->columns.end()) continue;
    if (r.diverged) ++diverged[r.variant][r.task];
    else values[r.variant][r.task].push_back(c->test_accuracy);
    values[r.variant][r.task];  // the cell exists either way
    remember(tasks, r.task);
    remember(variants, r.variant);
  }
  Table t;
  if (paper) {  // the paper's order, then whatever else ran
    for (const auto& c : paper->columns)
      if (c != "avg" && std::find(tasks.begin(), tasks.end(), c) != tasks.end()) t.tasks.push_back(c);
    for (const auto& v : paper->variants)
      if (values.count(v)) t.variants.push_back(v);
  }
  for (const auto& c : tasks) remember(t.tasks, c);
  for (const auto& v : variants) remember(t.variants, v);
  const std::vector<std::string>& averaged = paper && !paper->average.empty() ? paper->average : t.tasks;
  for (const auto& v : t.variants) {
    double sum = 0;
    int n = 0, wanted = 0;
    for (const auto& task : t.tasks) {
      const auto& xs = values[v][task];
      Cell c;
      c.diverged = diverged[v][task];
      if (xs.empty() && c.diverged == 0) continue;
      c.runs = int(xs.size());
      for (double x : xs) c.mean += x / double(xs.size());
      for (double x : xs) c.std += (x - c.mean) * (x - c.mean);
      c.std = xs.size() > 1 ? std::sqrt(c.std / double(xs.size() - 1)) : 0.0;
      if (xs.empty()) c.mean = c.std = NAN;
      t.cells[v][task] = c;
      if (xs.empty() || std::find(averaged.begin(), averaged.end(), task) == averaged.end()) continue;
      sum += c.mean;
      ++n;
    }
    wanted = int(averaged.size());  // an average over fewer tasks than the paper's would mislead
    if (n == wanted && n > 0) t.average[v] = sum / n;
  }
  return t;
}

namespace {
std::string fmt(double x, int digits = 3) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// "0.700 ± 0.141 (2)", "0.700 ± 0.141 (2, 1 diverged)" or "diverged (1)".
std::string cell_text(const Cell& c) {
  if (c.runs == 0) return cat("diverged (", c.diverged, ")");
  std::string s = cat(fmt(c.mean), " ± ", fmt(c.std), " (", c.runs);
  if (c.diverged > 0) s += cat(", ", c.diverged, " diverged");
  return s + ")";
}

bool any_diverged(const Table& t) {
  for (const auto& [v, cells] : t.cells)
    for (const auto& [task, c] : cells)
      if (c.diverged > 0) return true;
  return false;
}
}  // namespace

std::string to_markdown(const Table& t, const PaperTable* paper, const std::string& title) {
  std::ostringstream s;
  s << "### " << title << "\n\nours: mean ± std over runs (n); the paper's number in brackets";
  if (any_diverged(t)) s << "; runs that diverged (a NaN or inf loss) are counted apart and not averaged";
  s << "\n\n| variant |";
  for (const auto& task : t.tasks) s << " " << task << " |";
  s << " Avg |\n|---|";
  for (size_t i = 0; i <= t.tasks.size(); ++i) s << "---|";
  s << "\n";
  auto paper_note = [&](const std::string& v, const std::string& col) {
    auto p = paper ? paper->at(v, col) : std::nullopt;
    return p ? " [" + fmt(*p) + "]" : std::string();
  };
  for (const auto& v : t.variants) {
    s << "| " << v << " |";
    for (const auto& task : t.tasks) {
      auto it = t.cells.at(v).find(task);
      if (it == t.cells.at(v).end()) s << " – |";
      else s << " " << cell_text(it->second) << paper_note(v, task) << " |";
    }
    auto avg = t.average.find(v);
    s << " " << (avg == t.average.end() ? std::string("–") : fmt(avg->second)) << paper_note(v, "avg") << " |\n";
  }
  if (paper && !paper->average.empty()) {
    std::string missing;
    for (const auto& task : paper->average)
      if (std::find(t.tasks.begin(), t.tasks.end(), task) == t.tasks.end())
        missing += (missing.empty() ? "" : ", ") + task;
    if (!missing.empty())
      s << "\nAvg is the mean over " << paper->average.size() << " tasks; no runs of: " << missing << "\n";
  }
  return s.str();
}

std::string to_csv(const Table& t, const PaperTable* paper) {
  std::ostringstream s;
  s << "variant,task,mean,std,runs,paper,diverged\n";
  auto paper_value = [&](const std::string& v, const std::string& col) {
    auto p = paper ? paper->at(v, col) : std::nullopt;
    return p ? fmt(*p, 4) : std::string();
  };
  for (const auto& v : t.variants) {
    for (const auto& task : t.tasks) {
      auto it = t.cells.at(v).find(task);
      if (it == t.cells.at(v).end()) continue;
      const Cell& c = it->second;
      s << v << "," << task << "," << (c.runs > 0 ? fmt(c.mean, 6) : "") << "," << (c.runs > 0 ? fmt(c.std, 6) : "")
        << "," << c.runs << "," << paper_value(v, task) << "," << c.diverged << "\n";
    }
    auto avg = t.average.find(v);
    if (avg != t.average.end()) s << v << ",avg," << fmt(avg->second, 6) << ",,," << paper_value(v, "avg") << ",\n";
  }
  return s.str();
}

}  // namespace qkv::report
