// The multiple-choice tasks of the paper's downstream evaluation (Table 11: ARC-Challenge,
// ARC-Easy, HellaSwag, PIQA, WinoGrande), read from their standard JSONL layouts and turned into
// prompts as lm-evaluation-harness does:
//
//   arc_challenge, arc_easy  {"question", "choices": {"text": [...], "label": [...]}, "answerKey"}
//                            (Hugging Face's ai2_arc; AI2's {"question": {"stem", "choices":
//                            [{"text", "label"}]}, "answerKey"} too): "Question: Q\nAnswer:" and
//                            " choice"
//   hellaswag                {"activity_label", "ctx_a", "ctx_b", "endings": [...], "label"}:
//                            "activity: ctx_a Ctx_b" and " ending", both cleaned of WikiHow's
//                            "[title]" and bracketed markup
//   piqa                     {"goal", "sol1", "sol2", "label"}: "Question: goal\nAnswer:" and " sol"
//   winogrande               {"sentence" with one "_", "option1", "option2", "answer": "1" or
//                            "2"}: partial scoring, the sentence up to "_" with the option as
//                            each choice's context and the rest of the sentence as the shared
//                            continuation
//
// A bad line is an IOError naming the file, the line and the field.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qkv::data {

enum class McTask { arc_challenge, arc_easy, hellaswag, piqa, winogrande };
inline constexpr McTask kMcTasks[] = {McTask::arc_challenge, McTask::arc_easy, McTask::hellaswag, McTask::piqa,
                                      McTask::winogrande};
const char* mc_task_name(McTask t);  // "arc_challenge", ...
// ValueError listing the task names for an unknown one.
McTask parse_mc_task(std::string_view name);

// One question: a context and a continuation per choice (the context shared except for
// WinoGrande's partial scoring, the continuation shared there), and the right choice.
struct McItem {
  std::vector<std::string> contexts, continuations;
  int64_t gold = 0;
  size_t choices() const { return contexts.size(); }
  // The solved example a few-shot prompt shows: the gold choice's context and continuation.
  std::string solved() const { return contexts[size_t(gold)] + continuations[size_t(gold)]; }
};

std::vector<McItem> read_mc_items(McTask task, const std::filesystem::path& file);
// One JSON object of `task`'s layout; `where` names it in errors ("file:line").
McItem mc_item_from_json(McTask task, const std::string& line, const std::string& where);

}  // namespace qkv::data
