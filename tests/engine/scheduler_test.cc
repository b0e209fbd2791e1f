// Scheduler without a model: a fake runner samples tokens, so admission, budgets, chunking,
// preemption and block accounting are tested on bookkeeping alone.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace ferry {
namespace {

struct Harness {
  explicit Harness(int32_t num_blocks, SchedulerConfig sc = {}, int32_t block_size = 4)
      : kv({num_blocks, block_size, true}),
        sched(
            sc, kv, [](int32_t t) { return t == 0; }, [] { return 0.0; }) {}

  void Add(RequestId id, std::vector<int32_t> prompt, int32_t max_tokens, int32_t n = 1) {
    RequestOptions o;
    o.max_tokens = max_tokens;
    o.n = n;
    o.ignore_eos = true;
    ASSERT_TRUE(sched.Validate(static_cast<int32_t>(prompt.size()), o).ok());
    auto r = std::make_unique<Request>(id, 0, std::move(prompt), o, Sampler(o.sampling, 16));
    for (int32_t b = 1; b < n; ++b) r->fork_samplers.emplace_back(o.sampling, 16);
    sched.Add(std::move(r));
  }

  // One step with a fake runner: token = 1 + position % 7. The returned output's request
  // pointers dangle for requests that finished in the step (TakeFinished frees them): read
  // scheduled_ids instead.
  SchedulerOutput Step() {
    SchedulerOutput out = sched.Schedule();
    RunnerOutput ro;
    scheduled_ids.clear();
    for (const ScheduledRequest& s : out.scheduled) {
      scheduled_ids.push_back(s.req->id);
      // Every scheduled request must own slots for the tokens it computes.
      EXPECT_GE(s.req->kv.num_slots(), s.req->num_computed + s.num_tokens);
      std::vector<int32_t> t;
      if (s.WantsLogits())
        for (size_t b = 0; b <= s.req->fork_samplers.size(); ++b) t.push_back(1 + s.req->num_tokens() % 7);
      ro.sampled.push_back(t);
    }
    sched.Update(out, ro);
    for (auto& r : sched.TakeFinished()) {
      finished[{r->id, r->branch}] = r->tokens;
      preemptions[r->id] = r->num_preemptions;
    }
    return out;
  }

  kv::KvCacheManager kv;
  Scheduler sched;
  std::map<std::pair<RequestId, int32_t>, std::vector<int32_t>> finished;
  std::map<RequestId, int32_t> preemptions;  // of finished requests
  std::vector<RequestId> scheduled_ids;      // of the last Step, in its order
};

std::vector<int32_t> Prompt(int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(1 + (i * 3 + seed) % 11);
  return p;
}

TEST(Scheduler, TokenBudgetChunksPrefillAndDecodesGoFirst) {
  SchedulerConfig sc;
  sc.max_batch_tokens = 8;
  Harness h(64, sc);
  h.Add(1, Prompt(5, 0), 10);
  SchedulerOutput s1 = h.Step();  // whole 5-token prompt
  ASSERT_EQ(s1.scheduled.size(), 1u);
  EXPECT_EQ(s1.num_tokens, 5);
  h.Add(2, Prompt(20, 1), 4);
  SchedulerOutput s2 = h.Step();  // request 1 decodes, request 2 gets a 7-token chunk
  ASSERT_EQ(s2.scheduled.size(), 2u);
  EXPECT_EQ(h.scheduled_ids[0], 1);
  EXPECT_EQ(s2.scheduled[0].num_tokens, 1);
  EXPECT_EQ(s2.scheduled[1].num_tokens, 7);
  EXPECT_FALSE(s2.scheduled[1].WantsLogits());
  EXPECT_LE(h.Step().num_tokens, 8);
}

TEST(Scheduler, FinishedRequestsFreeTheirSlotForTheNextStep) {
  SchedulerConfig sc;
  sc.max_num_seqs = 1;
  Harness h(64, sc);
  h.Add(1, Prompt(3, 0), 1);
  h.Add(2, Prompt(3, 1), 1);
  EXPECT_EQ(h.Step().scheduled.size(), 1u);
  EXPECT_EQ(h.finished.size(), 1u);
  EXPECT_EQ(h.finished.count(std::make_pair(RequestId{1}, 0)), 1u);  // done and retired at once
  EXPECT_EQ(h.Step().scheduled.size(), 1u);  // so request 2 runs in the very next step
  EXPECT_EQ(h.finished.count(std::make_pair(RequestId{2}, 0)), 1u);
}

TEST(Scheduler, StaticPolicyAdmitsNothingWhileABatchRuns) {
  SchedulerConfig sc;
  sc.policy = BatchPolicy::kStatic;
  Harness h(64, sc);
  h.Add(1, Prompt(3, 0), 1);
  h.Add(2, Prompt(3, 1), 5);
  h.Step();
  h.Add(3, Prompt(3, 2), 1);
  while (h.sched.HasWork()) {
    const bool had_two = h.finished.count(std::make_pair(RequestId{2}, 0)) == 1;
    h.Step();
    for (RequestId id : h.scheduled_ids)
      if (id == 3) {
        EXPECT_TRUE(had_two) << "request 3 ran before the batch of 1 and 2 ended";
      }
  }
  EXPECT_EQ(h.finished.size(), 3u);
}

TEST(Scheduler, RequestThatCanNeverFitIsRejected) {
  Harness h(4);  // 16 tokens
  RequestOptions o;
  o.max_tokens = 8;
  Status st = h.sched.Validate(10, o);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.ToString().find("kv-cache-memory"), std::string::npos);
  EXPECT_FALSE(h.sched.Validate(0, o).ok());
}

