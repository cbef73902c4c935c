#include "lab/report/table.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <functional>
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

namespace {

// `model: {size: 300M, layers: 20, d_model: 1024, heads: 16, ffn: 4096, context: 2048, vocab: 50304}`.
void read_paper_model(const YAML::Node& m, const std::string& path, PaperTable& t) {
  check<IOError>(m.IsMap(), path, ": 'model' must map size, layers, d_model, heads, ffn, context, vocab");
  experiment::LmShape s;
  const std::pair<const char*, int64_t*> fields[] = {{"layers", &s.layers},   {"d_model", &s.d_model},
                                                     {"heads", &s.heads},     {"ffn", &s.ffn},
                                                     {"context", &s.context}, {"vocab", &s.vocab}};
  for (const auto& kv : m) {
    const std::string key = kv.first.as<std::string>();
    if (key == "size") {
      t.model_size = kv.second.as<std::string>();
      continue;
    }
    auto f = std::find_if(std::begin(fields), std::end(fields), [&](const auto& x) { return key == x.first; });
    check<IOError>(f != std::end(fields), path, ": model.", key,
                   " is not a shape key (expected size, layers, d_model, heads, ffn, context, vocab)");
    int64_t v = 0;
    try {
      v = kv.second.as<int64_t>();
    } catch (const YAML::Exception&) { throw IOError(cat(path, ": model.", key, " is not an integer")); }
    check<IOError>(v >= 1, path, ": model.", key, " is ", v, ", expected a positive integer");
    *f->second = v;
  }
  for (const auto& [key, value] : fields)
    check<IOError>(*value > 0, path, ": model.", key, " is missing (the shape the paper's numbers belong to)");
  check<IOError>(!t.model_size.empty(), path, ": model.size is missing (the paper's name for the model, e.g. 300M)");
  t.model = s;
}

}  // namespace

