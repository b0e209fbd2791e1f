// SentencePiece tokenizer.model: a serialized sentencepiece_model.proto ModelProto, read with a
// small bounds-checked protobuf wire reader (no libprotobuf). Fields used:
//   ModelProto      1: pieces (repeated SentencePiece)  2: trainer_spec  3: normalizer_spec
//   SentencePiece   1: piece (string)  2: score (float)  3: type (enum, default NORMAL=1;
//                   NORMAL=1 UNKNOWN=2 CONTROL=3 USER_DEFINED=4 UNUSED=5 BYTE=6, as GGUF)
//   TrainerSpec     3: model_type (UNIGRAM=1 default, BPE=2, WORD=3, CHAR=4)
//                   35: byte_fallback  40: unk_id (0)  41: bos_id (1)  42: eos_id (2)  43: pad_id (-1)
//   NormalizerSpec  3: add_dummy_prefix (default true)
#include <cstring>
#include <string_view>

#include "tokenizer/loader_util.h"
#include "tokenizer/tokenizer.h"

namespace ferry {
namespace {

using tokenizer_internal::ReadWholeFile;
using tokenizer_internal::SpmVocabSpec;
using tokenizer_internal::ToMetadata;

// Protobuf wire reader over [data, data+size): every read checks the bounds.
class WireReader {
 public:
  explicit WireReader(std::string_view buf) : buf_(buf) {}
  bool done() const { return pos_ >= buf_.size(); }

  bool ReadVarint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= buf_.size()) return false;
      const auto b = static_cast<uint8_t>(buf_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;  // more than 10 bytes
  }
  bool ReadFixed32(uint32_t& v) {
    if (buf_.size() - pos_ < 4) return false;
    std::memcpy(&v, buf_.data() + pos_, 4);  // protobuf is little-endian, as are our targets
    pos_ += 4;
    return true;
  }
  bool ReadBytes(std::string_view& out) {
    uint64_t len;
    if (!ReadVarint(len) || len > buf_.size() - pos_) return false;
    out = buf_.substr(pos_, static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return true;
  }
  // Reads a tag: field number and wire type.
  bool ReadTag(uint32_t& field, uint32_t& wire) {
    uint64_t tag;
    if (!ReadVarint(tag)) return false;
    field = static_cast<uint32_t>(tag >> 3);
    wire = static_cast<uint32_t>(tag & 7);
    return field != 0;
  }
  bool Skip(uint32_t wire) {
    uint64_t v;
    uint32_t f32;
    std::string_view s;
    switch (wire) {
      case 0: return ReadVarint(v);
      case 1:
        if (buf_.size() - pos_ < 8) return false;
        pos_ += 8;
        return true;
      case 2: return ReadBytes(s);
      case 5: return ReadFixed32(f32);
      default: return false;  // groups (3, 4) and invalid types
    }
  }

 private:
  std::string_view buf_;
  size_t pos_ = 0;
};

struct Piece {
  std::string text;
  float score = 0;
  int32_t type = 1;
};

bool ParsePiece(std::string_view buf, Piece& p) {
  WireReader r(buf);
  uint32_t field, wire;
  while (!r.done()) {
    if (!r.ReadTag(field, wire)) return false;
    if (field == 1 && wire == 2) {
      std::string_view s;
      if (!r.ReadBytes(s)) return false;
      p.text.assign(s);
    } else if (field == 2 && wire == 5) {
      uint32_t bits;
      if (!r.ReadFixed32(bits)) return false;
      std::memcpy(&p.score, &bits, 4);
    } else if (field == 3 && wire == 0) {
      uint64_t v;
      if (!r.ReadVarint(v)) return false;
      p.type = static_cast<int32_t>(v);
    } else if (!r.Skip(wire)) {
      return false;
    }
  }
  return true;
}

struct TrainerSpec {
  int64_t model_type = 1;  // UNIGRAM
  bool byte_fallback = false;
  int64_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
};

bool ParseTrainerSpec(std::string_view buf, TrainerSpec& t) {
  WireReader r(buf);
  uint32_t field, wire;
  while (!r.done()) {
    if (!r.ReadTag(field, wire)) return false;
    uint64_t v = 0;
    if (wire == 0 && (field == 3 || field == 35 || (field >= 40 && field <= 43))) {
      if (!r.ReadVarint(v)) return false;
      // int32 fields are sign-extended to 64 bits on the wire.
      const auto sv = static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(v)));
      switch (field) {
        case 3: t.model_type = sv; break;
        case 35: t.byte_fallback = v != 0; break;
        case 40: t.unk_id = sv; break;
        case 41: t.bos_id = sv; break;
        case 42: t.eos_id = sv; break;
        case 43: t.pad_id = sv; break;
        default: break;
      }
    } else if (!r.Skip(wire)) {
      return false;
    }
  }
  return true;
}

