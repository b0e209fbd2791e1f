// Fuzzes the OpenAI request parser/validator (server/openai_schema): any body must give a
// request or an OpenAI error, never a crash, and accepted values must be in range.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/openai_schema.h"

namespace {

void CheckOptions(const ferry::RequestOptions& o) {
  const ferry::SamplingParams& s = o.sampling;
  if (o.n < 1 || o.max_tokens < 0 || !std::isfinite(s.temperature) || s.temperature < 0 || !(s.top_p > 0) ||
      s.top_p > 1 || s.min_p < 0 || s.min_p > 1 || s.top_k < 0)
    std::abort();  // the validator let an out-of-range value through
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto completion = ferry::server::ParseCompletionRequest(body);
  if (auto* r = std::get_if<ferry::server::CompletionRequest>(&completion)) CheckOptions(r->gen.options);
  auto chat = ferry::server::ParseChatCompletionRequest(body);
  if (auto* r = std::get_if<ferry::server::ChatCompletionRequest>(&chat)) CheckOptions(r->gen.options);
  return 0;
}