PaperTable load_paper_table(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) { throw IOError(cat(path, ": ", e.what())); }
  check<IOError>(root.IsMap() && root["tasks"].IsSequence() && root["rows"].IsMap(), path,
                 ": expected 'tasks' (a list) and 'rows' (a map of variant -> {task: value})");
  PaperTable t;
  try {
    t.number = root["table"] ? root["table"].as<int>() : 0;
    t.title = root["title"] ? root["title"].as<std::string>() : cat("Table ", t.number);
    for (const auto& task : root["tasks"]) t.columns.push_back(task.as<std::string>());
    if (root["average"])
      for (const auto& task : root["average"]) t.average.push_back(task.as<std::string>());
    else t.average = t.columns;
    if (root["model"]) read_paper_model(root["model"], path, t);
  } catch (const YAML::Exception& e) {
    throw IOError(
        cat(path, ": expected table (a number), title (text), tasks and average (lists of names): ", e.what()));
  }
  const bool lm = std::find(t.columns.begin(), t.columns.end(), "lm") != t.columns.end();
  check<IOError>(!lm || t.model, path,
                 ": a language-model table (tasks: [lm]) needs 'model: {size, layers, d_model, heads, ffn, context, "
                 "vocab}', the shape its numbers belong to");
  t.columns.push_back("avg");
  for (const auto& row : root["rows"]) {
    check<IOError>(row.first.IsScalar(), path, ": rows: a variant name must be text");
    const std::string variant = row.first.Scalar();
    t.variants.push_back(variant);
    check<IOError>(row.second.IsMap(), path, ": rows.", variant, " must map columns to numbers");
    for (const auto& cell : row.second) {
      check<IOError>(cell.first.IsScalar(), path, ": rows.", variant, ": a column name must be text");
      try {
        t.values[variant][cell.first.Scalar()] = cell.second.as<double>();
      } catch (const YAML::Exception&) {
        throw IOError(cat(path, ": rows.", variant, ".", cell.first.Scalar(), " is not a number"));
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

namespace {

void remember_once(std::vector<std::string>& list, const std::string& s) {
  if (std::find(list.begin(), list.end(), s) == list.end()) list.push_back(s);
}

// How a set-anomaly run differs from the paper's setup (ImageNet-pretrained ResNet34, CIFAR-100,
// 224 px); the dataset and size that differ are added to t's footnote lists.
unsigned set_marks(const experiment::SetSource& s, Table& t) {
  unsigned m = 0;
  // Rows written before `pretrained` was recorded name a random encoder in `features`.
  if (s.pretrained ? !*s.pretrained : s.features == "resnet34 (random init)") m |= kRandomWeights;
  if (s.dataset != "cifar100") {
    m |= kStandInDataset;
    remember_once(t.stand_in_datasets, s.dataset);
  }
  if (!s.image_size || (*s.image_size != 0 && *s.image_size != 224)) {  // 0: features from a file
    m |= kNot224;
    remember_once(t.image_sizes, s.image_size ? cat(*s.image_size, " px") : std::string("a size not recorded"));
  }
  return m;
}

}  // namespace

Table build_table(const std::vector<ResultRow>& results, const PaperTable* paper) {
  std::map<std::string, std::map<std::string, std::vector<double>>> values;  // variant -> task -> values
  std::map<std::string, std::map<std::string, int>> diverged;                // variant -> task -> runs
  std::map<std::string, std::map<std::string, unsigned>> marks;              // variant -> task -> not as paper
  Table t;
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
    if (r.sets) {
      marks[r.variant][r.task] |= set_marks(*r.sets, t);
      t.set_sources = true;
    }
    remember(tasks, r.task);
    remember(variants, r.variant);
    remember(t.scales[r.task], r.scale);
  }
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
    unsigned averaged_marks = 0;
    for (const auto& task : t.tasks) {
      const auto& xs = values[v][task];
      Cell c;
      c.diverged = diverged[v][task];
      c.not_as_paper = marks[v][task];
      if (xs.empty() && c.diverged == 0) continue;
      c.runs = int(xs.size());
      for (double x : xs) c.mean += x / double(xs.size());
      for (double x : xs) c.std += (x - c.mean) * (x - c.mean);
      c.std = xs.size() > 1 ? std::sqrt(c.std / double(xs.size() - 1)) : 0.0;
      if (xs.empty()) c.mean = c.std = NAN;
      t.cells[v][task] = c;
      if (xs.empty() || std::find(averaged.begin(), averaged.end(), task) == averaged.end()) continue;
      sum += c.mean;
      averaged_marks |= c.not_as_paper;
      ++n;
    }
    wanted = int(averaged.size());  // an average over fewer tasks than the paper's would mislead
    if (n == wanted && n > 0) t.average[v] = sum / n;
    if (n == wanted && n > 0 && averaged_marks) t.average_not_as_paper[v] = averaged_marks;
  }
  return t;
}

namespace {
std::string decimals(double x, int digits = 3) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// "0.700 ± 0.141 (2)", "0.700 ± 0.141 (2, 1 diverged)" or "diverged (1)".
std::string cell_text(const Cell& c) {
  if (c.runs == 0) return cat("diverged (", c.diverged, ")");
  std::string s = cat(decimals(c.mean), " ± ", decimals(c.std), " (", c.runs);
  if (c.diverged > 0) s += cat(", ", c.diverged, " diverged");
  return s + ")";
}

bool any_diverged(const Table& t) {
  for (const auto& [v, cells] : t.cells)
    for (const auto& [task, c] : cells)
      if (c.diverged > 0) return true;
  return false;
}

struct Mark {
  unsigned bit;
  const char* sign;  // markdown
  const char* word;  // CSV
};
constexpr Mark kMarks[] = {{kRandomWeights, "†", "random_weights"},
                           {kStandInDataset, "‡", "stand_in_dataset"},
                           {kNot224, "§", "not_224px"}};

std::string mark_signs(unsigned m) {
  std::string s;
  for (const Mark& k : kMarks)
    if (m & k.bit) s += k.sign;
  return s;
}

std::string mark_words(unsigned m) {
  std::string s;
  for (const Mark& k : kMarks)
    if (m & k.bit) s += cat(s.empty() ? "" : " ", k.word);
  return s;
}

// "cifar10" -> "CIFAR-10"; another name as it is.
std::string dataset_title(const std::string& name) {
  const std::map<std::string, std::string> titles = {{"mnist", "MNIST"},
                                                     {"fashion-mnist", "Fashion-MNIST"},
                                                     {"cifar10", "CIFAR-10"},
                                                     {"cifar100", "CIFAR-100"},
                                                     {"tinyimagenet", "TinyImageNet"}};
  auto it = titles.find(name);
  return it == titles.end() ? name : it->second;
}

std::string joined(const std::vector<std::string>& xs, const std::function<std::string(const std::string&)>& f) {
  std::string s;
  for (const auto& x : xs) s += cat(s.empty() ? "" : ", ", f(x));
  return s;
}

// Which experiment scale each column's runs were made at (e.g. Anomaly from `template`), when
// the runs recorded one.
std::string scales_line(const Table& t) {
  std::string s;
  for (const auto& task : t.tasks) {
    const auto it = t.scales.find(task);
    if (it == t.scales.end()) continue;
    std::string names;
    for (const std::string& scale : it->second)
      names += cat(names.empty() ? "" : " and ", scale.empty() ? std::string("no scale") : cat("`", scale, "`"));
    s += cat(s.empty() ? "" : ", ", dataset_title(task), ": ", names);
  }
  const bool recorded = std::any_of(t.scales.begin(), t.scales.end(), [](const auto& kv) {
    return std::any_of(kv.second.begin(), kv.second.end(), [](const std::string& x) { return !x.empty(); });
  });
  return recorded ? cat("\nScales the runs were made at: ", s, ".\n") : std::string();
}

// One footnote per mark used in the table's cells.
std::string footnotes(const Table& t) {
  unsigned used = 0;
  for (const auto& [v, cells] : t.cells)
    for (const auto& [task, c] : cells) used |= c.not_as_paper;
  std::string s;
  if (used & kRandomWeights)
    s += "\n† ResNet34 with random weights (no data.resnet_weights): the paper's is ImageNet-pretrained\n";
  if (used & kStandInDataset)
    s += cat("\n‡ sets of ", joined(t.stand_in_datasets, dataset_title), " images: the paper uses CIFAR-100\n");
  if (used & kNot224)
    s += cat("\n§ images encoded at ", joined(t.image_sizes, [](const std::string& x) { return x; }),
             ": the paper resizes them to 224 px\n");
  return s;
}
}  // namespace

std::string to_markdown(const Table& t, const PaperTable* paper, const std::string& title) {
  std::ostringstream s;
  s << "### " << title << "\n\nours: mean ± std over runs (n); the paper's number in brackets";
  if (any_diverged(t)) s << "; runs that diverged (a NaN or inf loss) are counted apart and not averaged";
  if (paper) s << ". Where qkvlab's protocol differs from the study's: docs/FIDELITY.md";
  s << "\n\n| variant |";
  for (const auto& task : t.tasks) s << " " << task << " |";
  s << " Avg |\n|---|";
  for (size_t i = 0; i <= t.tasks.size(); ++i) s << "---|";
  s << "\n";
  auto paper_note = [&](const std::string& v, const std::string& col) {
    auto p = paper ? paper->at(v, col) : std::nullopt;
    return p ? " [" + decimals(*p) + "]" : std::string();
  };
  for (const auto& v : t.variants) {
    s << "| " << v << " |";
    for (const auto& task : t.tasks) {
      auto it = t.cells.at(v).find(task);
      if (it == t.cells.at(v).end()) s << " – |";
      else s << " " << cell_text(it->second) << mark_signs(it->second.not_as_paper) << paper_note(v, task) << " |";
    }
    auto avg = t.average.find(v);
    auto avg_marks = t.average_not_as_paper.find(v);
    s << " " << (avg == t.average.end() ? std::string("–") : decimals(avg->second))
      << (avg_marks == t.average_not_as_paper.end() ? std::string() : mark_signs(avg_marks->second))
      << paper_note(v, "avg") << " |\n";
  }
  if (paper && !paper->average.empty()) {
    std::string missing;
    for (const auto& task : paper->average)
      if (std::find(t.tasks.begin(), t.tasks.end(), task) == t.tasks.end())
        missing += (missing.empty() ? "" : ", ") + task;
    if (!missing.empty())
      s << "\nAvg is the mean over " << paper->average.size() << " tasks; no runs of: " << missing << "\n";
  }
  s << footnotes(t) << scales_line(t);
  return s.str();
}

std::string to_csv(const Table& t, const PaperTable* paper) {
  std::ostringstream s;
  s << "variant,task,mean,std,runs,paper,diverged" << (t.set_sources ? ",not_as_paper\n" : "\n");
  auto marks = [&](unsigned m) { return t.set_sources ? cat(",", mark_words(m)) : std::string(); };
  auto paper_value = [&](const std::string& v, const std::string& col) {
    auto p = paper ? paper->at(v, col) : std::nullopt;
    return p ? decimals(*p, 4) : std::string();
  };
  for (const auto& v : t.variants) {
    for (const auto& task : t.tasks) {
      auto it = t.cells.at(v).find(task);
      if (it == t.cells.at(v).end()) continue;
      const Cell& c = it->second;
      s << v << "," << task << "," << (c.runs > 0 ? decimals(c.mean, 6) : "") << ","
        << (c.runs > 0 ? decimals(c.std, 6) : "") << "," << c.runs << "," << paper_value(v, task) << "," << c.diverged
        << marks(c.not_as_paper) << "\n";
    }
    auto avg = t.average.find(v);
    auto avg_marks = t.average_not_as_paper.find(v);
    if (avg != t.average.end())
      s << v << ",avg," << decimals(avg->second, 6) << ",,," << paper_value(v, "avg") << ","
        << marks(avg_marks == t.average_not_as_paper.end() ? 0u : avg_marks->second) << "\n";
  }
  return s.str();
}

}  // namespace qkv::report
