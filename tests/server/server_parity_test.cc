// `ferry serve` against what OpenAI and vLLM clients expect (issue 17): status codes and error
// codes, the completions max_tokens default, penalties over generated tokens only, chat role
// and content mapping. Each test fails on the server's earlier behaviour.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "server_fixture.h"

namespace ferry {
namespace {

TEST_F(ServerTest, WrongJsonTypeIs400WithInvalidTypeCode) {
  for (const HttpResult& r :
       {Completion({{"prompt", "x"}, {"max_tokens", "ten"}}), Completion({{"prompt", 3.5}}),
        Chat({{"messages", "hi"}}), Completion({{"prompt", "x"}, {"temperature", "hot"}})}) {
    ExpectError(r, 400);  // OpenAI and vLLM: 400 (the SDKs raise BadRequestError), not 422
    EXPECT_EQ(r.Json()["error"]["code"], "invalid_type") << r.body;
    EXPECT_EQ(r.Json()["error"]["type"], "invalid_request_error") << r.body;
  }
}

TEST_F(ServerTest, ErrorCodeIsAStringOrNull) {
  const HttpResult model = Completion({{"prompt", "x"}, {"model", "gpt-4"}});
  ExpectError(model, 404, "model");
  EXPECT_EQ(model.Json()["error"]["code"], "model_not_found") << model.body;
  std::string long_prompt;
  for (int i = 0; i < 600; ++i) long_prompt += " cat";
  const HttpResult too_long = Completion({{"prompt", long_prompt}, {"max_tokens", 4}});
  ExpectError(too_long, 400, "prompt");
  EXPECT_EQ(too_long.Json()["error"]["code"], "context_length_exceeded") << too_long.body;
  const HttpResult chat_too_long =
      Chat({{"messages", {{{"role", "user"}, {"content", long_prompt}}}}, {"max_tokens", 4}});
  EXPECT_EQ(chat_too_long.Json()["error"]["code"], "context_length_exceeded") << chat_too_long.body;
  const HttpResult range = Completion({{"prompt", "x"}, {"temperature", -0.5}});
  ExpectError(range, 400, "temperature");
  EXPECT_TRUE(range.Json()["error"]["code"].is_null()) << range.body;
  const HttpResult path = Get(*server_, "/v1/nothing");
  ExpectError(path, 404);
  EXPECT_TRUE(path.Json()["error"]["code"].is_null() || path.Json()["error"]["code"].is_string())
      << path.body;
}

// A field the server does not act on is a 400 naming it, on both endpoints, never silently
// ignored (vLLM's `return_tokens_as_token_ids`, a typo of `max_tokens`); OpenAI's informational `user`
// and every field the server reads are accepted.
TEST_F(ServerTest, UnknownFieldsAre400NamingTheField) {
  const HttpResult typo = Completion({{"prompt", "x"}, {"max_token", 4}});
  ExpectError(typo, 400, "max_token");
  const HttpResult unknown =
      Chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"return_tokens_as_token_ids", true}});
  ExpectError(unknown, 400, "return_tokens_as_token_ids");
  EXPECT_NE(unknown.Json()["error"]["message"].get<std::string>().find("return_tokens_as_token_ids"),
            std::string::npos)
      << unknown.body;
  const HttpResult user = Chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                {"max_tokens", 2},
                                {"user", "u-1"},
                                {"seed", 3},
                                {"stream", false},
                                {"n", 1}});
  EXPECT_EQ(user.status, 200) << user.body;
  const HttpResult many = Completion({{"prompt", "x"},
                                      {"max_tokens", 2},
                                      {"user", "u"},
                                      {"echo", false},
                                      {"logprobs", 1},
                                      {"min_tokens", 1},
                                      {"stop_token_ids", {5}}});
  EXPECT_EQ(many.status, 200) << many.body;
}

TEST_F(ServerTest, CompletionsDefaultToSixteenTokens) {
  HttpResult r = Completion({{"prompt", "the cat"}, {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["usage"]["completion_tokens"], 16) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["finish_reason"], "length");
  // Chat keeps vLLM's default (the rest of the context).
  HttpResult chat =
      Chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"ignore_eos", true}, {"temperature", 0}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.Json()["usage"]["total_tokens"], 512) << chat.body;
}

