// EmbeddingService: OpenAI's POST /v1/embeddings over the engine. Each input is one engine
// embedding request (prefill only; RequestOptions::pooling), all submitted together so the
// engine batches them with whatever else runs; the reply holds the pooled, L2-normalized
// vectors in input order.
#pragma once

#include <string>
#include <string_view>

#include "engine/pooling.h"
#include "server/completion_service.h"
#include "server/engine_client.h"
#include "tokenizer/tokenizer.h"

namespace ferry::server {

struct EmbeddingContext {
  std::string model_name;
  int32_t max_model_len = 0;
  int32_t n_vocab = 0;
  int32_t dim = 0;  // the embedding width (the model's hidden size)
  Pooling pooling = Pooling::kLast;
  const Tokenizer* tokenizer = nullptr;  // null: token-id inputs only
  EngineClient* engine = nullptr;
};

class EmbeddingService {
 public:
  explicit EmbeddingService(EmbeddingContext ctx) : ctx_(std::move(ctx)) {}
  Reply Embeddings(std::string_view body);

 private:
  EmbeddingContext ctx_;
};

// OpenAI's base64 encoding_format: the vector's little-endian float32 bytes in base64.
std::string EncodeFloatsBase64(const std::vector<float>& v);

}  // namespace ferry::server
