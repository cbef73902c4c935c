#include "lab/infer/mc_scorer.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "tensor/error.h"
#include "train/data/shuffle.h"

namespace qkv::infer {

std::string fewshot_prefix(const std::vector<McItem>& pool, bool pool_is_items, int64_t index, int64_t shots,
                           uint64_t seed) {
  check<ValueError>(shots >= 0, "downstream: --shots must not be negative, got ", shots);
  if (shots == 0) return "";
  const int64_t available = int64_t(pool.size()) - (pool_is_items ? 1 : 0);
  check<ValueError>(available >= shots, "downstream: ", shots, " shots need as many solved examples, the pool has ",
                    available, ": lower --shots, or give the task a train.jsonl of examples");
  std::string prefix;
  int64_t taken = 0;
  for (int64_t i :
       data::philox_permutation(int64_t(pool.size()), data::mix64(seed ^ data::mix64(uint64_t(index) + 1)))) {
    if (taken == shots) break;
    if (pool_is_items && i == index) continue;
    prefix += pool[size_t(i)].solved() + "\n\n";
    ++taken;
  }
  return prefix;
}

std::vector<double> loglikelihoods(const nn::GPT& model, const data::Gpt2Tokenizer& tokenizer,
                                   const std::vector<std::pair<std::string, std::string>>& requests, int64_t batch) {
  check<ValueError>(batch >= 1, "downstream: the batch must be positive, got ", batch);
  const int64_t room = model.config().context + 1;  // tokens a sequence of the model's context scores
  struct Sequence {
    std::vector<int64_t> ids;  // inputs then the last target
    int64_t scored = 0;        // the continuation's tokens: the last ones
  };
  std::vector<Sequence> seqs;
  for (const auto& [context_text, continuation_text] : requests) {
    std::string context = context_text, continuation = continuation_text;
    const size_t end = context.find_last_not_of(" \t\n");
    const size_t keep = end == std::string::npos ? 0 : end + 1;
    continuation = context.substr(keep) + continuation;  // trailing whitespace belongs to the continuation
    context.resize(keep);
    Sequence s;
    s.ids.push_back(tokenizer.eot());
    for (int32_t id : tokenizer.encode(context)) s.ids.push_back(id);
    const std::vector<int32_t> cont = tokenizer.encode(continuation);
    check<ValueError>(!cont.empty() && int64_t(cont.size()) < room, "downstream: a continuation of ", cont.size(),
                      " tokens does not fit the model's context of ", room - 1);
    s.ids.insert(s.ids.end(), cont.begin(), cont.end());
    s.scored = int64_t(cont.size());
    if (int64_t(s.ids.size()) > room) s.ids.erase(s.ids.begin(), s.ids.end() - room);
    seqs.push_back(std::move(s));
  }
  NoGradGuard no_grad;
  const Device device = model.wte.weight.device();
  std::vector<double> out;
  for (size_t b0 = 0; b0 < seqs.size(); b0 += size_t(batch)) {
    const size_t b1 = std::min(seqs.size(), b0 + size_t(batch));
    int64_t T = 0;
    for (size_t i = b0; i < b1; ++i) T = std::max<int64_t>(T, int64_t(seqs[i].ids.size()) - 1);
    // Right-padded: the causal model's earlier positions never see the padding.
    std::vector<int64_t> inputs(size_t(int64_t(b1 - b0) * T), tokenizer.eot()), targets(inputs.size(), 0);
    for (size_t i = b0; i < b1; ++i)
      for (size_t t = 0; t + 1 < seqs[i].ids.size(); ++t) {
        inputs[(i - b0) * size_t(T) + t] = seqs[i].ids[t];
        targets[(i - b0) * size_t(T) + t] = seqs[i].ids[t + 1];
      }
    const int64_t B = int64_t(b1 - b0);
    const Tensor logp = log_softmax(model.forward(from_vector(inputs, {B, T}).to(device)).to(DType::f32), -1);
    const std::vector<float> picked =
        gather(logp, 2, from_vector(targets, {B, T, 1}).to(device)).cpu().to_vector<float>();
    for (size_t i = b0; i < b1; ++i) {
      const int64_t n = int64_t(seqs[i].ids.size()) - 1;
      double sum = 0;
      for (int64_t t = n - seqs[i].scored; t < n; ++t) sum += picked[(i - b0) * size_t(T) + size_t(t)];
      out.push_back(sum);
    }
  }
  return out;
}

McScore score_mc(const nn::GPT& model, const data::Gpt2Tokenizer& tokenizer, McTask task,
                 const std::vector<McItem>& items, const std::vector<McItem>& pool, bool pool_is_items,
                 const McScoreOptions& o) {
  const size_t n = o.limit > 0 ? std::min(items.size(), size_t(o.limit)) : items.size();
  std::vector<std::pair<std::string, std::string>> requests;
  for (size_t i = 0; i < n; ++i) {
    const std::string prefix = fewshot_prefix(pool, pool_is_items, int64_t(i), o.shots, o.seed);
    for (size_t c = 0; c < items[i].choices(); ++c)
      requests.emplace_back(prefix + items[i].contexts[c], items[i].continuations[c]);
  }
  const std::vector<double> ll = loglikelihoods(model, tokenizer, requests, o.batch);
  McScore s{task, int64_t(n), o.shots, 0, 0};
  size_t r = 0;
  for (size_t i = 0; i < n; ++i) {
    const McItem& item = items[i];
    size_t best = 0, best_norm = 0;
    for (size_t c = 0; c < item.choices(); ++c) {
      const double norm = ll[r + c] / double(std::max<size_t>(1, item.continuations[c].size()));
      if (ll[r + c] > ll[r + best]) best = c;
      if (norm > ll[r + best_norm] / double(std::max<size_t>(1, item.continuations[best_norm].size()))) best_norm = c;
    }
    s.acc += double(int64_t(best) == item.gold) / double(n);
    s.acc_norm += double(int64_t(best_norm) == item.gold) / double(n);
    r += item.choices();
  }
  return s;
}

}  // namespace qkv::infer
