#include "engine/step_plan.h"

#include <algorithm>

namespace ferry {
namespace {

// Reads words in order; a count beyond the words left fails the whole message.
class WordReader {
 public:
  explicit WordReader(const std::vector<int32_t>& words) : words_(words) {}
  bool Next(int32_t* v) {
    if (at_ >= words_.size()) return false;
    *v = words_[at_++];
    return true;
  }
  // A count of n items of `width` words each that must fit in what is left.
  bool Count(int32_t* n, size_t width) {
    return Next(n) && *n >= 0 && static_cast<size_t>(*n) * width <= words_.size() - at_;
  }
  bool Done() const { return at_ == words_.size(); }

 private:
  const std::vector<int32_t>& words_;
  size_t at_ = 0;
};

Status Damaged(const char* what) {
  return InternalError("the step message from rank 0 is damaged ({})", what);
}

}  // namespace

void EncodeCacheShape(const FollowerCacheShape& s, std::vector<int32_t>* w) {
  *w = {s.num_blocks,
        s.block_size,
        s.n_slots,
        s.max_seq_len,
        static_cast<int32_t>(s.kv_types.k),
        static_cast<int32_t>(s.kv_types.v),
        s.kv_types.rotate_k ? 1 : 0,
        s.kv_groups,
        s.layers_per_group};
}

StatusOr<FollowerCacheShape> DecodeCacheShape(const std::vector<int32_t>& w) {
  if (w.size() != 9 || w[7] < 1) return Damaged("cache shape");
  FollowerCacheShape s;
  s.num_blocks = w[0];
  s.block_size = w[1];
  s.n_slots = w[2];
  s.max_seq_len = w[3];
  s.kv_types.k = static_cast<DType>(w[4]);
  s.kv_types.v = static_cast<DType>(w[5]);
  s.kv_types.rotate_k = w[6] != 0;  // --cache-rotate: every rank's shard stores K rotated alike
  s.kv_groups = w[7];
  s.layers_per_group = w[8];
  return s;
}

void EncodeStepPlan(const StepPlan& p, std::vector<int32_t>* w) {
  w->clear();
  w->push_back(static_cast<int32_t>(p.block_copies.size()));
  for (const auto& [src, dst] : p.block_copies) {
    w->push_back(src);
    w->push_back(dst);
  }
  w->push_back(p.num_groups);
  w->push_back(static_cast<int32_t>(p.block_tables.size()));
  for (const std::vector<int32_t>& t : p.block_tables) {
    w->push_back(static_cast<int32_t>(t.size()));
    w->insert(w->end(), t.begin(), t.end());
  }
  const ForwardBatch& b = p.batch;
  w->push_back(b.size());
  w->insert(w->end(), b.tokens.begin(), b.tokens.end());
  w->insert(w->end(), b.positions.begin(), b.positions.end());
  w->insert(w->end(), b.seq_ids.begin(), b.seq_ids.end());
  w->insert(w->end(), b.want_logits.begin(), b.want_logits.end());  // one word per flag
  for (size_t i = 0; i < b.tokens.size(); ++i) w->push_back(b.LogitsTopK(i));
  w->push_back(p.hidden ? 1 : 0);
  w->push_back(static_cast<int32_t>(p.micro_batch_cuts.size()));
  w->insert(w->end(), p.micro_batch_cuts.begin(), p.micro_batch_cuts.end());
}

Status DecodeStepPlan(const std::vector<int32_t>& words, StepPlan* p) {
  WordReader r(words);
  int32_t n = 0;
  if (!r.Count(&n, 2)) return Damaged("block copies");
  p->block_copies.resize(static_cast<size_t>(n));
  for (auto& [src, dst] : p->block_copies) {
    r.Next(&src);
    r.Next(&dst);
  }
  if (!r.Next(&p->num_groups) || p->num_groups < 1) return Damaged("KV groups");
  if (!r.Count(&n, 1) || n % p->num_groups != 0) return Damaged("block tables");
  p->block_tables.resize(static_cast<size_t>(n));
  for (std::vector<int32_t>& t : p->block_tables) {
    int32_t len = 0;
    if (!r.Count(&len, 1)) return Damaged("block table");
    t.resize(static_cast<size_t>(len));
    for (int32_t& b : t) r.Next(&b);
  }
  if (!r.Count(&n, 5)) return Damaged("batch");
  ForwardBatch& b = p->batch;
  b.Clear();
  const size_t len = static_cast<size_t>(n);
  b.tokens.resize(len);
  b.positions.resize(len);
  b.seq_ids.resize(len);
  b.want_logits.resize(len);
  for (int32_t& t : b.tokens) r.Next(&t);
  for (int32_t& t : b.positions) r.Next(&t);
  for (int32_t& t : b.seq_ids) r.Next(&t);
  for (uint8_t& w : b.want_logits) {
    int32_t v = 0;
    r.Next(&v);
    w = v != 0 ? 1 : 0;
  }
  b.logits_top_k.resize(len);
  for (int32_t& k : b.logits_top_k) {
    r.Next(&k);
    if (k < 0) return Damaged("logits top-k");
  }
  int32_t hidden = 0;
  if (!r.Next(&hidden)) return Damaged("hidden flag");
  p->hidden = hidden != 0;
  if (!r.Count(&n, 1) || n < 2) return Damaged("micro-batches");
  p->micro_batch_cuts.resize(static_cast<size_t>(n));
  for (int32_t& c : p->micro_batch_cuts) r.Next(&c);
  if (p->micro_batch_cuts.front() != 0 || p->micro_batch_cuts.back() != b.size() ||
      !std::is_sorted(p->micro_batch_cuts.begin(), p->micro_batch_cuts.end()))
    return Damaged("micro-batch cuts");
  if (!r.Done()) return Damaged("trailer");
  return Status::Ok();
}

}  // namespace ferry
