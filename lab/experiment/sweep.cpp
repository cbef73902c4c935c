// Expanding grid x variants x seeds into resolved runs with stable ids.
#include "lab/experiment/sweep.h"

#include <algorithm>
#include <set>

#include "lab/experiment/overrides.h"

namespace qkv::experiment {

std::string sanitize_component(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string_view("._-+=()").find(c) != std::string_view::npos;
    out += safe ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") out = std::string(std::max<size_t>(out.size(), 1), '_');
  return out;
}

namespace {

std::string last_component(const std::string& key) {
  const size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

// A grid value as it appears in a run id: the scalar text, list items joined by '_'.
std::string value_text(const Node& n) {
  if (n.is_scalar()) return n.text;
  if (n.is_sequence()) {
    std::string s;
    for (size_t i = 0; i < n.items.size(); ++i) {
      if (i) s += "_";
      s += value_text(n.items[i]);
    }
    return s;
  }
  return n.describe();
}

// The sources of the listed variants or seeds, for messages; the list itself when it has none.
std::vector<Source> item_sources(const Node& tree, const char* key, size_t count) {
  std::vector<Source> out(count, Source{cat("sweep.", key)});
  const Entry* sweep = tree.find("sweep");
  const Entry* list = sweep && sweep->value.is_map() ? sweep->value.find(key) : nullptr;
  if (list && list->value.is_sequence() && list->value.items.size() == count)
    for (size_t i = 0; i < count; ++i) out[i] = list->value.items[i].source;
  return out;
}

}  // namespace

constexpr double kMaxRuns = 1e6;

std::vector<Run> expand_tree(const Node& tree) {
  const Config base = parse_config(tree);
  const SweepConfig& sweep = base.sweep();
  Grid axes = sweep.grid;
  std::sort(axes.begin(), axes.end(), [](const GridAxis& a, const GridAxis& b) { return a.key < b.key; });

  // Keys by their last component, unless two axes share it.
  std::vector<std::string> labels;
  for (const GridAxis& a : axes) {
    const std::string last = last_component(a.key);
    const auto same =
        std::count_if(axes.begin(), axes.end(), [&](const GridAxis& b) { return last_component(b.key) == last; });
    labels.push_back(same > 1 ? a.key : last);
  }
  // Grid axes multiply: a few short lists can describe more runs than could ever be run.
  double count = double(sweep.variants.size()) * double(sweep.seeds.size());
  for (const GridAxis& a : axes) count *= double(a.values.size());
  if (count > kMaxRuns)
    throw ConfigError(cat(tree.source.str(), ": the sweep describes ", count,
                          " runs (grid points x variants x seeds); ", "at most ", int64_t(kMaxRuns), " are allowed"));
  const std::vector<Source> variant_sources = item_sources(tree, "variants", sweep.variants.size());
  const std::vector<Source> seed_sources = item_sources(tree, "seeds", sweep.seeds.size());

  std::vector<Run> runs;
  std::set<std::string> ids;
  std::vector<size_t> at(axes.size(), 0);
  while (true) {
    Node point_tree = tree;
    Node grid = Node::map();
    std::vector<std::pair<std::string, std::string>> point;
    std::string point_id;
    for (size_t a = 0; a < axes.size(); ++a) {
      const Node& value = axes[a].values[at[a]];
      set_key(point_tree, axes[a].key, value, value.source);
      grid.add(axes[a].key, Node::sequence({value}), value.source);
      point.emplace_back(axes[a].key, value_text(value));
      {
        if (a) point_id += ",";
        point_id += sanitize_component(labels[a] + "=" + value_text(value));
      }
    }
    // Each run's tree gets its own one-run sweep section; copying the full one (thousands of
    // seeds) into every run would make expansion quadratic.
    point_tree.erase("sweep");
    for (size_t v = 0; v < sweep.variants.size(); ++v) {
      const nn::Variant& variant = sweep.variants[v];
      const std::string variant_name = nn::variant_name(variant);
      const Source& vs = variant_sources[v];
      for (size_t s = 0; s < sweep.seeds.size(); ++s) {
        const int seed = sweep.seeds[s];
        const Source& ss = seed_sources[s];
        Run run{(point_id.empty() ? "" : point_id + "/") + sanitize_component(variant_name) + "/seed" +
                    std::to_string(seed),
                {},
                variant,
                seed,
                point,
                ""};
        Node t = point_tree;
        Node run_sweep = Node::map(vs);
        run_sweep.add("grid", grid, vs);
        run_sweep.add("variants", Node::sequence({Node::scalar(variant_name, vs)}, vs), vs);
        run_sweep.add("seeds", Node::sequence({Node::scalar(std::to_string(seed), ss)}, ss), ss);
        t.add("sweep", std::move(run_sweep), vs);
        try {
          run.config = parse_config(t);
          check_variant(run.config, variant, vs);
        } catch (const ConfigError& e) { throw ConfigError(cat(e.what(), " (in sweep run '", run.id, "')")); }
        if (!ids.insert(run.id).second)
          throw ConfigError(cat(tree.source.str(), ": two sweep runs get the id '", run.id,
                                "' (grid values that differ only in characters unsafe in paths)"));
        runs.push_back(std::move(run));
      }
    }
    // Next grid point: the last axis moves fastest.
    size_t a = axes.size();
    while (a > 0 && ++at[a - 1] == axes[a - 1].values.size()) at[--a] = 0;
    if (a == 0) break;
  }
  return runs;
}

std::vector<Run> expand(const Config& config) { return expand_tree(config_to_tree(config)); }

Run single_run(const Config& config, const std::string& origin) {
  std::vector<Run> runs = expand(config);
  if (runs.size() != 1)
    throw ConfigError(cat(origin, ": describes ", runs.size(), " runs (", config.sweep().variants.size(),
                          " variants x ", config.sweep().seeds.size(),
                          " seeds); a run folder's config.yaml describes one"));
  return std::move(runs.front());
}

}  // namespace qkv::experiment
