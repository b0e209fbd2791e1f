// `ferry bench serve`: online serving benchmark against a running OpenAI-compatible server
// (ferry serve, vLLM, llama.cpp's server), measured as vLLM's benchmark_serving does: requests
// with random token-id prompts arrive as a Poisson process (or all at once), each streams its
// completion; TTFT, TPOT, ITL and end-to-end latency percentiles, request and token throughput
// and the error count, as text or one JSON object. With --multi-turn each "request" is a
// conversation whose turns re-send the growing history (prompt, reply, new user tokens), as
// chat clients do, and TTFT is reported per turn: the prefix cache's figure of merit.
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "base/timer.h"
#include "commands.h"
#include "engine/engine_metrics.h"
#include "length_range.h"

namespace ferry::cli {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct BenchServeOpts {
  std::string url = "http://127.0.0.1:8080";
  std::string endpoint = "/v1/completions";
  std::string model;  // empty: the first of /v1/models
  std::string api_key;
  int32_t num_requests = 64;
  std::string request_rate = "inf";
  std::string input_len = "128", output_len = "128";
  int32_t max_concurrency = 0;  // 0: unlimited
  int32_t vocab_lo = 10, vocab_hi = 500;
  uint64_t seed = 0;
  bool json_out = false;
  int32_t multi_turn = 1;  // turns per conversation (1: independent requests)
};

// One request's measurements (seconds).
struct Sample {
  bool ok = false;
  std::string error;
  int64_t prompt_tokens = 0, output_tokens = 0;
  double ttft = 0, e2e = 0;
  std::vector<double> itl;  // gaps between consecutive content chunks
  std::string text;         // the completion (multi-turn: the next turn's history)
};

Sample RunOne(const std::string& host, int port, const BenchServeOpts& o, const std::string& model,
              const std::vector<int32_t>& prompt, int32_t max_tokens) {
  Sample s;
  s.prompt_tokens = static_cast<int64_t>(prompt.size());
  httplib::Client client(host, port);
  client.set_read_timeout(3600);
  client.set_connection_timeout(60);
  httplib::Request req;
  req.method = "POST";
  req.path = o.endpoint;
  req.body = json{{"model", model},
                  {"prompt", prompt},
                  {"max_tokens", max_tokens},
                  {"ignore_eos", true},
                  {"temperature", 0},
                  {"stream", true},
                  {"stream_options", {{"include_usage", true}}}}
                 .dump();
  req.set_header("Content-Type", "application/json");
  if (!o.api_key.empty()) req.set_header("Authorization", "Bearer " + o.api_key);
  const Clock::time_point start = Clock::now();
  Clock::time_point last = start;
  bool first = true, done = false;
  std::string buffer;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buffer.append(data, len);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      event.erase(0, 6);
      if (event == "[DONE]") {
        done = true;
        continue;
      }
      json j = json::parse(event, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("usage") && j["usage"].is_object())
        s.output_tokens = j["usage"].value("completion_tokens", 0);
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const json& c = j["choices"][0];
      const bool has_text =
          c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty();
      if (!has_text) continue;
      s.text += c["text"].get<std::string>();
      const Clock::time_point now = Clock::now();
      if (first) {
        s.ttft = std::chrono::duration<double>(now - start).count();
        first = false;
      } else {
        s.itl.push_back(std::chrono::duration<double>(now - last).count());
      }
      last = now;
    }
    return true;
  };
  httplib::Result r = client.send(req);
  s.e2e = std::chrono::duration<double>(Clock::now() - start).count();
  if (!r) {
    s.error = "connection: " + httplib::to_string(r.error());
  } else if (r->status != 200) {
    s.error = "HTTP " + std::to_string(r->status);
  } else if (!done || first) {
    s.error = "the stream ended without [DONE] or without text";
  } else {
    s.ok = true;
  }
  return s;
}