bool ParseNormalizerSpec(std::string_view buf, bool& add_dummy_prefix) {
  WireReader r(buf);
  uint32_t field, wire;
  while (!r.done()) {
    if (!r.ReadTag(field, wire)) return false;
    if (field == 3 && wire == 0) {
      uint64_t v;
      if (!r.ReadVarint(v)) return false;
      add_dummy_prefix = v != 0;
    } else if (!r.Skip(wire)) {
      return false;
    }
  }
  return true;
}

const char* ModelTypeName(int64_t t) {
  switch (t) {
    case 1: return "unigram";
    case 2: return "bpe";
    case 3: return "word";
    case 4: return "char";
    default: return "unknown";
  }
}

}  // namespace

StatusOr<Metadata> LoadSentencePieceModel(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(std::string data, ReadWholeFile(path));
  std::vector<Piece> pieces;
  TrainerSpec trainer;
  bool add_dummy_prefix = true;
  WireReader r(data);
  uint32_t field, wire;
  while (!r.done()) {
    if (!r.ReadTag(field, wire)) return CorruptFileError("{}: bad protobuf tag", path);
    if (wire == 2 && field >= 1 && field <= 3) {
      std::string_view sub;
      if (!r.ReadBytes(sub)) return CorruptFileError("{}: field {} runs past the end", path, field);
      if (field == 1) {
        Piece p;
        if (!ParsePiece(sub, p)) return CorruptFileError("{}: bad piece {}", path, pieces.size());
        pieces.push_back(std::move(p));
      } else if (field == 2) {
        if (!ParseTrainerSpec(sub, trainer)) return CorruptFileError("{}: bad trainer_spec", path);
      } else {
        if (!ParseNormalizerSpec(sub, add_dummy_prefix)) {
          return CorruptFileError("{}: bad normalizer_spec", path);
        }
      }
    } else if (!r.Skip(wire)) {
      return CorruptFileError("{}: bad protobuf field {} (wire type {})", path, field, wire);
    }
  }
  if (pieces.empty()) return CorruptFileError("{}: no pieces (not a SentencePiece model?)", path);
  if (trainer.model_type != 2) {
    return UnsupportedError("{}: SentencePiece model type '{}' is not supported (only bpe)", path,
                            ModelTypeName(trainer.model_type));
  }

  SpmVocabSpec spec;
  const auto n = static_cast<int64_t>(pieces.size());
  for (Piece& p : pieces) {
    if (p.type < 1 || p.type > 6) {
      return CorruptFileError("{}: piece '{}' has unknown type {}", path, p.text, p.type);
    }
    spec.tokens.push_back(std::move(p.text));
    spec.scores.push_back(p.score);
    spec.types.push_back(p.type);
  }
  auto id_or_none = [n](int64_t id) { return id >= 0 && id < n ? static_cast<int32_t>(id) : -1; };
  spec.unk = id_or_none(trainer.unk_id);
  spec.bos = id_or_none(trainer.bos_id);
  spec.eos = id_or_none(trainer.eos_id);
  spec.pad = id_or_none(trainer.pad_id);
  spec.add_bos = spec.bos >= 0;
  spec.add_eos = false;
  spec.add_space_prefix = add_dummy_prefix;
  return ToMetadata(spec);
}

}  // namespace ferry
