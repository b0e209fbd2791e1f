// OutputProcessor: turns a step's new tokens into streamed outputs — incremental
// detokenization (whole UTF-8 characters only) and stop strings per branch — and finishes a
// branch in the scheduler as soon as its stop string appears.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_metrics.h"
#include "engine/scheduler.h"
#include "engine/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace ferry {

// What a caller receives: the new tokens/text of one branch since the previous output.
struct RequestOutput {
  RequestId id = 0;
  int32_t branch = 0;
  std::vector<int32_t> token_ids;  // new token ids
  std::string text;                // new text (empty without a tokenizer)
  std::vector<TokenLogprobs> logprobs;  // [token_ids.size()] when options.logprobs >= 0
  bool finished = false;           // this branch is done
  bool request_finished = false;   // every branch of the request is done
  std::string finish_reason;       // "stop", "length" or "abort" when finished
  RequestMetrics metrics;          // filled when finished
  std::vector<float> embedding;    // [dim] an embedding request's vector, when finished
  // [prompt tokens - 1] on the branch's first output with options.prompt_logprobs >= 0: entry p
  // scores prompt token p + 1 (the first token has none).
  std::vector<TokenLogprobs> prompt_logprobs;
};

class OutputProcessor {
 public:
  // tokenizer may be null: token ids only, stop strings never match.
  explicit OutputProcessor(const Tokenizer* tokenizer) : tok_(tokenizer) {}
  OutputProcessor(const OutputProcessor&) = delete;
  OutputProcessor& operator=(const OutputProcessor&) = delete;

  // New tokens of this step; branches whose stop string matched are finished in `scheduler`.
  void Process(const std::vector<SeqEvent>& events, Scheduler& scheduler, std::vector<RequestOutput>& outputs);
  // Final outputs of finished branches (merged with this step's output of the same branch).
  void Finalize(std::vector<std::unique_ptr<Request>> finished, const Scheduler& scheduler,
                std::vector<RequestOutput>& outputs);

 private:
  struct TextState {
    IncrementalDetokenizer detok;
    StopMatcher stops;
    size_t output_index = SIZE_MAX;  // this step's output of the branch, if any
    bool emitted = false;            // some text was produced (spaces_between_special_tokens)
    bool after_special = false;      // the last text was a rendered special token
  };
  TextState& State(const Request* r);
  // A token's text with the spaces transformers puts around rendered special tokens.
  std::string Spaced(const RequestOptions& o, int32_t token, std::string text, TextState& s) const;

  const Tokenizer* tok_;
  std::unordered_map<const Request*, std::unique_ptr<TextState>> states_;
};

}  // namespace ferry