// The server's token ids for `text` (POST /tokenize, no special tokens): a reply re-sent as
// history, as a chat client sends it back as text.
StatusOr<std::vector<int32_t>> Tokenize(const std::string& host, int port, const BenchServeOpts& o,
                                        const std::string& model, const std::string& text) {
  httplib::Client client(host, port);
  client.set_read_timeout(600);
  httplib::Headers h;
  if (!o.api_key.empty()) h.emplace("Authorization", "Bearer " + o.api_key);
  const std::string body = json{{"model", model}, {"prompt", text}, {"add_special_tokens", false}}.dump();
  httplib::Result r = client.Post("/tokenize", h, body, "application/json");
  if (!r || r->status != 200)
    return IoError("POST /tokenize failed (multi-turn needs it to re-send replies)");
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.contains("tokens") || !j["tokens"].is_array())
    return IoError("POST /tokenize: no 'tokens' in the reply");
  return j["tokens"].get<std::vector<int32_t>>();
}

int RunBenchServe(const BenchServeOpts& o) {
  // Debian's httplib sends without MSG_NOSIGNAL: a server that closes a connection mid-request
  // is a counted error, not the end of the benchmark.
  signal(SIGPIPE, SIG_IGN);
  auto in = ParseLengthRange(o.input_len, "--input-len");
  if (!in.ok()) return Fail(in.status());
  auto out = ParseLengthRange(o.output_len, "--output-len");
  if (!out.ok()) return Fail(out.status());
  double rate = std::numeric_limits<double>::infinity();
  if (o.request_rate != "inf") {
    try {
      rate = std::stod(o.request_rate);
    } catch (...) {
      rate = -1;
    }
    if (!(rate > 0))
      return Fail(
          InvalidArgumentError("--request-rate '{}': expected a positive number or inf", o.request_rate));
  }
  std::smatch m;
  const std::regex url_re(R"(^http://([^/:]+):(\d+)/?$)");
  if (!std::regex_match(o.url, m, url_re))
    return Fail(InvalidArgumentError("--url '{}': expected http://HOST:PORT", o.url));
  const std::string host = m[1].str();
  const int port = std::stoi(m[2].str());

  std::string model = o.model;
  if (model.empty()) {
    httplib::Client c(host, port);
    c.set_connection_timeout(30);
    httplib::Headers h;
    if (!o.api_key.empty()) h.emplace("Authorization", "Bearer " + o.api_key);
    httplib::Result r = c.Get("/v1/models", h);
    if (!r || r->status != 200) return Fail(IoError("{}: GET /v1/models failed; is the server up?", o.url));
    json j = json::parse(r->body, nullptr, false);
    if (j.is_discarded() || !j.contains("data") || j["data"].empty())
      return Fail(IoError("{}: /v1/models lists no model; pass --model", o.url));
    model = j["data"][0].value("id", "");
  }

  // The workload: lengths uniform in the ranges, prompt ids uniform in [vocab_lo, vocab_hi),
  // arrival gaps exponential with mean 1/rate (a Poisson process). Multi-turn: per conversation
  // and turn, a new user message of input-len tokens and a reply of output-len tokens.
  const int32_t turns = std::max(1, o.multi_turn);
  std::mt19937_64 rng(o.seed);
  auto uniform = [&](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
  std::exponential_distribution<double> gap(std::isinf(rate) ? 1.0 : rate);
  std::vector<std::vector<std::vector<int32_t>>> user(static_cast<size_t>(o.num_requests));  // [conv][turn]
  std::vector<std::vector<int32_t>> max_tokens(static_cast<size_t>(o.num_requests));         // [conv][turn]
  std::vector<double> arrivals;
  double t = 0;
  for (int32_t i = 0; i < o.num_requests; ++i) {
    for (int32_t k = 0; k < turns; ++k) {
      std::vector<int32_t> p(static_cast<size_t>(uniform(in->lo, in->hi)));
      for (int32_t& id : p) id = uniform(o.vocab_lo, o.vocab_hi - 1);
      user[static_cast<size_t>(i)].push_back(std::move(p));
      max_tokens[static_cast<size_t>(i)].push_back(uniform(out->lo, out->hi));
    }
    arrivals.push_back(t);
    if (!std::isinf(rate)) t += gap(rng);
  }

  // samples[conversation * turns + turn]; a conversation stops at its first failed turn.
  // --max-concurrency bounds requests in flight. Multi-turn conversations go in rounds, as users
  // who read each reply before writing: turn k + 1 of any conversation waits until every
  // conversation has had turn k, so the others' turns come between two turns of one conversation.
  std::vector<Sample> samples(static_cast<size_t>(o.num_requests) * static_cast<size_t>(turns));
  std::counting_semaphore<> slots(o.max_concurrency > 0 ? o.max_concurrency : o.num_requests);
  std::mutex round_mu;
  std::condition_variable round_cv;
  std::vector<int32_t> round_done(static_cast<size_t>(turns), 0);  // conversations past turn k
  auto finish_round = [&](size_t k) {
    std::lock_guard<std::mutex> l(round_mu);
    ++round_done[k];
    round_cv.notify_all();
  };
  std::vector<std::thread> workers;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < user.size(); ++i) {
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i])));
    if (turns == 1) slots.acquire();  // single requests: arrivals wait for a free slot
    workers.emplace_back([&, i] {
      std::vector<int32_t> history;
      size_t k = 0;
      for (; k < static_cast<size_t>(turns); ++k) {
        if (k > 0) {
          std::unique_lock<std::mutex> l(round_mu);
          round_cv.wait(l, [&] { return round_done[k - 1] == o.num_requests; });
        }
        if (turns > 1) slots.acquire();
        history.insert(history.end(), user[i][k].begin(), user[i][k].end());
        Sample& s = samples[i * static_cast<size_t>(turns) + k];
        s = RunOne(host, port, o, model, history, max_tokens[i][k]);
        if (turns > 1) slots.release();
        if (s.ok && k + 1 < static_cast<size_t>(turns)) {
          StatusOr<std::vector<int32_t>> reply = Tokenize(host, port, o, model, s.text);
          if (reply.ok()) {
            history.insert(history.end(), reply->begin(), reply->end());
          } else {
            s.ok = false;
            s.error = reply.status().message();
          }
        }
        finish_round(k);
        if (!s.ok) break;
      }
      for (size_t rest = k + 1; rest < static_cast<size_t>(turns); ++rest) {
        samples[i * static_cast<size_t>(turns) + rest].error = "an earlier turn failed";
        finish_round(rest);  // the others do not wait for turns that never come
      }
      if (turns == 1) slots.release();
    });
  }
  for (std::thread& w : workers) w.join();
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();

  int64_t completed = 0, errors = 0, in_tokens = 0, out_tokens = 0;
  std::vector<double> ttft, tpot, itl, e2e;
  std::string first_error;
  for (const Sample& s : samples) {
    if (!s.ok) {
      ++errors;
      if (first_error.empty()) first_error = s.error;
      continue;
    }
    ++completed;
    in_tokens += s.prompt_tokens;
    out_tokens += s.output_tokens;
    ttft.push_back(s.ttft * 1e3);
    e2e.push_back(s.e2e * 1e3);
    if (s.output_tokens > 1)
      tpot.push_back((s.e2e - s.ttft) / static_cast<double>(s.output_tokens - 1) * 1e3);
    for (double x : s.itl) itl.push_back(x * 1e3);
  }
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  };
  json j;
  j["model"] = model;
  if (turns > 1) {
    j["conversations"] = o.num_requests;
    j["turns"] = turns;
  }
  j["request_rate"] = std::isinf(rate) ? json("inf") : json(rate);
  j["max_concurrency"] = o.max_concurrency;
  j["num_requests"] = static_cast<int64_t>(samples.size());
  j["completed"] = completed;
  j["errors"] = errors;
  if (!first_error.empty()) j["first_error"] = first_error;
  j["duration_s"] = duration;
  j["total_input_tokens"] = in_tokens;
  j["total_output_tokens"] = out_tokens;
  j["request_throughput"] = completed / duration;
  j["output_throughput"] = out_tokens / duration;
  j["total_token_throughput"] = (in_tokens + out_tokens) / duration;
  for (auto [name, v] : {std::pair<const char*, std::vector<double>*>{"ttft", &ttft},
                         {"tpot", &tpot},
                         {"itl", &itl},
                         {"e2el", &e2e}}) {
    j[fmt::format("mean_{}_ms", name)] = mean(*v);
    for (double p : {50.0, 90.0, 99.0})
      j[fmt::format("p{}_{}_ms", static_cast<int>(p), name)] = Percentile(*v, p);
  }
  if (turns > 1) {  // TTFT per turn: turn >= 2 re-sends a history the prefix cache may hold
    json per_turn = json::array();
    std::vector<double> later;
    for (int32_t k = 0; k < turns; ++k) {
      std::vector<double> tt;
      double prompt_sum = 0;
      for (int32_t i = 0; i < o.num_requests; ++i) {
        const Sample& s =
            samples[static_cast<size_t>(i) * static_cast<size_t>(turns) + static_cast<size_t>(k)];
        if (!s.ok) continue;
        tt.push_back(s.ttft * 1e3);
        prompt_sum += static_cast<double>(s.prompt_tokens);
        if (k > 0) later.push_back(s.ttft * 1e3);
      }
      per_turn.push_back(
          {{"turn", k + 1},
           {"completed", tt.size()},
           {"mean_prompt_tokens", tt.empty() ? 0.0 : prompt_sum / static_cast<double>(tt.size())},
           {"mean_ttft_ms", mean(tt)},
           {"p50_ttft_ms", Percentile(tt, 50)},
           {"p90_ttft_ms", Percentile(tt, 90)}});
    }
    j["mean_ttft_turn_ge2_ms"] = mean(later);
    j["per_turn"] = per_turn;
  }
  if (o.json_out) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    for (const auto& [k, v] : j.items()) std::printf("%-24s %s\n", k.c_str(), v.dump().c_str());
  }
  return errors == 0 ? 0 : 1;
}

}  // namespace