// The id of the greedy next token after `prompt`, found by bisecting the vocabulary with
// allowed_token_ids (the greedy choice among a set is the overall one iff the set holds it).
int32_t GreedyNextId(const std::vector<int32_t>& prompt) {
  auto first = [&](const json& extra) {
    json body = {
        {"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}, {"ignore_eos", true}, {"logprobs", 0}};
    body.update(extra);
    HttpResult r = ServerTest::Completion(body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json()["choices"][0]["logprobs"]["token_logprobs"][0].get<double>();
  };
  const double best = first(json::object());
  int32_t lo = 0, hi = 512;  // the tiny model's vocabulary
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) / 2;
    std::vector<int32_t> lower;
    for (int32_t t = lo; t < mid; ++t) lower.push_back(t);
    if (first({{"allowed_token_ids", lower}}) == best)
      hi = mid;
    else
      lo = mid;
  }
  return lo;
}

// The first token of a greedy completion has no generated tokens before it, so presence and
// frequency penalties (OpenAI's, over generated tokens only) cannot change it, however often
// the prompt repeats it.
TEST_F(ServerTest, PresenceAndFrequencyPenaltiesCountGeneratedTokensOnly) {
  auto greedy_first = [](const json& prompt, float penalty) {
    HttpResult r = Completion({{"prompt", prompt},
                               {"max_tokens", 1},
                               {"temperature", 0},
                               {"ignore_eos", true},
                               {"presence_penalty", penalty},
                               {"frequency_penalty", penalty},
                               {"logprobs", 0}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json()["choices"][0]["logprobs"]["tokens"][0].get<std::string>();
  };
  // A prompt whose greedy next token it already holds 20 times: prepend that token until the
  // prediction is one of the prompt's tokens.
  HttpResult base = Post(*server_, "/tokenize", json{{"prompt", "the cat sat"}}.dump());
  ASSERT_EQ(base.status, 200) << base.body;
  std::vector<int32_t> prompt = base.Json()["tokens"].get<std::vector<int32_t>>();
  int32_t next = -1;
  for (int attempt = 0; attempt < 8; ++attempt) {
    next = GreedyNextId(prompt);
    ASSERT_GE(next, 0);
    if (std::count(prompt.begin(), prompt.end(), next) >= 20) break;
    prompt.insert(prompt.begin() + 1, 20, next);  // after BOS
    next = -1;
  }
  ASSERT_GE(next, 0) << "no prompt found whose greedy token repeats in it";
  EXPECT_EQ(greedy_first(prompt, 2.0f), greedy_first(prompt, 0.0f));
}

TEST_F(ServerTest, ChatMlFallbackMapsDeveloperToSystemAndJoinsParts) {
  const json parts = {{{"type", "text"}, {"text", "one"}}, {{"type", "text"}, {"text", "two"}}};
  HttpResult chat =
      Post(*server_, "/tokenize",
           json{{"messages",
                 {{{"role", "developer"}, {"content", "rules"}}, {{"role", "user"}, {"content", parts}}}}}
               .dump());
  HttpResult text = Post(*server_, "/tokenize",
                         json{{"prompt",
                               "<|im_start|>system\nrules<|im_end|>\n<|im_start|>user\none\ntwo<|im_end|>\n"
                               "<|im_start|>assistant\n"}}
                             .dump());
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.Json()["tokens"], text.Json()["tokens"]);
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

// The first `count` greedy token ids after `prompt` (bisection per token).
std::vector<int32_t> GreedyIds(std::vector<int32_t> prompt, int count) {
  std::vector<int32_t> ids;
  for (int i = 0; i < count; ++i) {
    ids.push_back(GreedyNextId(prompt));
    prompt.push_back(ids.back());
  }
  return ids;
}

std::vector<int32_t> TokenIds(const std::string& text) {
  HttpResult r = Post(*ServerTest::server(), "/tokenize", json{{"prompt", text}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.Json()["tokens"].get<std::vector<int32_t>>();
}

json Greedy(json body) {
  body.update({{"temperature", 0}, {"ignore_eos", true}});
  return body;
}

TEST_F(ServerTest, UsageReportsCachedPromptTokens) {
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += " cached prefix " + std::to_string(i);
  HttpResult first = Completion(Greedy({{"prompt", prompt}, {"max_tokens", 2}}));
  ASSERT_EQ(first.status, 200) << first.body;
  const int prompt_tokens = first.Json()["usage"]["prompt_tokens"];
  ASSERT_GE(prompt_tokens, 32);
  EXPECT_EQ(first.Json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << first.body;
  HttpResult again = Completion(Greedy({{"prompt", prompt}, {"max_tokens", 2}, {"n", 2}}));
  ASSERT_EQ(again.status, 200) << again.body;
  // Whole 16-token blocks of the prompt come from the prefix cache (counted once for n = 2).
  EXPECT_EQ(again.Json()["usage"]["prompt_tokens_details"]["cached_tokens"], (prompt_tokens - 1) / 16 * 16)
      << again.body;
}

TEST_F(ServerTest, ModelByIdAndVersion) {
  HttpResult m = Get(*server_, "/v1/models/tiny");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.Json()["id"], "tiny");
  EXPECT_EQ(m.Json()["object"], "model");
  const HttpResult other = Get(*server_, "/v1/models/gpt-4");
  ExpectError(other, 404, "model");
  EXPECT_EQ(other.Json()["error"]["code"], "model_not_found");
  HttpResult v = Get(*server_, "/version");
  ASSERT_EQ(v.status, 200) << v.body;
  EXPECT_TRUE(v.Json()["version"].is_string()) << v.body;
}

TEST_F(ServerTest, LogitBiasAndAllowedTokenIdsSteerSampling) {
  const std::vector<int32_t> prompt = TokenIds("the cat");
  const int32_t greedy = GreedyNextId(prompt);
  const int32_t forced = greedy == 300 ? 301 : 300;
  const json base = Greedy({{"prompt", prompt}, {"max_tokens", 4}});
  json biased = base, allowed = base, banned = base;
  biased["logit_bias"] = {{std::to_string(forced), 100}};
  allowed["allowed_token_ids"] = {forced};
  banned["logit_bias"] = {{std::to_string(greedy), -100}};
  HttpResult b = Completion(biased), a = Completion(allowed), plain = Completion(base),
             n = Completion(banned);
  ASSERT_EQ(b.status, 200) << b.body;
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(b.Json()["choices"][0]["text"], a.Json()["choices"][0]["text"]);
  EXPECT_NE(b.Json()["choices"][0]["text"], plain.Json()["choices"][0]["text"]);
  EXPECT_NE(GreedyIds(prompt, 1)[0], forced);
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_NE(n.Json()["choices"][0]["text"], plain.Json()["choices"][0]["text"]);
  ExpectError(Completion({{"prompt", "x"}, {"logit_bias", {{"99999", 1}}}}), 400, "logit_bias");
  ExpectError(Completion({{"prompt", "x"}, {"logit_bias", {{"cat", 1}}}}), 400, "logit_bias");
  ExpectError(Completion({{"prompt", "x"}, {"logit_bias", {{"5", 101}}}}), 400, "logit_bias");
  ExpectError(Completion({{"prompt", "x"}, {"allowed_token_ids", {600}}}), 400, "allowed_token_ids");
  ExpectError(Completion({{"prompt", "x"}, {"allowed_token_ids", json::array()}}), 400, "allowed_token_ids");
}

TEST_F(ServerTest, StopTokenIdsFinishWithStop) {
  const std::vector<int32_t> prompt = TokenIds("the dog");
  const std::vector<int32_t> ids = GreedyIds(prompt, 3);
  const auto first_at = std::find(ids.begin(), ids.end(), ids[2]) - ids.begin();
  HttpResult r = Completion(Greedy({{"prompt", prompt}, {"max_tokens", 10}, {"stop_token_ids", {ids[2]}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["usage"]["completion_tokens"], first_at) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["finish_reason"], "stop");
  ExpectError(Completion({{"prompt", "x"}, {"stop_token_ids", {-1}}}), 400, "stop_token_ids");
}

TEST_F(ServerTest, IncludeStopStrInOutputKeepsTheStopString) {
  const json base = Greedy({{"prompt", "the cat"}, {"max_tokens", 16}});
  const std::string text = Completion(base).Json()["choices"][0]["text"];
  ASSERT_GE(text.size(), 8u) << text;
  const std::string stop = text.substr(4, 3);
  const size_t at = text.find(stop);
  json with = base, without = base;
  with.update({{"stop", stop}, {"include_stop_str_in_output", true}});
  without["stop"] = stop;
  EXPECT_EQ(Completion(with).Json()["choices"][0]["text"], text.substr(0, at + stop.size()));
  EXPECT_EQ(Completion(without).Json()["choices"][0]["text"], text.substr(0, at));
}

TEST_F(ServerTest, SkipSpecialTokensFalseRendersThem) {
  HttpResult eos = Post(*server_, "/tokenize", json{{"content", "</s>"}, {"with_pieces", true}}.dump());
  ASSERT_EQ(eos.status, 200) << eos.body;
  ASSERT_EQ(eos.Json()["tokens"].size(), 1u) << eos.body;
  const int32_t id = eos.Json()["tokens"][0]["id"];
  const std::string piece = eos.Json()["tokens"][0]["piece"];
  const json forced =
      Greedy({{"prompt", "the"}, {"max_tokens", 2}, {"logit_bias", {{std::to_string(id), 100}}}});
  json rendered = forced, joined = forced;
  rendered["skip_special_tokens"] = false;
  joined.update({{"skip_special_tokens", false}, {"spaces_between_special_tokens", false}});
  EXPECT_EQ(Completion(forced).Json()["choices"][0]["text"], "");
  EXPECT_EQ(Completion(rendered).Json()["choices"][0]["text"], piece + " " + piece);
  EXPECT_EQ(Completion(joined).Json()["choices"][0]["text"], piece + piece);
}

// EOS forced by logit_bias ends the completion at once; min_tokens holds it back exactly that
// many tokens.
TEST_F(ServerTest, MinTokensHoldsEosBack) {
  HttpResult eos = Post(*server_, "/tokenize", json{{"content", "</s>"}}.dump());
  ASSERT_EQ(eos.Json()["tokens"].size(), 1u) << eos.body;
  const std::string id = std::to_string(eos.Json()["tokens"][0].get<int>());
  const json forced = {
      {"prompt", "the"}, {"max_tokens", 12}, {"temperature", 0}, {"logit_bias", {{id, 100}}}};
  HttpResult at_once = Completion(forced);
  ASSERT_EQ(at_once.status, 200) << at_once.body;
  EXPECT_EQ(at_once.Json()["usage"]["completion_tokens"], 0) << at_once.body;
  EXPECT_EQ(at_once.Json()["choices"][0]["finish_reason"], "stop");
  json held = forced;
  held["min_tokens"] = 5;
  HttpResult r = Completion(held);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["usage"]["completion_tokens"], 5) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["finish_reason"], "stop");
  ExpectError(Completion({{"prompt", "x"}, {"max_tokens", 4}, {"min_tokens", 5}}), 400, "min_tokens");
}

TEST_F(ServerTest, TruncatePromptTokensKeepsTheEnd) {
  const std::vector<int32_t> prompt = TokenIds("the cat sat on the mat");
  ASSERT_GT(prompt.size(), 4u);
  const std::vector<int32_t> tail(prompt.end() - 3, prompt.end());
  HttpResult cut = Completion(Greedy({{"prompt", prompt}, {"max_tokens", 6}, {"truncate_prompt_tokens", 3}}));
  HttpResult by_tail = Completion(Greedy({{"prompt", tail}, {"max_tokens", 6}}));
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(cut.Json()["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(cut.Json()["choices"][0]["text"], by_tail.Json()["choices"][0]["text"]);
}

TEST_F(ServerTest, LlamaServerTokenizeShapes) {
  HttpResult plain = Post(*server_, "/tokenize", json{{"content", "the cat"}}.dump());
  HttpResult pieces = Post(*server_, "/tokenize", json{{"content", "the cat"}, {"with_pieces", true}}.dump());
  HttpResult vllm =
      Post(*server_, "/tokenize", json{{"prompt", "the cat"}, {"add_special_tokens", false}}.dump());
  HttpResult special =
      Post(*server_, "/tokenize", json{{"content", "the cat"}, {"add_special", true}}.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(plain.Json()["tokens"], vllm.Json()["tokens"]);  // add_special defaults to false
  EXPECT_EQ(special.Json()["tokens"].size(), plain.Json()["tokens"].size() + 1);  // BOS
  ASSERT_EQ(pieces.Json()["tokens"].size(), plain.Json()["tokens"].size());
  std::string joined;
  for (size_t i = 0; i < pieces.Json()["tokens"].size(); ++i) {
    EXPECT_EQ(pieces.Json()["tokens"][i]["id"], plain.Json()["tokens"][i]);
    joined += pieces.Json()["tokens"][i]["piece"].get<std::string>();
  }
  EXPECT_NE(joined.find("cat"), std::string::npos) << pieces.body;
  HttpResult d = Post(*server_, "/detokenize", json{{"tokens", plain.Json()["tokens"]}}.dump());
  EXPECT_EQ(d.Json()["content"], "the cat") << d.body;
  ExpectError(Post(*server_, "/tokenize", json{{"content", 5}}.dump()), 400, "content");
}

TEST_F(ServerTest, ChatPageIsServed) {
  HttpResult page = Get(*server_, "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("/v1/chat/completions"), std::string::npos);
  auto it = page.headers.find("Content-Type");
  ASSERT_NE(it, page.headers.end());
  EXPECT_EQ(it->second.rfind("text/html", 0), 0u);
}

TEST_F(ServerTest, CorsPreflightBeforeTheKeyAndMetricsPrefix) {
  ServerProcess s;
  ASSERT_TRUE(s.Start({"-m", *model_, "--kv-cache-memory", "16M", "--api-key", "sekret", "--allowed-origins",
                       "http://app.example,http://other.example", "--metrics-prefix", "vllm", "--no-webui",
                       "--threads", "1"}))
      << s.Log();
  httplib::Client c = s.Client();
  httplib::Result pre =
      c.Options("/v1/chat/completions", {{"Origin", "http://app.example"},
                                         {"Access-Control-Request-Method", "POST"},
                                         {"Access-Control-Request-Headers", "authorization"}});
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204) << pre->body;  // no key needed for the preflight
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Headers"), "authorization");
  httplib::Result bad = c.Options(
      "/v1/chat/completions", {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 403);
  EXPECT_EQ(bad->get_header_value("Access-Control-Allow-Origin"), "");
  httplib::Result post =
      c.Post("/v1/completions", {{"Origin", "http://other.example"}, {"Authorization", "Bearer sekret"}},
             json{{"prompt", "x"}, {"max_tokens", 1}}.dump(), "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 200) << post->body;
  EXPECT_EQ(post->get_header_value("Access-Control-Allow-Origin"), "http://other.example");
  EXPECT_GE(testing::Metric(s, "vllm:num_requests_running"), 0);
  EXPECT_EQ(testing::Metric(s, "ferry:num_requests_running"), -1);  // absent
  EXPECT_EQ(Get(s, "/").status, 404);                               // --no-webui
  EXPECT_EQ(s.Stop(SIGTERM), 0) << s.Log();
}

void ExpectErrorStatus(const HttpResult& r, int status, const std::string& param) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.Json()["error"]["param"], param) << r.body;
}

// `ferry serve` with no -m: the bundled stories260K model, a trained one.
class BundledModelServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess();
    ASSERT_TRUE(server_->Start({"--kv-cache-memory", "16M", "--threads", "1"})) << server_->Log();
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->Stop(SIGTERM), 0) << server_->Log();
    }
    delete server_;
  }
  void SetUp() override { ASSERT_TRUE(server_ && server_->port() > 0) << "the server did not start"; }
  static inline ServerProcess* server_ = nullptr;
};

TEST_F(BundledModelServerTest, ServeWithoutModelFlagUsesTheBundledModel) {
  EXPECT_NE(server_->Log().find("no -m given: using the bundled model"), std::string::npos) << server_->Log();
  EXPECT_EQ(Get(*server_, "/v1/models").Json()["data"][0]["id"], "stories260K.gguf");
}

// llama2.c's stories end where the model writes BOS (id 1) to begin the next one.
TEST_F(BundledModelServerTest, MinTokensHoldsStopTokenIdsBack) {
  const json base = {
      {"prompt", "Once upon a time"}, {"max_tokens", 480}, {"temperature", 0}, {"stop_token_ids", {1}}};
  HttpResult plain = Post(*server_, "/v1/completions", base.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  ASSERT_EQ(plain.Json()["choices"][0]["finish_reason"], "stop") << plain.body;
  const int natural = plain.Json()["usage"]["completion_tokens"];
  ASSERT_LT(natural + 20, 480);
  json held = base;
  held["min_tokens"] = natural + 20;
  HttpResult r = Post(*server_, "/v1/completions", held.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_GE(r.Json()["usage"]["completion_tokens"].get<int>(), natural + 20) << r.body;
  // The text before the held-back stop token is the same story.
  const std::string story = plain.Json()["choices"][0]["text"];
  EXPECT_EQ(r.Json()["choices"][0]["text"].get<std::string>().substr(0, story.size()), story);
  json too_many = base;
  too_many["min_tokens"] = 500;
  ExpectErrorStatus(Post(*server_, "/v1/completions", too_many.dump()), 400, "min_tokens");
}

// lm-evaluation-harness's loglikelihood request (echo, logprobs, max_tokens 0): the prompt
// comes back scored, each token's logprob equal to the one the same token gets when it is
// generated one at a time after the tokens before it (forced there by allowed_token_ids; the
// reported logprob is the raw model's). vLLM's prompt_logprobs gives the same numbers.
TEST_F(ServerTest, EchoWithLogprobsScoresThePromptAsGenerationWould) {
  HttpResult tok = Post(*server_, "/tokenize", json{{"prompt", "the cat sat on"}}.dump());
  ASSERT_EQ(tok.status, 200) << tok.body;
  const std::vector<int32_t> ids = tok.Json()["tokens"].get<std::vector<int32_t>>();
  ASSERT_GE(ids.size(), 4u);
  HttpResult scored = Completion({{"prompt", ids}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 2}});
  ASSERT_EQ(scored.status, 200) << scored.body;
  const json choice = scored.Json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(scored.Json()["usage"]["completion_tokens"], 0);
  const json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size()) << scored.body;
  ASSERT_EQ(lp["token_logprobs"].size(), ids.size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());  // nothing precedes the first token
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (size_t p = 1; p < ids.size(); ++p) {
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(p));
    HttpResult one = Completion({{"prompt", prefix},
                                 {"max_tokens", 1},
                                 {"temperature", 0},
                                 {"logprobs", 0},
                                 {"allowed_token_ids", {ids[p]}}});
    ASSERT_EQ(one.status, 200) << one.body;
    const double generated = one.Json()["choices"][0]["logprobs"]["token_logprobs"][0].get<double>();
    EXPECT_NEAR(lp["token_logprobs"][p].get<double>(), generated, 1e-4) << "prompt token " << p;
    EXPECT_EQ(lp["top_logprobs"][p].size(), 2u);
    EXPECT_EQ(lp["tokens"][p], one.Json()["choices"][0]["logprobs"]["tokens"][0]);
  }
  // vLLM's prompt_logprobs: {"id": {logprob, rank, decoded_token}}, the prompt token first.
  HttpResult vllm = Completion({{"prompt", ids}, {"max_tokens", 1}, {"prompt_logprobs", 1}});
  ASSERT_EQ(vllm.status, 200) << vllm.body;
  const json plp = vllm.Json()["choices"][0]["prompt_logprobs"];
  ASSERT_EQ(plp.size(), ids.size()) << vllm.body;
  EXPECT_TRUE(plp[0].is_null());
  for (size_t p = 1; p < ids.size(); ++p) {
    const json& mine = plp[p][std::to_string(ids[p])];
    EXPECT_NEAR(mine["logprob"].get<double>(), lp["token_logprobs"][p].get<double>(), 1e-5);
    EXPECT_GE(mine["rank"].get<int>(), 1);
    EXPECT_LE(plp[p].size(), 2u);
    EXPECT_EQ(mine["rank"] == 1, plp[p].size() == 1u) << plp[p].dump();  // the top-1 is itself iff rank 1
  }
  HttpResult chat = Chat(
      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 1}, {"prompt_logprobs", 0}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.Json()["prompt_logprobs"].size(), chat.Json()["usage"]["prompt_tokens"].get<size_t>());
  ExpectError(
      Chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"prompt_logprobs", 0}, {"stream", true}}),
      400, "prompt_logprobs");
  ExpectError(Completion({{"prompt", ids}, {"max_tokens", 0}, {"n", 2}}), 400, "n");
}

