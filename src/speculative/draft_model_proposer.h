// DraftModelProposer: a smaller model (or the target's own weights quantized to 4 bits)
// drafts k tokens per sequence autoregressively, batched over sequences, each draft drawn
// from the draft's processed distribution q (same sampling settings and history as the
// target's p). The draft keeps its own paged KV cache and block manager; each sequence's
// lease and the tokens it holds live in the sequence's SpecState, and rejected drafts are
// rolled back (Truncate) as soon as the target has verified.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "core/thread_pool.h"
#include "kv/kv_cache_manager.h"
#include "model/forward_batch.h"
#include "model/model.h"
#include "model/paged_kv_cache.h"
#include "speculative/proposer.h"

namespace ferry::spec {

struct DraftKvConfig {
  int32_t num_blocks = 0;  // draft KV blocks (the engine gives the draft as many as the target)
  int32_t block_size = 16;
  int32_t max_seqs = 64;  // sequences one step can hold
  int32_t max_seq_len = 2048;
  KvCacheTypes types;  // the target's K/V storage types
};

class DraftModelProposer final : public Proposer {
 public:
  // `draft` must outlive the proposer and share the target's vocabulary (n_vocab).
  static StatusOr<std::unique_ptr<DraftModelProposer>> Create(const Model& draft, int32_t target_vocab,
                                                              const DraftKvConfig& kv, ThreadPool* pool);
  const char* name() const override { return "draft-model"; }
  Status Propose(std::span<const ProposeRequest> requests) override;
  void Rollback(SpecState& state, std::span<const int32_t> tokens) override;
  const kv::KvCacheManager& kv_manager() const { return *kv_; }

 private:
  // Per sequence: its draft-KV lease and the tokens whose K/V it holds ([kv.num_slots()]).
  struct SeqState final : ProposerState {
    kv::KvSequence kv;
    std::vector<int32_t> computed;
  };
  DraftModelProposer(const Model& draft, PagedKvCache cache, const kv::KvCacheConfig& kv, ThreadPool* pool);
  SeqState& StateOf(SpecState& s);

  const Model& model_;
  PagedKvCache cache_;
  std::unique_ptr<kv::KvCacheManager> kv_;  // outlives no lease: SeqStates die with their requests first
  ThreadPool* pool_;
  ForwardBatch batch_;
  ForwardScratch scratch_;     // the draft's forward buffers, reused every step
  std::vector<float> logits_;  // [batch_.NumLogits(), n_vocab]
};

}  // namespace ferry::spec
