// Every (template, conversation) in chat-templates/goldens.jsonl renders byte for byte as
// transformers' apply_chat_template did, or fails where it failed; prints a per-template report.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include "template/chat_template.h"
#include "test_util.h"

namespace ferry {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// strftime_now() was fixed to 2026-11-29 12:00:00 when the goldens were made.
ChatRenderOptions GoldenOptions() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 10;
  tm.tm_mday = 29;
  tm.tm_hour = 12;
  tm.tm_wday = 0;   // a Sunday
  tm.tm_yday = 332;
  ChatRenderOptions o;
  o.now = tm;
  return o;
}

// First differing byte, with context, for a readable failure.
std::string Quote(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string FirstDiff(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  size_t from = i > 40 ? i - 40 : 0;
  return "first difference at byte " + std::to_string(i) + "\n  want: " + Quote(want.substr(from, 100)) +
         "\n  got:  " + Quote(got.substr(from, 100));
}

TEST(ChatTemplateGoldens, AllTemplatesMatchTransformers) {
  FERRY_REQUIRE_ASSET("chat-templates/goldens.jsonl");
  const std::string dir = testing::AssetPath("chat-templates/");
  std::ifstream in(dir + "goldens.jsonl");
  std::map<std::string, std::pair<int, int>> per_template;  // name -> (passed, total)
  std::map<std::string, StatusOr<ChatTemplate>> parsed;
  std::vector<std::string> failures;
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto g = nlohmann::ordered_json::parse(line);
    const std::string name = g["template"].get<std::string>();
    const std::string id = name + " / " + g["case"].get<std::string>();
    ++cases;
    auto it = parsed.find(name);
    if (it == parsed.end()) it = parsed.emplace(name, ChatTemplate::Parse(ReadFile(dir + name + ".jinja"))).first;
    auto& counts = per_template[name];
    ++counts.second;
    if (!it->second.ok()) {
      failures.push_back(id + ": parse failed: " + it->second.status().ToString());
      continue;
    }
    ChatRequest req;
    req.messages = g["messages"];
    req.add_generation_prompt = g["add_generation_prompt"].get<bool>();
    req.bos_token = g["bos_token"].get<std::string>();
    req.eos_token = g["eos_token"].get<std::string>();
    auto out = it->second->Render(req, GoldenOptions());
    if (g.contains("error")) {
      const std::string want = g["error"].get<std::string>();
      if (out.ok()) {
        failures.push_back(id + ": expected error '" + want + "', rendered " + Quote(*out));
      } else if (out.status().message() != want) {
        failures.push_back(id + ": expected error '" + want + "', got '" + out.status().message() + "'");
      } else {
        ++counts.first;
      }
      continue;
    }
    const std::string want = g["expected"].get<std::string>();
    if (!out.ok()) {
      failures.push_back(id + ": render failed: " + out.status().ToString());
    } else if (*out != want) {
      failures.push_back(id + ": mismatch, " + FirstDiff(want, *out));
    } else {
      ++counts.first;
    }
  }
  int passed_templates = 0;
  for (const auto& [name, c] : per_template) {
    std::printf("[template] %s.jinja %d/%d%s\n", name.c_str(), c.first, c.second, c.first == c.second ? "" : "  FAIL");
    passed_templates += c.first == c.second;
  }
  std::printf("[template] %d/%zu templates, %d cases\n", passed_templates, per_template.size(), cases);
  for (const auto& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(cases, 316);
  EXPECT_EQ(per_template.size(), 79u);
}

}  // namespace
}  // namespace ferry
