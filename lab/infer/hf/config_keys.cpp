#include "lab/infer/hf/config_keys.h"

#include "tensor/error.h"

namespace qkv::infer {

using nlohmann::json;

void HfConfigReader::fail(const std::string& key, const std::string& what) const {
  throw IOError(cat(file, ": key '", key, "': ", what));
}

int64_t HfConfigReader::positive(const std::string& key, const json* fallback) const {
  const json* v = j.contains(key) ? &j[key] : fallback;
  if (!v) fail(key, "missing; expected a positive integer");
  if (!v->is_number_integer() || v->get<int64_t>() <= 0) fail(key, cat("expected a positive integer, got ", v->dump()));
  return v->get<int64_t>();
}

bool HfConfigReader::flag(const std::string& key, bool fallback) const {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_boolean()) fail(key, cat("expected true or false, got ", j[key].dump()));
  return j[key].get<bool>();
}

double HfConfigReader::number(const std::string& key, double fallback) const {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_number()) fail(key, cat("expected a number, got ", j[key].dump()));
  return j[key].get<double>();
}

void HfConfigReader::require(const std::string& key, bool value, bool fallback, const char* why) const {
  if (flag(key, fallback) != value) fail(key, cat(j[key].dump(), " is not supported: ", why));
}

bool ignored_by_every_import(std::string_view key) {
  // Names and ids, storage (torch_dtype; transformers 5 writes dtype), generation defaults, the
  // labels of classification heads, and switches of transformers' own code paths.
  static const std::set<std::string, std::less<>> keys{"_name_or_path",
                                                       "_commit_hash",
                                                       "_num_labels",
                                                       "transformers_version",
                                                       "architectures",
                                                       "model_type",
                                                       "torch_dtype",
                                                       "dtype",
                                                       "initializer_range",
                                                       "use_cache",
                                                       "output_past",
                                                       "gradient_checkpointing",
                                                       "bos_token_id",
                                                       "eos_token_id",
                                                       "pad_token_id",
                                                       "sep_token_id",
                                                       "decoder_start_token_id",
                                                       "task_specific_params",
                                                       "num_labels",
                                                       "finetuning_task",
                                                       "problem_type",
                                                       "tokenizer_class",
                                                       "prefix",
                                                       "return_dict",
                                                       "output_hidden_states",
                                                       "output_attentions",
                                                       "torchscript",
                                                       "tf_legacy_loss",
                                                       "chunk_size_feed_forward",
                                                       "is_decoder",
                                                       "is_encoder_decoder",
                                                       "tie_encoder_decoder",
                                                       "cross_attention_hidden_size",
                                                       "max_length",
                                                       "min_length",
                                                       "do_sample",
                                                       "early_stopping",
                                                       "num_beams",
                                                       "num_beam_groups",
                                                       "diversity_penalty",
                                                       "temperature",
                                                       "top_k",
                                                       "top_p",
                                                       "typical_p",
                                                       "repetition_penalty",
                                                       "length_penalty",
                                                       "no_repeat_ngram_size",
                                                       "encoder_no_repeat_ngram_size",
                                                       "bad_words_ids",
                                                       "num_return_sequences",
                                                       "output_scores",
                                                       "return_dict_in_generate",
                                                       "forced_bos_token_id",
                                                       "forced_eos_token_id",
                                                       "remove_invalid_values",
                                                       "exponential_decay_length_penalty",
                                                       "suppress_tokens",
                                                       "begin_suppress_tokens"};
  return keys.contains(key);
}

std::vector<std::string> unknown_key_warnings(const HfConfigReader& r, const std::set<std::string, std::less<>>& read,
                                              const std::set<std::string, std::less<>>& ignored,
                                              const std::string& model, bool strict) {
  std::vector<std::string> out;
  for (const auto& [key, value] : r.j.items()) {
    if (read.contains(key) || ignored.contains(key) || ignored_by_every_import(key)) continue;
    if (strict)
      r.fail(key,
             cat("unknown to qkvlab's ", model, " import, which cannot tell what it changes in the model (--strict)"));
    out.push_back(cat(r.file, ": key '", key, "' (", value.dump(), ") is unknown to qkvlab's ", model,
                      " import; assumed not to change the logits (--strict makes it an error)"));
  }
  return out;
}

}  // namespace qkv::infer
