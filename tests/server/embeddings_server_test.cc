// POST /v1/embeddings on the suite's server: OpenAI's request and response shapes, the
// vectors' properties (unit norm, batch-invariant, identical inputs identical vectors) and
// every refused field.
#include <cmath>
#include <cstring>

#include "server_fixture.h"

namespace ferry {
namespace {

HttpResult Embed(const json& body) {
  return Post(*ServerTest::server(), "/v1/embeddings", body.dump());
}

std::vector<float> Vector(const json& item) {
  return item["embedding"].get<std::vector<float>>();
}

double Norm(const std::vector<float>& v) {
  double n = 0;
  for (float x : v) n += double{x} * x;
  return std::sqrt(n);
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], 1e-6f) << "dim " << j;
}

std::vector<float> DecodeBase64Floats(const std::string& s) {
  auto value = [](char c) -> uint32_t {
    if (c >= 'A' && c <= 'Z') return static_cast<uint32_t>(c - 'A');
    if (c >= 'a' && c <= 'z') return static_cast<uint32_t>(c - 'a' + 26);
    if (c >= '0' && c <= '9') return static_cast<uint32_t>(c - '0' + 52);
    return c == '+' ? 62u : 63u;
  };
  std::vector<unsigned char> bytes;
  for (size_t i = 0; i + 4 <= s.size(); i += 4) {
    uint32_t w = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      pad += s[i + k] == '=';
      w = (w << 6) | (s[i + k] == '=' ? 0 : value(s[i + k]));
    }
    for (int k = 0; k < 3 - pad; ++k) bytes.push_back(static_cast<unsigned char>(w >> (16 - 8 * k)));
  }
  std::vector<float> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t u = 0;
    for (int b = 0; b < 4; ++b)
      u |= uint32_t{bytes[4 * i + static_cast<size_t>(b)]} << (8 * b);  // little-endian
    std::memcpy(&out[i], &u, 4);
  }
  return out;
}