Runner AddBenchServeCommand(CLI::App& bench) {
  auto o = std::make_shared<BenchServeOpts>();
  CLI::App* cmd =
      bench.add_subcommand("serve", "online serving benchmark against a running OpenAI-compatible server");
  cmd->add_option("--url", o->url, "server base URL, http://HOST:PORT")->capture_default_str();
  cmd->add_option("--endpoint", o->endpoint, "completions endpoint")->capture_default_str();
  cmd->add_option("--model", o->model, "model name (default: the first of /v1/models)");
  cmd->add_option("--api-key", o->api_key, "bearer token for the server");
  cmd->add_option("--num-requests", o->num_requests, "requests to send")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--request-rate", o->request_rate,
                  "mean arrivals per second (Poisson), or inf: all at once")
      ->capture_default_str();
  cmd->add_option("--input-len", o->input_len, "prompt tokens: N or MIN:MAX (uniform)")
      ->capture_default_str();
  cmd->add_option("--output-len", o->output_len, "output tokens: N or MIN:MAX (uniform; EOS ignored)")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", o->max_concurrency, "requests in flight at most (0: unlimited)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prompt-token-min", o->vocab_lo, "prompt ids are drawn from [MIN, MIN + 490)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "workload seed (lengths, prompts, arrivals)")->capture_default_str();
  cmd->add_option("--multi-turn", o->multi_turn,
                  "turns per conversation: --num-requests conversations, each turn re-sending the history "
                  "(prompt, reply, --input-len new tokens) and reported per turn")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json_out, "print one JSON object");
  return [o]() -> int {
    o->vocab_hi = o->vocab_lo + 490;
    return RunBenchServe(*o);
  };
}

}  // namespace ferry::cli
