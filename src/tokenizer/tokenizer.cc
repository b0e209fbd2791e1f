#include "tokenizer/tokenizer.h"

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace ferry {

StatusOr<Tokenizer> Tokenizer::FromMetadata(const Metadata& md) {
  const MetaValue* model = md.Find("tokenizer.ggml.model");
  if (!model) return NotFoundError("tokenizer.ggml.model is missing: the file names no tokenizer");
  if (model->type != MetaValue::Type::kString) {
    return CorruptFileError("tokenizer.ggml.model is not a string");
  }
  if (model->s == "llama") {
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<TokenizerImpl> impl, CreateSpmTokenizer(md));
    return Tokenizer(std::move(impl));
  }
  if (model->s == "gpt2") {
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<TokenizerImpl> impl, CreateBpeTokenizer(md));
    return Tokenizer(std::move(impl));
  }
  if (model->s == "bert") {
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<TokenizerImpl> impl, CreateWordPieceTokenizer(md));
    return Tokenizer(std::move(impl));
  }
  if (model->s == "t5" || model->s == "rwkv" || model->s == "plamo2") {
    return UnsupportedError("tokenizer model '{}' is not supported (llama, gpt2 and bert are)",
                            model->s);
  }
  return UnsupportedError("unknown tokenizer model '{}'", model->s);
}

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return impl_->Encode(text, add_special, parse_special);
}

std::string Tokenizer::TokenToPiece(int32_t id, bool render_special) const {
  if (!impl_->vocab().IsValidId(id)) return std::string();
  return impl_->TokenToPiece(id, render_special);
}

std::string Tokenizer::Decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += TokenToPiece(id, render_special);
  return out;
}

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  if (!impl_->vocab().IsValidId(id)) return kEmpty;
  return impl_->vocab().token(id).text;
}

TokenType Tokenizer::GetTokenType(int32_t id) const {
  if (!impl_->vocab().IsValidId(id)) return TokenType::kUndefined;
  return impl_->vocab().token(id).type;
}

float Tokenizer::TokenScore(int32_t id) const {
  if (!impl_->vocab().IsValidId(id)) return 0.0f;
  return impl_->vocab().token(id).score;
}

int32_t Tokenizer::TokenId(std::string_view text) const { return impl_->vocab().Find(text); }

int32_t Tokenizer::n_vocab() const { return impl_->vocab().size(); }
int32_t Tokenizer::bos_id() const { return impl_->vocab().bos(); }
int32_t Tokenizer::eos_id() const { return impl_->vocab().eos(); }
int32_t Tokenizer::eot_id() const { return impl_->vocab().eot(); }
int32_t Tokenizer::unk_id() const { return impl_->vocab().unk(); }
int32_t Tokenizer::pad_id() const { return impl_->vocab().pad(); }
bool Tokenizer::add_bos() const { return impl_->vocab().add_bos(); }
bool Tokenizer::add_eos() const { return impl_->vocab().add_eos(); }
bool Tokenizer::add_space_prefix() const { return impl_->vocab().add_space_prefix(); }
bool Tokenizer::IsEog(int32_t id) const { return impl_->vocab().IsEog(id); }
const std::string& Tokenizer::model_name() const { return impl_->model_name(); }

std::string IncrementalDetokenizer::Push(int32_t id) {
  pending_ += tok_->TokenToPiece(id, render_special_);
  std::string out;
  size_t i = 0;
  const std::string_view p = pending_;
  while (i < p.size()) {
    utf8::Seq q = utf8::Inspect(p.substr(i));
    if (q.state == utf8::SeqState::kTruncated) break;  // wait for the rest of the character
    if (q.state == utf8::SeqState::kComplete) {
      out.append(p.substr(i, q.len));
    } else {
      out.append(utf8::kReplacement);
    }
    i += q.len;
  }
  pending_.erase(0, i);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out = utf8::Sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace ferry
