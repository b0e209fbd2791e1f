#include "engine/beam_search.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "engine/generator.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "sampling/logprobs.h"
#include "test_util.h"
#include "tiny_model.h"

namespace ferry {
namespace {

class BeamSearchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ferry::testing::TempDir() + "/beam_" + std::to_string(getpid()) + ".gguf";
    auto lm = ferry::testing::MakeTinyModel(path_);
    ASSERT_TRUE(lm.ok()) << lm.status().message();
    lm_ = std::move(*lm);
    pool_ = std::make_unique<ThreadPool>(2);
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::vector<int32_t> Prompt(int32_t n) const {
    std::vector<int32_t> p;
    for (int32_t i = 0; i < n; ++i) p.push_back(3 + (i * 7) % (lm_.config().n_vocab - 3));
    return p;
  }

  // log p(. | seq) computed from scratch: the whole sequence through a fresh contiguous cache.
  std::vector<float> NextLogProbs(const std::vector<int32_t>& seq) {
    const ModelConfig& c = lm_.config();
    auto kv =
        ContiguousKvCache::Create(c.n_layers, 1, static_cast<int32_t>(seq.size()), c.n_kv_heads, c.head_dim);
    EXPECT_TRUE(kv.ok());
    ForwardBatch b;
    for (size_t i = 0; i < seq.size(); ++i) b.Add(seq[i], static_cast<int32_t>(i), 0, i + 1 == seq.size());
    std::vector<float> logits(static_cast<size_t>(c.n_vocab)), lp(logits.size());
    EXPECT_TRUE(lm_.model->Forward(b, *kv, logits.data(), pool_.get()).ok());
    for (const TokenLogprob& t : ComputeLogprobs(logits.data(), c.n_vocab, -1, c.n_vocab).top)
      lp[static_cast<size_t>(t.token)] = t.logprob;
    return lp;
  }

  // Textbook beam search with the same rules, recomputing every hypothesis from scratch (no
  // KV sharing, no forks): the paged, forked search must find exactly the same hypotheses.
  std::vector<BeamHypothesis> Reference(const std::vector<int32_t>& prompt, const BeamSearchOptions& o) {
    struct B {
      std::vector<int32_t> toks;
      double cum;
    };
    const int32_t V = lm_.config().n_vocab;
    auto score = [&](double cum, size_t len) {
      return cum / std::pow(static_cast<double>(std::max<size_t>(len, 1)), o.length_penalty);
    };
    std::vector<B> live{{{}, 0.0}};
    std::vector<BeamHypothesis> done;
    auto add = [&](BeamHypothesis h) {
      done.push_back(std::move(h));
      std::stable_sort(done.begin(), done.end(), [](auto& a, auto& b) { return a.score > b.score; });
      if (static_cast<int32_t>(done.size()) > o.beam_width) done.resize(static_cast<size_t>(o.beam_width));
    };
    for (int32_t step = 0; step < o.max_tokens && !live.empty(); ++step) {
      struct C {
        size_t beam;
        int32_t tok;
        double cum;
      };
      std::vector<C> cands;
      for (size_t b = 0; b < live.size(); ++b) {
        std::vector<int32_t> seq(prompt);
        seq.insert(seq.end(), live[b].toks.begin(), live[b].toks.end());
        std::vector<float> lp = NextLogProbs(seq);
        std::vector<int32_t> order(static_cast<size_t>(V));
        for (int32_t t = 0; t < V; ++t) order[static_cast<size_t>(t)] = t;
        std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return lp[x] > lp[y]; });
        for (int32_t k = 0; k < std::min(2 * o.beam_width, V); ++k)
          cands.push_back(
              {b, order[static_cast<size_t>(k)], live[b].cum + lp[order[static_cast<size_t>(k)]]});
      }
      std::stable_sort(cands.begin(), cands.end(), [](auto& a, auto& b) { return a.cum > b.cum; });
      std::vector<B> next;
      for (size_t r = 0; r < cands.size() && static_cast<int32_t>(next.size()) < o.beam_width; ++r) {
        const C& c = cands[r];
        std::vector<int32_t> toks = live[c.beam].toks;
        toks.push_back(c.tok);
        if (std::count(o.end_tokens.begin(), o.end_tokens.end(), c.tok)) {
          if (static_cast<int32_t>(r) < o.beam_width)
            add({toks, c.cum, score(c.cum, toks.size() - 1), "stop"});
          continue;
        }
        next.push_back({toks, c.cum});
      }
      if (next.empty()) break;
      double worst = INFINITY;
      for (auto& h : done) worst = std::min(worst, h.score);
      if (static_cast<int32_t>(done.size()) >= o.beam_width &&
          worst >= score(next[0].cum, next[0].toks.size()))
        break;
      if (step + 1 == o.max_tokens) {
        for (B& b : next) add({b.toks, b.cum, score(b.cum, b.toks.size()), "length"});
        break;
      }
      live = std::move(next);
    }
    return done;
  }

  std::string path_;
  LoadedModel lm_;
  std::unique_ptr<ThreadPool> pool_;
};

