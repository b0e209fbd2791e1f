// ForwardBatch: a flat batch of tokens from one or more sequences, the unit the model
// computes. Tokens of one sequence are contiguous and in increasing position order.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry {

struct ForwardBatch {
  std::vector<int32_t> tokens;       // [n]
  std::vector<int32_t> positions;    // [n] position within its sequence
  std::vector<int32_t> seq_ids;      // [n] KV-cache sequence slot
  std::vector<uint8_t> want_logits;  // [n] 1: produce logits for this token
  // [n] or empty (every row whole): of a token with logits, 0: the whole row is needed (logprobs,
  // penalties, a grammar); K > 0: only its K largest logits must be exact (greedy: 1; top-k
  // sampling: top_k), the others may come back -inf. A model split by vocabulary then gathers
  // K candidates per rank instead of the row (model/logit_candidates.h); one process computes
  // the whole row anyway.
  std::vector<int32_t> logits_top_k;

  void Add(int32_t token, int32_t pos, int32_t seq, bool logits, int32_t top_k = 0) {
    tokens.push_back(token);
    positions.push_back(pos);
    seq_ids.push_back(seq);
    want_logits.push_back(logits ? 1 : 0);
    logits_top_k.push_back(logits ? top_k : 0);
  }
  void Clear() {
    tokens.clear();
    positions.clear();
    seq_ids.clear();
    want_logits.clear();
    logits_top_k.clear();
  }
  // What token i's logits row needs (see logits_top_k).
  int32_t LogitsTopK(size_t i) const { return logits_top_k.empty() ? 0 : logits_top_k[i]; }
  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  // Tokens [begin, end) of one sequence (contiguous in the batch).
  struct SeqRun {
    int32_t begin, end;
  };
  // The batch's sequence runs, in batch order.
  std::vector<SeqRun> SeqRuns() const {
    std::vector<SeqRun> runs;
    SeqRuns(&runs);
    return runs;
  }
  // The same into *runs (reusing its storage).
  void SeqRuns(std::vector<SeqRun>* runs) const {
    runs->clear();
    for (int32_t s = 0, e; s < size(); s = e) {
      for (e = s + 1; e < size() && seq_ids[static_cast<size_t>(e)] == seq_ids[static_cast<size_t>(s)]; ++e) {
      }
      runs->push_back({s, e});
    }
  }
  int32_t NumLogits() const {
    int32_t n = 0;
    for (uint8_t w : want_logits) n += w;
    return n;
  }
};

}  // namespace ferry
