#include "train/data/mc_tasks.h"

#include <cctype>
#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tensor/error.h"

namespace qkv::data {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const json& field(const json& j, const char* key, const std::string& where) {
  check<IOError>(j.is_object() && j.contains(key), where, ": field '", key, "' is missing");
  return j.at(key);
}

std::string text(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  check<IOError>(v.is_string(), where, ": field '", key, "' is ", v.dump(), ", expected text");
  return v.get<std::string>();
}

std::vector<std::string> texts(const json& v, const std::string& key, const std::string& where) {
  check<IOError>(v.is_array() && !v.empty(), where, ": field '", key, "' is not a non-empty list");
  std::vector<std::string> out;
  for (const json& x : v) {
    check<IOError>(x.is_string(), where, ": field '", key, "' holds ", x.dump(), ", expected text");
    out.push_back(x.get<std::string>());
  }
  return out;
}

// An index given as a number or its digits ("label": 2 or "2"), in [base, base + n).
int64_t index_of(const json& v, const char* key, int64_t base, size_t n, const std::string& where) {
  int64_t i = -1;
  if (v.is_number_integer()) i = v.get<int64_t>();
  else if (v.is_string()) {
    const std::string& digits = v.get_ref<const std::string&>();
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), i);
    if (error != std::errc() || end != digits.data() + digits.size()) i = -1;  // not a whole number, or too large
  }
  check<IOError>(i >= base && i < base + int64_t(n), where, ": field '", key, "' is ", v.dump(), ", expected ", base,
                 " to ", base + int64_t(n) - 1);
  return i - base;
}

McItem shared_context(std::string context, const std::vector<std::string>& choices, int64_t gold) {
  McItem item;
  for (const std::string& c : choices) {
    item.contexts.push_back(context);
    item.continuations.push_back(" " + c);
  }
  item.gold = gold;
  return item;
}

McItem arc(const json& j, const std::string& where) {
  const json& q = field(j, "question", where);
  std::string question;
  std::vector<std::string> choices, labels;
  if (q.is_object()) {  // AI2's layout
    question = text(q, "stem", where + ": question");
    const json& list = field(q, "choices", where + ": question");
    check<IOError>(list.is_array() && !list.empty(), where, ": field 'question.choices' is not a non-empty list");
    for (const json& c : list) {
      choices.push_back(text(c, "text", where + ": question.choices"));
      labels.push_back(text(c, "label", where + ": question.choices"));
    }
  } else {  // Hugging Face's ai2_arc
    question = text(j, "question", where);
    const json& c = field(j, "choices", where);
    choices = texts(field(c, "text", where + ": choices"), "choices.text", where);
    labels = texts(field(c, "label", where + ": choices"), "choices.label", where);
    check<IOError>(choices.size() == labels.size(), where, ": choices.text has ", choices.size(),
                   " entries but choices.label ", labels.size());
  }
  const std::string key = text(j, "answerKey", where);
  int64_t gold = -1;
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] == key) gold = int64_t(i);
  check<IOError>(gold >= 0, where, ": field 'answerKey' is '", key, "', not one of the choices' labels");
  return shared_context("Question: " + question + "\nAnswer:", choices, gold);
}

// lm-evaluation-harness's HellaSwag cleaning: WikiHow's " [title]" becomes ". ", other bracketed
// markup goes, double spaces become one, the ends are trimmed.
std::string clean(const std::string& raw) {
  const size_t first = raw.find_first_not_of(" \t\n\r"), last = raw.find_last_not_of(" \t\n\r");
  const std::string s = first == std::string::npos ? std::string() : raw.substr(first, last - first + 1);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 8, " [title]") == 0) {
      out += ". ";
      i += 7;
      continue;
    }
    const size_t close = s[i] == '[' ? s.find(']', i) : std::string::npos;
    if (close != std::string::npos) {
      i = close;
      continue;
    }
    if (s[i] == ' ' && !out.empty() && out.back() == ' ') continue;  // double spaces become one
    out += s[i];
  }
  return out;
}

// Python's str.capitalize on ASCII: the first letter upper case, the rest lower.
std::string capitalize(std::string s) {
  for (size_t i = 0; i < s.size(); ++i)
    s[i] =
        char(i == 0 ? std::toupper(static_cast<unsigned char>(s[i])) : std::tolower(static_cast<unsigned char>(s[i])));
  return s;
}

McItem hellaswag(const json& j, const std::string& where) {
  const std::string ctx = text(j, "ctx_a", where) + " " + capitalize(text(j, "ctx_b", where));
  std::vector<std::string> endings = texts(field(j, "endings", where), "endings", where);
  for (std::string& e : endings) e = clean(e);
  return shared_context(clean(text(j, "activity_label", where) + ": " + ctx), endings,
                        index_of(field(j, "label", where), "label", 0, endings.size(), where));
}

McItem piqa(const json& j, const std::string& where) {
  return shared_context("Question: " + text(j, "goal", where) + "\nAnswer:",
                        {text(j, "sol1", where), text(j, "sol2", where)},
                        index_of(field(j, "label", where), "label", 0, 2, where));
}

McItem winogrande(const json& j, const std::string& where) {
  const std::string sentence = text(j, "sentence", where);
  const size_t blank = sentence.find('_');
  check<IOError>(blank != std::string::npos, where, ": field 'sentence' has no '_' to fill");
  std::string rest = sentence.substr(blank + 1);
  rest.erase(0, rest.find_first_not_of(' '));
  McItem item;
  for (const char* key : {"option1", "option2"}) {
    item.contexts.push_back(sentence.substr(0, blank) + text(j, key, where));
    item.continuations.push_back(" " + rest);
  }
  item.gold = index_of(field(j, "answer", where), "answer", 1, 2, where);
  return item;
}

}  // namespace

const char* mc_task_name(McTask t) {
  switch (t) {
    case McTask::arc_challenge: return "arc_challenge";
    case McTask::arc_easy: return "arc_easy";
    case McTask::hellaswag: return "hellaswag";
    case McTask::piqa: return "piqa";
    case McTask::winogrande: return "winogrande";
  }
  return "?";
}

McTask parse_mc_task(std::string_view name) {
  for (McTask t : kMcTasks)
    if (name == mc_task_name(t)) return t;
  throw ValueError(cat("'", name, "' is not a downstream task: expected arc_challenge, arc_easy, hellaswag, piqa or ",
                       "winogrande"));
}

McItem mc_item_from_json(McTask task, const std::string& line, const std::string& where) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {  // a syntax error, or a number too large for a double
    throw IOError(cat(where, ": not JSON (", e.what(), ")"));
  }
  check<IOError>(j.is_object(), where, ": expected a JSON object");
  switch (task) {
    case McTask::arc_challenge:
    case McTask::arc_easy: return arc(j, where);
    case McTask::hellaswag: return hellaswag(j, where);
    case McTask::piqa: return piqa(j, where);
    case McTask::winogrande: return winogrande(j, where);
  }
  throw ValueError("unknown downstream task");
}

std::vector<McItem> read_mc_items(McTask task, const fs::path& file) {
  std::ifstream in(file);
  check<IOError>(bool(in), file.string(), ": cannot open the ", mc_task_name(task), " task file");
  std::vector<McItem> items;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    items.push_back(mc_item_from_json(task, line, cat(file.string(), ":", n)));
  }
  check<IOError>(in.eof(), file.string(), ": read error");
  check<IOError>(!items.empty(), file.string(), ": no ", mc_task_name(task), " questions in it");
  return items;
}

}  // namespace qkv::data
