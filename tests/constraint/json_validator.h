// An independent JSON Schema validator for the tests (the keywords the compiler supports,
// implemented from the spec's semantics over parsed values), and a generator of random
// instances around a schema (valid ones and near misses).
#pragma once

#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>

namespace ferry::constraint::testing {

using Json = nlohmann::ordered_json;

size_t CodepointCount(const std::string& s);
bool ValidFormat(const std::string& format, const std::string& s);
bool Validate(const Json& schema, const Json& value, const Json& root);

class InstanceGenerator {
 public:
  InstanceGenerator(const Json& root, uint32_t seed) : root_(root), rng_(seed) {}
  Json Generate(const Json& schema, int depth = 0);

 private:
  Json RandomValue(int depth);
  Json GenerateType(const Json& schema, const std::string& type, int depth);
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  std::string RandomString(int len);

  const Json& root_;
  std::mt19937 rng_;
};

}  // namespace ferry::constraint::testing