TEST_F(BeamSearchTest, WidthOneIsGreedy) {
  const std::vector<int32_t> prompt = Prompt(21);
  BeamSearchOptions o;
  o.beam_width = 1;
  o.max_tokens = 12;
  auto beams = BeamSearch(*lm_.model, pool_.get(), prompt, o);
  ASSERT_TRUE(beams.ok()) << beams.status().message();
  ASSERT_EQ(beams->size(), 1u);

  GenerateOptions g;
  g.n_predict = 12;
  g.sampling.temperature = 0;
  g.ignore_eos = true;
  std::vector<int32_t> greedy;
  ASSERT_TRUE(Generate(
                  lm_, *pool_, prompt, g, [](std::string_view) {}, &greedy)
                  .ok());
  EXPECT_EQ((*beams)[0].tokens, greedy);
  EXPECT_EQ((*beams)[0].finish_reason, "length");
}

TEST_F(BeamSearchTest, EqualsTextbookSearchWithoutSharing) {
  bool saw_stop = false;
  for (float length_penalty : {1.0f, 0.0f}) {
    const std::vector<int32_t> prompt = Prompt(37);  // two full blocks + a shared partial one
    BeamSearchOptions o;
    o.beam_width = 4;
    o.max_tokens = 10;
    o.length_penalty = length_penalty;
    // An end token that beams actually meet: the third token of the greedy continuation.
    std::vector<int32_t> seq(prompt);
    for (int k = 0; k < 3; ++k) {
      std::vector<float> lp = NextLogProbs(seq);
      seq.push_back(static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin()));
    }
    o.end_tokens = {seq.back()};

    BeamSearchStats stats;
    auto beams = BeamSearch(*lm_.model, pool_.get(), prompt, o, &stats);
    ASSERT_TRUE(beams.ok()) << beams.status().message();
    std::vector<BeamHypothesis> ref = Reference(prompt, o);
    ASSERT_EQ(beams->size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ((*beams)[i].tokens, ref[i].tokens) << "hypothesis " << i;
      EXPECT_NEAR((*beams)[i].cum_logprob, ref[i].cum_logprob, 1e-3) << "hypothesis " << i;
      EXPECT_EQ((*beams)[i].finish_reason, ref[i].finish_reason);
      saw_stop |= ref[i].finish_reason == "stop";
    }
    for (size_t i = 1; i < beams->size(); ++i) EXPECT_GE((*beams)[i - 1].score, (*beams)[i].score);
    // The prompt's blocks are shared by all beams; everything returns at the end.
    EXPECT_LT(stats.peak_blocks, stats.unshared_blocks);
    EXPECT_GT(stats.block_copies, 0);  // siblings appending to the shared partial block
    EXPECT_EQ(stats.blocks_in_use_after, 0);
  }
  EXPECT_TRUE(saw_stop) << "the end token never finished a hypothesis; the test lost its point";
}

TEST_F(BeamSearchTest, RejectsBadOptions) {
  BeamSearchOptions o;
  o.beam_width = 0;
  EXPECT_FALSE(BeamSearch(*lm_.model, pool_.get(), Prompt(4), o).ok());
  o.beam_width = 2;
  EXPECT_FALSE(BeamSearch(*lm_.model, pool_.get(), {}, o).ok());
  o.max_tokens = lm_.config().n_ctx_train;
  EXPECT_FALSE(BeamSearch(*lm_.model, pool_.get(), Prompt(4), o).ok());
}

}  // namespace
}  // namespace ferry