// Streamed, the echoed prompt arrives once scored, with its logprobs, before the new tokens;
// the whole logprobs object equals the non-streamed one's.
TEST_F(ServerTest, StreamedEchoCarriesThePromptLogprobsFirst) {
  json body = {{"prompt", "the cat"}, {"max_tokens", 3},  {"echo", true},
               {"logprobs", 1},       {"temperature", 0}, {"ignore_eos", true}};
  HttpResult whole = Completion(body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  body["stream"] = true;
  std::vector<json> events = Stream("/v1/completions", body);
  ASSERT_GE(events.size(), 3u);
  std::string text;
  json tokens = json::array(), logprobs = json::array();
  for (const json& e : events) {
    if (!e.is_object() || e["choices"].empty()) continue;
    text += e["choices"][0]["text"].get<std::string>();
    const json& lp = e["choices"][0]["logprobs"];
    if (lp.is_null()) continue;
    for (const json& t : lp["tokens"]) tokens.push_back(t);
    for (const json& l : lp["token_logprobs"]) logprobs.push_back(l);
  }
  const json first = events[0]["choices"][0];
  EXPECT_EQ(first["text"], "the cat");
  EXPECT_TRUE(first["logprobs"]["token_logprobs"][0].is_null());
  EXPECT_EQ(text, whole.Json()["choices"][0]["text"]);
  EXPECT_EQ(tokens, whole.Json()["choices"][0]["logprobs"]["tokens"]);
  EXPECT_EQ(logprobs, whole.Json()["choices"][0]["logprobs"]["token_logprobs"]);
}

// vLLM's use_beam_search: one beam is greedy decoding; n beams give n distinct hypotheses,
// best first; the fields a deterministic whole-hypothesis search cannot honour are refused.
TEST_F(ServerTest, BeamSearchReturnsTheBestHypotheses) {
  const json prompt = "the cat sat";
  HttpResult greedy =
      Completion({{"prompt", prompt}, {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(greedy.status, 200) << greedy.body;
  HttpResult one = Completion(
      {{"prompt", prompt}, {"max_tokens", 5}, {"use_beam_search", true}, {"n", 1}, {"ignore_eos", true}});
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.Json()["choices"][0]["text"], greedy.Json()["choices"][0]["text"]);
  HttpResult three = Completion({{"prompt", prompt},
                                 {"max_tokens", 4},
                                 {"use_beam_search", true},
                                 {"n", 3},
                                 {"length_penalty", 0.5},
                                 {"ignore_eos", true}});
  ASSERT_EQ(three.status, 200) << three.body;
  const json j = three.Json();
  ASSERT_EQ(j["choices"].size(), 3u) << three.body;
  std::set<std::string> texts;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["finish_reason"], "length");
    texts.insert(j["choices"][i]["text"].get<std::string>());
  }
  EXPECT_EQ(texts.size(), 3u) << three.body;
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  HttpResult chat = Chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                          {"max_tokens", 3},
                          {"use_beam_search", true},
                          {"n", 2}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.Json()["choices"].size(), 2u);
  EXPECT_EQ(chat.Json()["choices"][0]["message"]["role"], "assistant");
  ExpectError(Completion({{"prompt", prompt}, {"length_penalty", 1.5}}), 400, "length_penalty");
  ExpectError(Completion({{"prompt", prompt}, {"use_beam_search", true}, {"stream", true}}), 400, "stream");
  ExpectError(Completion({{"prompt", prompt}, {"use_beam_search", true}, {"temperature", 0.7}}), 400,
              "temperature");
  ExpectError(Chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                    {"use_beam_search", true},
                    {"logprobs", true}}),
              400, "logprobs");
}

}  // namespace
}  // namespace ferry