TEST_F(ServerTest, EmbeddingsOfAStringHaveOpenAiShapeAndUnitNorm) {
  HttpResult r = Embed({{"model", "tiny"}, {"input", "the quick brown fox"}, {"user", "u1"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.Json();
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][0]["index"], 0);
  const std::vector<float> v = Vector(j["data"][0]);
  ASSERT_GT(v.size(), 8u);
  EXPECT_NEAR(Norm(v), 1.0, 1e-5);
  HttpResult tok = Post(*server(), "/tokenize", json{{"prompt", "the quick brown fox"}}.dump());
  ASSERT_EQ(tok.status, 200);
  EXPECT_EQ(j["usage"]["prompt_tokens"], tok.Json()["count"]);
  EXPECT_EQ(j["usage"]["total_tokens"], tok.Json()["count"]);
  // dimensions equal to the model's width is the vector as it is.
  HttpResult same = Embed({{"input", "the quick brown fox"}, {"dimensions", v.size()}});
  ASSERT_EQ(same.status, 200) << same.body;
  EXPECT_EQ(Vector(same.Json()["data"][0]), v);
}

TEST_F(ServerTest, EmbeddingsAreBatchInvariantAndEqualForEqualInputs) {
  const std::string a = "once upon a time there was a tiny model";
  HttpResult alone = Embed({{"input", a}});
  ASSERT_EQ(alone.status, 200) << alone.body;
  HttpResult batch = Embed({{"input", {"something else entirely", a, "x", a}}});
  ASSERT_EQ(batch.status, 200) << batch.body;
  json d = batch.Json()["data"];
  ASSERT_EQ(d.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(d[i]["index"], i);
  ExpectNear(Vector(d[1]), Vector(alone.Json()["data"][0]));
  EXPECT_EQ(Vector(d[1]), Vector(d[3]));
  EXPECT_NE(Vector(d[0]), Vector(d[1]));
  EXPECT_NE(Vector(d[2]), Vector(d[1]));
  int64_t tokens = 0;
  for (const char* s : {"something else entirely", a.c_str(), "x", a.c_str()})
    tokens += Post(*server(), "/tokenize", json{{"prompt", s}}.dump()).Json()["count"].get<int64_t>();
  EXPECT_EQ(batch.Json()["usage"]["prompt_tokens"], tokens);
}

TEST_F(ServerTest, EmbeddingsOfTokenIdsEqualThoseOfTheirText) {
  const std::string text = "hello there";
  json ids = Post(*server(), "/tokenize", json{{"prompt", text}}.dump()).Json()["tokens"];
  HttpResult by_text = Embed({{"input", text}});
  HttpResult by_ids = Embed({{"input", ids}});
  HttpResult by_lists = Embed({{"input", {ids, json::array({1, 5, 9})}}});
  ASSERT_EQ(by_text.status, 200) << by_text.body;
  ASSERT_EQ(by_ids.status, 200) << by_ids.body;
  ASSERT_EQ(by_lists.status, 200) << by_lists.body;
  EXPECT_EQ(Vector(by_ids.Json()["data"][0]), Vector(by_text.Json()["data"][0]));
  ASSERT_EQ(by_lists.Json()["data"].size(), 2u);
  EXPECT_EQ(Vector(by_lists.Json()["data"][0]), Vector(by_text.Json()["data"][0]));
  EXPECT_EQ(by_lists.Json()["usage"]["prompt_tokens"], ids.size() + 3);
}

TEST_F(ServerTest, EmbeddingsInBase64AreTheFloatVectorsLittleEndianBytes) {
  HttpResult f = Embed({{"input", {"abc", "de"}}, {"encoding_format", "float"}});
  HttpResult b = Embed({{"input", {"abc", "de"}}, {"encoding_format", "base64"}});
  ASSERT_EQ(f.status, 200) << f.body;
  ASSERT_EQ(b.status, 200) << b.body;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(b.Json()["data"][i]["embedding"].is_string());
    EXPECT_EQ(DecodeBase64Floats(b.Json()["data"][i]["embedding"].get<std::string>()),
              Vector(f.Json()["data"][i]));
  }
}

TEST_F(ServerTest, EmbeddingsRefuseWhatTheyDoNotSupport) {
  ExpectError(Embed({{"input", "a"}, {"dimensions", 3}}), 400, "dimensions");
  ExpectError(Embed({{"input", "a"}, {"dimensions", "3"}}), 400, "dimensions");
  ExpectError(Embed({{"input", "a"}, {"encoding_format", "int8"}}), 400, "encoding_format");
  ExpectError(Embed({{"input", "a"}, {"normalize", false}}), 400, "normalize");  // not silently ignored
  ExpectError(Embed({{"input", "a"}, {"user", 5}}), 400, "user");
  ExpectError(Embed({{"model", "tiny"}}), 400, "input");
  ExpectError(Embed({{"input", json::array()}}), 400, "input");
  ExpectError(Embed({{"input", ""}}), 400, "input");
  ExpectError(Embed({{"input", {"a", ""}}}), 400, "input");
  ExpectError(Embed({{"input", {"a", 3}}}), 400, "input");
  ExpectError(Embed({{"input", {1.5, 2}}}), 400, "input");
  ExpectError(Embed({{"input", {{1, -2}}}}), 400, "input");
  ExpectError(Embed({{"input", {1, 100000000}}}), 400, "input");
  ExpectError(Embed({{"input", 7}}), 400, "input");
  HttpResult model = Embed({{"input", "a"}, {"model", "other"}});
  ExpectError(model, 404, "model");
  EXPECT_EQ(model.Json()["error"]["code"], "model_not_found");
  std::vector<int32_t> long_ids(600, 5);  // the suite's server holds 512 positions
  HttpResult too_long = Embed({{"input", long_ids}});
  ExpectError(too_long, 400, "input");
  EXPECT_EQ(too_long.Json()["error"]["code"], "context_length_exceeded");
  ExpectError(Post(*server(), "/v1/embeddings", "{not json"), 400);
}

TEST_F(ServerTest, PoolingFlagChoosesThePooling) {
  // The suite's server pools the last token (no pooling_type in the file); mean differs on
  // several tokens and agrees on one (mean, last and cls of one token are that token's state).
  ServerProcess s;
  ASSERT_TRUE(s.Start(
      {"-m", *model_, "--kv-cache-memory", "16M", "--threads", "1", "--pooling", "mean", "--api-key", "k"}))
      << s.Log();
  auto vec = [](const ServerProcess& server, const json& input, const httplib::Headers& h) {
    HttpResult r = Post(server, "/v1/embeddings", json{{"input", input}}.dump(), h);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? Vector(r.Json()["data"][0]) : std::vector<float>{};
  };
  const httplib::Headers key = {{"x-api-key", "k"}};  // Anthropic's header works everywhere
  EXPECT_NE(vec(s, "several tokens of text", key), vec(*server(), "several tokens of text", {}));
  ExpectNear(vec(s, json::array({7}), key), vec(*server(), json::array({7}), {}));
  EXPECT_EQ(Post(s, "/v1/embeddings", json{{"input", "x"}}.dump()).status, 401);
  EXPECT_EQ(s.Stop(SIGTERM), 0) << s.Log();
}

}  // namespace
}  // namespace ferry
