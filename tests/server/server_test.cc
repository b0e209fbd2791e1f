// `ferry serve` end to end: a real server process on a loopback port, driven over HTTP.
// Completions and chat (whole and streamed), OpenAI errors, stop strings, n, logprobs, echo,
// tokenize, metrics, API key and body limit. Robustness (overload, disconnects, signals) is in
// server_robustness_test.cc.
#include <gtest/gtest.h>

#include <fstream>

#include "server_fixture.h"
#include "test_util.h"

namespace ferry {
namespace {

TEST_F(ServerTest, CompletionHasOpenAiShapeAndUsage) {
  HttpResult r = Completion({{"model", "tiny"},
                             {"prompt", "the cat"},
                             {"max_tokens", 12},
                             {"temperature", 0},
                             {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.Json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 1);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + 12);
  // Greedy is deterministic, and the prompt as token ids gives the same text.
  HttpResult again =
      Completion({{"prompt", "the cat"}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(again.Json()["choices"][0]["text"], j["choices"][0]["text"]);
  HttpResult ids = Post(*server_, "/tokenize", json{{"prompt", "the cat"}}.dump());
  ASSERT_EQ(ids.status, 200) << ids.body;
  HttpResult by_ids = Completion(
      {{"prompt", ids.Json()["tokens"]}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(by_ids.status, 200) << by_ids.body;
  EXPECT_EQ(by_ids.Json()["choices"][0]["text"], j["choices"][0]["text"]);
}

TEST_F(ServerTest, PromptListGivesPromptMajorChoicesAndSeedsRepeat) {
  json body = {{"prompt", {"the cat", "a dog ran"}},
               {"max_tokens", 6},
               {"n", 2},
               {"seed", 42},
               {"temperature", 1.0},
               {"ignore_eos", true}};
  HttpResult a = Completion(body), b = Completion(body);
  ASSERT_EQ(a.status, 200) << a.body;
  json ja = a.Json(), jb = b.Json();
  ASSERT_EQ(ja["choices"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ja["choices"][i]["index"], i);
    EXPECT_EQ(ja["choices"][i]["text"], jb["choices"][i]["text"]);  // same seed, same samples
  }
  EXPECT_EQ(ja["usage"]["completion_tokens"], 24);
}

TEST_F(ServerTest, StopStringSplitAcrossTokensIsNeverEmitted) {
  // Greedy text and its tokens; a stop string made of the end of one token and the start of the next.
  HttpResult full = Completion({{"prompt", "once upon"},
                                {"max_tokens", 24},
                                {"temperature", 0},
                                {"ignore_eos", true},
                                {"logprobs", 0}});
  ASSERT_EQ(full.status, 200) << full.body;
  const std::string text = full.Json()["choices"][0]["text"];
  const json tokens = full.Json()["choices"][0]["logprobs"]["tokens"];
  std::string stop;
  size_t offset = 0;
  for (size_t i = 0; i + 1 < tokens.size() && stop.empty(); ++i) {
    const std::string a = tokens[i], b = tokens[i + 1];
    offset += a.size();
    auto printable = [](unsigned char c) { return c >= 0x20 && c < 0x7f; };
    if (!a.empty() && !b.empty() && printable(a.back()) && printable(b[0]) && i >= 2)
      stop = a.substr(a.size() - 1) + b[0];
  }
  ASSERT_FALSE(stop.empty()) << "no token boundary between printable characters in: " << text;
  const std::string expected = text.substr(0, text.find(stop));
  json body = {
      {"prompt", "once upon"}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}, {"stop", stop}};
  HttpResult r = Completion(body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], expected) << "stop '" << stop << "'";
  EXPECT_EQ(r.Json()["choices"][0]["finish_reason"], "stop");
  // Streamed: the deltas add up to the same text; no delta holds part of the stop string past it.
  body["stream"] = true;
  std::string streamed;
  for (const json& e : Stream("/v1/completions", body))
    if (e.is_object()) streamed += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(streamed, expected);
  // A list of stops: the earliest match wins.
  body["stream"] = false;
  body["stop"] = {"\x01never", stop};
  EXPECT_EQ(Completion(body).Json()["choices"][0]["text"], expected);
}

TEST_F(ServerTest, LogprobsAreLogSoftmaxOfRawLogits) {
  HttpResult r = Completion(
      {{"prompt", "the cat"}, {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}, {"logprobs", 3}});
  ASSERT_EQ(r.status, 200) << r.body;
  json lp = r.Json()["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 5u);
  ASSERT_EQ(lp["token_logprobs"].size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const json& top = lp["top_logprobs"][i];
    EXPECT_GE(top.size(), 1u);
    EXPECT_LE(top.size(), 3u);
    double best = -1e30, sum = 0;
    for (auto& [tok, v] : top.items()) {
      best = std::max(best, v.get<double>());
      sum += std::exp(v.get<double>());
      EXPECT_LE(v.get<double>(), 0.0);
    }
    EXPECT_LE(sum, 1.0 + 1e-6);
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), best, 1e-5);  // greedy picks the most likely token
  }
  HttpResult chat = Chat({{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                          {"max_tokens", 3},
                          {"logprobs", true},
                          {"top_logprobs", 2},
                          {"ignore_eos", true}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  json content = chat.Json()["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u);
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_TRUE(content[0]["bytes"].is_array());
}

TEST_F(ServerTest, EchoPrependsThePrompt) {
  HttpResult r = Completion({{"prompt", "the cat"}, {"max_tokens", 4}, {"echo", true}, {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"].get<std::string>().rfind("the cat", 0), 0u);
}

TEST_F(ServerTest, ChatUsesChatMlFallbackAndStreams) {
  json messages = {{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", "hello"}}};
  HttpResult r = Chat({{"messages", messages}, {"max_tokens", 5}, {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.Json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  // The prompt is ChatML (the tiny model has no template): same tokens as the rendered text.
  HttpResult chat_tokens = Post(*server_, "/tokenize", json{{"messages", messages}}.dump());
  HttpResult text_tokens =
      Post(*server_, "/tokenize",
           json{{"prompt",
                 "<|im_start|>system\nbe "
                 "brief<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"}}
               .dump());
  ASSERT_EQ(chat_tokens.status, 200) << chat_tokens.body;
  EXPECT_EQ(chat_tokens.Json()["tokens"], text_tokens.Json()["tokens"]);
  EXPECT_EQ(j["usage"]["prompt_tokens"], chat_tokens.Json()["count"]);
  EXPECT_NE(server_->Log().find("no chat template"), std::string::npos);

  int status = 0;
  std::vector<json> events = Stream("/v1/chat/completions",
                                    {{"messages", messages},
                                     {"max_tokens", 5},
                                     {"ignore_eos", true},
                                     {"stream", true},
                                     {"stream_options", {{"include_usage", true}}}},
                                    &status);
  ASSERT_EQ(status, 200);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  const json& usage = events[events.size() - 2];
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 5);
  const json& last = events[events.size() - 3];
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  for (size_t i = 0; i + 2 < events.size(); ++i) EXPECT_TRUE(events[i]["usage"].is_null());
}

TEST_F(ServerTest, StreamedCompletionWithNEndsEachChoice) {
  std::vector<json> events =
      Stream("/v1/completions",
             {{"prompt", "the"}, {"max_tokens", 4}, {"n", 2}, {"stream", true}, {"ignore_eos", true}});
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  std::map<int, std::string> finish;
  for (const json& e : events)
    if (e.is_object() && !e["choices"].empty() && !e["choices"][0]["finish_reason"].is_null())
      finish[e["choices"][0]["index"]] = e["choices"][0]["finish_reason"];
  EXPECT_EQ(finish, (std::map<int, std::string>{{0, "length"}, {1, "length"}}));
}

TEST_F(ServerTest, InvalidRequestsGetOpenAiErrors) {
  ExpectError(Post(*server_, "/v1/completions", "{not json"), 400);
  ExpectError(Post(*server_, "/v1/completions", "[1, 2]"), 400);
  ExpectError(Completion({{"max_tokens", 3}}), 400, "prompt");
  ExpectError(Completion({{"prompt", "x"}, {"max_tokens", -1}}), 400, "max_tokens");
  ExpectError(Completion({{"prompt", "x"}, {"max_tokens", "ten"}}), 400, "max_tokens");
  ExpectError(Completion({{"prompt", "x"}, {"temperature", -0.5}}), 400, "temperature");
  ExpectError(Completion({{"prompt", "x"}, {"top_p", 0}}), 400, "top_p");
  ExpectError(Completion({{"prompt", "x"}, {"n", 100000}}), 400, "n");
  ExpectError(Completion({{"prompt", "x"}, {"stop", 5}}), 400, "stop");
  ExpectError(Completion({{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}), 400,
              "stream_options");
  ExpectError(Completion({{"prompt", json::array()}}), 400, "prompt");
  ExpectError(Completion({{"prompt", {1, 2, 999999}}}), 400);  // outside the vocabulary
  ExpectError(Completion({{"prompt", "x"}, {"model", "gpt-4"}}), 404, "model");
  std::string long_prompt;
  for (int i = 0; i < 600; ++i) long_prompt += " cat";
  HttpResult too_long = Completion({{"prompt", long_prompt}, {"max_tokens", 4}});
  ExpectError(too_long, 400, "prompt");
  EXPECT_NE(too_long.body.find("maximum context length is 512"), std::string::npos) << too_long.body;
  ExpectError(Chat({{"messages", json::array()}}), 400, "messages");
  ExpectError(Chat({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}), 400, "messages[0].role");
  ExpectError(Chat({{"messages", "hi"}}), 400, "messages");
  ExpectError(Get(*server_, "/v1/nothing"), 404);
  // Oversized bodies are refused (the limit is 20000 bytes here).
  ExpectError(Post(*server_, "/v1/completions", json{{"prompt", std::string(30000, 'a')}}.dump()), 413);
  // Also when sent chunked (no Content-Length): refused part-way.
  {
    httplib::Client c = server_->Client();
    const std::string big = json{{"prompt", std::string(30000, 'a')}}.dump();
    httplib::Result chunked = c.Post(
        "/v1/completions",
        [&](size_t offset, httplib::DataSink& sink) {
          const size_t n = std::min<size_t>(4096, big.size() - offset);
          if (n > 0) sink.write(big.data() + offset, n);
          if (offset + n == big.size()) sink.done();
          return true;
        },
        "application/json");
    ASSERT_TRUE(chunked);
    EXPECT_EQ(chunked->status, 413) << chunked->body;
  }
  // Far past the limit (more than twice it) the rest is never read: the client sees the 413 or,
  // if it was still writing, a reset connection; either way the server carries on.
  const HttpResult huge = Post(*server_, "/v1/completions", std::string(4 << 20, 'a'));
  if (huge.status != -1) {
    EXPECT_EQ(huge.status, 413) << huge.body;
  }
  // The server is still fine.
  EXPECT_EQ(Get(*server_, "/health").status, 200);
}

TEST_F(ServerTest, ModelsTokenizeDetokenize) {
  HttpResult m = Get(*server_, "/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.Json()["data"][0]["id"], "tiny");
  EXPECT_EQ(m.Json()["data"][0]["max_model_len"], 512);
  HttpResult t =
      Post(*server_, "/tokenize", json{{"prompt", "the cat sat"}, {"add_special_tokens", false}}.dump());
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.Json()["count"], t.Json()["tokens"].size());
  HttpResult d = Post(*server_, "/detokenize", json{{"tokens", t.Json()["tokens"]}}.dump());
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.Json()["prompt"], "the cat sat");
  ExpectError(Post(*server_, "/detokenize", json{{"tokens", {-1}}}.dump()), 400, "tokens");
}

TEST_F(ServerTest, MetricsCountRequestsInPrometheusFormat) {
  const double before = testing::Metric(*server_, "ferry:request_success_total");
  ASSERT_EQ(Completion({{"prompt", "x"}, {"max_tokens", 3}, {"ignore_eos", true}}).status, 200);
  HttpResult page = Get(*server_, "/metrics");
  ASSERT_EQ(page.status, 200);
  for (const char* name : {"ferry:num_requests_running",
                           "ferry:num_requests_waiting",
                           "ferry:kv_cache_usage_perc",
                           "ferry:kv_cache_used_blocks",
                           "ferry:prefix_cache_hits_total",
                           "ferry:prefix_cache_queries_total",
                           "ferry:num_preemptions_total",
                           "ferry:prompt_tokens_total",
                           "ferry:generation_tokens_total",
                           "ferry:time_to_first_token_seconds_bucket",
                           "ferry:time_per_output_token_seconds_count",
                           "ferry:inter_token_latency_seconds_sum",
                           "ferry:e2e_request_latency_seconds_count",
                           "ferry:request_queue_time_seconds_count",
                           "# TYPE ferry:time_to_first_token_seconds histogram",
                           "ferry:prefix_cache_ram_bytes{",
                           "ferry:prefix_cache_disk_bytes{",
                           "ferry:prefix_cache_tier_hits_total{",
                           "tier=\"ram\"",
                           "tier=\"disk\"",
                           "ferry:prefix_cache_disk_rejected_total{"})
    EXPECT_NE(page.body.find(name), std::string::npos) << name;
  // The first request_success_total sample is finished_reason="stop"; count all reasons.
  double after = 0;
  std::istringstream in(page.body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("ferry:request_success_total{", 0) == 0)
      after += std::stod(line.substr(line.rfind(' ') + 1));
  EXPECT_GE(after, before + 1);
  EXPECT_GE(testing::Metric(*server_, "ferry:generation_tokens_total"), 3);
}

// `ferry bench serve --url <this server> ARGS --json`'s JSON; discarded (and the test failed) if
// the command fails or prints something else.
json BenchServe(const ServerProcess& server, const std::string& args) {
  const std::string cmd = testing::FerryBinary() +
                          " bench serve --url http://127.0.0.1:" + std::to_string(server.port()) + " " +
                          args + " --json";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "cannot run " << cmd;
    return json(json::value_t::discarded);
  }
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
  json j = json::parse(out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << out;
  return j;
}

TEST_F(ServerTest, BenchServeReportsEveryRequest) {
  json j = BenchServe(
      *server_, "--num-requests 6 --request-rate 200 --input-len 8:16 --output-len 5 --max-concurrency 3");
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["completed"], 6);
  EXPECT_EQ(j["errors"], 0);
  EXPECT_EQ(j["total_output_tokens"], 30);
  EXPECT_GE(j["total_input_tokens"].get<int>(), 6 * 8);
  for (const char* k :
       {"p50_ttft_ms", "p99_ttft_ms", "p90_tpot_ms", "p99_itl_ms", "p50_e2el_ms", "output_throughput"})
    EXPECT_GT(j[k].get<double>(), 0) << k;
  EXPECT_LE(j["p50_ttft_ms"].get<double>(), j["p99_ttft_ms"].get<double>());
}

// --multi-turn: each conversation re-sends its history, so every turn's prompt is longer than
// the last by the reply and the new user tokens; TTFT comes per turn.
TEST_F(ServerTest, BenchServeMultiTurnResendsTheGrowingHistory) {
  json j = BenchServe(*server_,
                      "--num-requests 3 --multi-turn 3 --input-len 8 --output-len 4 --max-concurrency 2");
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["conversations"], 3);
  EXPECT_EQ(j["turns"], 3);
  EXPECT_EQ(j["num_requests"], 9);
  EXPECT_EQ(j["completed"], 9);
  ASSERT_EQ(j["per_turn"].size(), 3u);
  double last = 0;
  for (const json& t : j["per_turn"]) {
    EXPECT_EQ(t["completed"], 3);
    // Turn 1 sends 8 tokens; each later one adds the reply (>= 1 token) and 8 more.
    EXPECT_GE(t["mean_prompt_tokens"].get<double>(), last + (last == 0 ? 8 : 9)) << t.dump();
    last = t["mean_prompt_tokens"].get<double>();
    EXPECT_GT(t["mean_ttft_ms"].get<double>(), 0);
  }
  EXPECT_GT(j["mean_ttft_turn_ge2_ms"].get<double>(), 0);
}

// best_of: the n returned choices are the candidates with the highest mean token logprob.
TEST_F(ServerTest, BestOfReturnsTheCandidatesWithHighestMeanLogprob) {
  const json base = {
      {"prompt", "once"}, {"max_tokens", 6}, {"temperature", 1.0}, {"seed", 7}, {"ignore_eos", true}};
  json all = base;
  all["n"] = 4;
  all["logprobs"] = 0;
  HttpResult cands = Completion(all);
  ASSERT_EQ(cands.status, 200) << cands.body;
  std::vector<std::pair<double, std::string>> ranked;
  const json cj = cands.Json();  // named: a temporary's member would dangle in the loop
  for (const auto& c : cj["choices"]) {
    double sum = 0;
    for (const auto& lp : c["logprobs"]["token_logprobs"]) sum += lp.get<double>();
    ranked.push_back(
        {sum / static_cast<double>(c["logprobs"]["token_logprobs"].size()), c["text"].get<std::string>()});
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first > b.first; });
  json best = base;
  best["n"] = 2;
  best["best_of"] = 4;
  HttpResult r = Completion(best);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.Json();
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  // (compared as std::string: the random model's text is not valid UTF-8 for json's printer)
  EXPECT_EQ(j["choices"][0]["text"].get<std::string>(), ranked[0].second);
  EXPECT_EQ(j["choices"][1]["text"].get<std::string>(), ranked[1].second);
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());  // not asked for
  EXPECT_EQ(j["usage"]["completion_tokens"], 4 * 6);   // every candidate was generated
  json bad = best;
  bad["best_of"] = 1;
  ExpectError(Completion(bad), 400, "best_of");
  bad["best_of"] = 4;
  bad["stream"] = true;
  ExpectError(Completion(bad), 400, "best_of");
}

// A speculating server (prompt lookup) answers greedy requests exactly as the plain one and
// counts its drafts in /metrics.
TEST_F(ServerTest, SpeculativeServerMatchesPlainGreedy) {
  ServerProcess s;
  ASSERT_TRUE(s.Start({"-m", *model_, "--kv-cache-memory", "16M", "--spec-ngram", "2", "--spec-tokens", "3",
                       "--threads", "1"}))
      << s.Log();
  const json body = {{"prompt", "a b c d a b c d a b c d a b"},
                     {"max_tokens", 24},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  HttpResult spec = Post(s, "/v1/completions", body.dump());
  HttpResult plain = Completion(body);
  ASSERT_EQ(spec.status, 200) << spec.body;
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(spec.Json()["choices"][0]["text"], plain.Json()["choices"][0]["text"]);
  EXPECT_GT(testing::Metric(s, "ferry:spec_decode_num_draft_tokens_total"), 0);
  EXPECT_EQ(testing::Metric(*server_, "ferry:spec_decode_num_draft_tokens_total"), 0);
  EXPECT_EQ(s.Stop(SIGTERM), 0) << s.Log();
}

// A second server: API key, a template file, and the model's template from the assets.
TEST_F(ServerTest, ApiKeyAndChatTemplateFile) {
  const std::string tmpl = testing::TempDir() + "/t.jinja";
  std::ofstream(tmpl) << "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
                         "{% if add_generation_prompt %}[assistant]{% endif %}";
  ServerProcess s;
  ASSERT_TRUE(s.Start({"-m", *model_, "--kv-cache-memory", "16M", "--api-key", "sekret", "--chat-template",
                       tmpl, "--threads", "1"}))
      << s.Log();
  json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
  const HttpResult no_key = Post(s, "/v1/chat/completions", chat.dump());
  ExpectError(no_key, 401);
  EXPECT_EQ(no_key.Json()["error"]["code"], "invalid_api_key") << no_key.body;
  ExpectError(Post(s, "/v1/chat/completions", chat.dump(), {{"Authorization", "Bearer wrong"}}), 401);
  HttpResult ok = Post(s, "/v1/chat/completions", chat.dump(), {{"Authorization", "Bearer sekret"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(Get(s, "/health").status, 200);  // only /v1 needs the key
  HttpResult by_chat = Post(s, "/tokenize", json{{"messages", chat["messages"]}}.dump());
  HttpResult by_text =
      Post(s, "/tokenize", json{{"prompt", "[user]hi[assistant]"}, {"add_special_tokens", false}}.dump());
  ASSERT_EQ(by_chat.status, 200) << by_chat.body;
  EXPECT_EQ(by_chat.Json()["tokens"], by_text.Json()["tokens"]);
  // This template never names `developer`: such messages reach it as `system` (vLLM's and
  // OpenAI's mapping), and text parts are joined with "\n" (vLLM's).
  const json parts = {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}};
  HttpResult dev =
      Post(s, "/tokenize",
           json{{"messages",
                 {{{"role", "developer"}, {"content", "be brief"}}, {{"role", "user"}, {"content", parts}}}}}
               .dump());
  HttpResult dev_text =
      Post(s, "/tokenize",
           json{{"prompt", "[system]be brief[user]a\nb[assistant]"}, {"add_special_tokens", false}}.dump());
  ASSERT_EQ(dev.status, 200) << dev.body;
  EXPECT_EQ(dev.Json()["tokens"], dev_text.Json()["tokens"]);
  EXPECT_EQ(s.Stop(SIGINT), 0) << s.Log();
}

TEST_F(ServerTest, RealModelTemplateRendersAsFerryTemplate) {
  const std::string rel = "chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja";
  FERRY_REQUIRE_ASSET(rel);
  const std::string dir = testing::TempDir();
  json messages = {{{"role", "system"}, {"content", "You are terse."}},
                   {{"role", "user"}, {"content", "Name a cat."}}};
  std::ofstream(dir + "/m.json") << messages.dump();
  const std::string rendered = dir + "/rendered.txt";
  ASSERT_EQ(std::system((testing::FerryBinary() + " template --template " + testing::AssetPath(rel) +
                         " --messages " + dir + "/m.json > " + rendered)
                            .c_str()),
            0);
  std::ifstream in(rendered);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  ServerProcess s;
  ASSERT_TRUE(s.Start({"-m", *model_, "--kv-cache-memory", "16M", "--chat-template", testing::AssetPath(rel),
                       "--threads", "1"}))
      << s.Log();
  HttpResult by_chat = Post(s, "/tokenize", json{{"messages", messages}}.dump());
  HttpResult by_text = Post(s, "/tokenize", json{{"prompt", text}, {"add_special_tokens", false}}.dump());
  ASSERT_EQ(by_chat.status, 200) << by_chat.body;
  EXPECT_EQ(by_chat.Json()["tokens"], by_text.Json()["tokens"]);
  HttpResult r = Post(s, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 3}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(s.Stop(SIGTERM), 0) << s.Log();
}

}  // namespace
}  // namespace ferry