TEST(Scheduler, OutOfBlocksPreemptsTheNewestAndEveryRequestCompletes) {
  Harness h(6);  // 24 token slots; each request needs up to 16
  for (int i = 0; i < 4; ++i) h.Add(i, Prompt(8, i), 8);
  for (int i = 0; i < 200 && h.sched.HasWork(); ++i) {
    // Who ran before the step, oldest admission first; a step's victims are the newest of them.
    std::vector<RequestId> before;
    for (const Request* r : h.sched.running()) before.push_back(r->id);
    h.Step();
    bool survivor_after_victim = false, victim_seen = false;
    for (RequestId id : before) {
      bool preempted = false;
      for (const Request* r : h.sched.waiting()) preempted |= r->id == id;
      if (preempted)
        victim_seen = true;
      else if (victim_seen)
        survivor_after_victim = true;
    }
    EXPECT_FALSE(survivor_after_victim)
        << "step " << i << ": an older request was preempted before a newer one";
  }
  EXPECT_FALSE(h.sched.HasWork());
  EXPECT_EQ(h.preemptions[0], 0);  // the oldest request is never the victim
  EXPECT_GT(h.preemptions[3], 0);  // the newest is
  EXPECT_EQ(h.finished.size(), 4u);
  EXPECT_GT(h.sched.stats().preemptions, 0);
  for (const auto& [key, toks] : h.finished) EXPECT_EQ(toks.size(), 16u);
  EXPECT_EQ(h.kv.NumFreeBlocks(), 6);
}

// 2,000 random add/abort/step(finish, preempt) events with forks and shared prefixes on a
// small pool: every request ends, and every block is free with ref count zero.
TEST(Scheduler, RandomizedStressEndsWithEveryBlockFree) {
  std::mt19937 rng(7);
  SchedulerConfig sc;
  sc.max_batch_tokens = 24;
  sc.max_num_seqs = 8;
  sc.max_seq_len = 64;
  Harness h(20, sc);
  std::vector<RequestId> ids;
  RequestId next = 1;
  int64_t added = 0, events = 0;
  for (; events < 2000; ++events) {
    int op = static_cast<int>(rng() % 10);
    if (op < 3) {
      int len = 1 + static_cast<int>(rng() % 30);
      int n = rng() % 4 == 0 ? 2 + static_cast<int>(rng() % 3) : 1;
      std::vector<int32_t> p = Prompt(len, static_cast<int>(rng() % 3));  // few distinct prefixes
      h.Add(next, p, 1 + static_cast<int32_t>(rng() % 20), n);
      ids.push_back(next++);
      ++added;
    } else if (op < 4 && !ids.empty()) {
      h.sched.Abort(ids[rng() % ids.size()]);
    } else {
      h.Step();
    }
    // Invariant: each block's ref count is the number of live sequences holding it (a block
    // shared by a prefix hit or a fork counts once per holder), and the free blocks are
    // exactly those nobody holds.
    std::vector<int32_t> holders(static_cast<size_t>(h.kv.num_blocks()), 0);
    auto count = [&](const Request* r) {
      for (kv::BlockId b : r->kv.blocks()) ++holders[static_cast<size_t>(b)];
    };
    for (const Request* r : h.sched.running()) count(r);
    for (const Request* r : h.sched.waiting()) count(r);
    int32_t unheld = 0;
    for (kv::BlockId b = 0; b < h.kv.num_blocks(); ++b) {
      ASSERT_EQ(h.kv.pool().RefCount(b), holders[static_cast<size_t>(b)])
          << "block " << b << " event " << events;
      unheld += holders[static_cast<size_t>(b)] == 0;
    }
    ASSERT_EQ(h.kv.NumFreeBlocks(), unheld) << "event " << events;
  }
  for (RequestId id : ids) h.sched.Abort(id);
  h.Step();
  EXPECT_FALSE(h.sched.HasWork());
  EXPECT_EQ(h.kv.NumFreeBlocks(), h.kv.num_blocks());
  for (kv::BlockId b = 0; b < h.kv.num_blocks(); ++b) EXPECT_EQ(h.kv.pool().RefCount(b), 0) << "block " << b;
  EXPECT_GT(h.sched.stats().preemptions, 0);
  EXPECT_GT(h.sched.stats().prefix_hit_tokens, 0);
  EXPECT_GT(h.sched.stats().finished, 0);
  EXPECT_GT(h.sched.stats().aborted, 0);
  EXPECT_GE(h.sched.stats().finished + h.sched.stats().aborted, added);
}

}  // namespace
}  // namespace ferry
