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

  void Add(int32_t token, int32_t pos, int32_t seq, bool logits) {
    tokens.push_back(token);
    positions.push_back(pos);
    seq_ids.push_back(seq);
    want_logits.push_back(logits ? 1 : 0);
  }
  void Clear() {
    tokens.clear();
    positions.clear();
    seq_ids.clear();
    want_logits.clear();
  }
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
