#include "kv/block_file.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace ferry::kv {
namespace {

void Put64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void Put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

uint64_t HashBytes(std::span<const uint8_t> bytes, uint64_t seed) {
  return XXH64(bytes.data(), bytes.size(), seed);
}

std::vector<uint8_t> EncodeBlockFile(uint64_t fingerprint, BlockHash hash, std::span<const uint8_t> payload) {
  std::vector<uint8_t> out;
  out.reserve(kBlockFileOverheadBytes + payload.size());
  Put32(out, kBlockFileMagic);
  Put32(out, kBlockFileVersion);
  Put64(out, fingerprint);
  Put64(out, hash);
  Put64(out, payload.size());
  out.insert(out.end(), payload.begin(), payload.end());
  Put64(out, HashBytes(out));
  return out;
}

StatusOr<std::span<const uint8_t>> ParseBlockFile(std::span<const uint8_t> file, uint64_t fingerprint,
                                                  BlockHash hash) {
  if (file.size() < kBlockFileOverheadBytes)
    return CorruptFileError("truncated: {} bytes, shorter than the {}-byte header and checksum", file.size(),
                            kBlockFileOverheadBytes);
  const uint8_t* p = file.data();
  if (Get32(p) != kBlockFileMagic) return CorruptFileError("not a Ferry KV block file (bad magic)");
  if (Get32(p + 4) != kBlockFileVersion)
    return CorruptFileError("block file version {}, this Ferry reads {}", Get32(p + 4), kBlockFileVersion);
  const uint64_t payload = Get64(p + 24);
  if (payload != file.size() - kBlockFileOverheadBytes)
    return CorruptFileError("truncated or padded: the header says {} payload bytes, the file holds {}",
                            payload, file.size() - kBlockFileOverheadBytes);
  const size_t body = file.size() - 8;
  if (HashBytes(file.first(body)) != Get64(p + body))
    return CorruptFileError("checksum mismatch (corrupt file)");
  if (Get64(p + 8) != fingerprint)
    return CorruptFileError(
        "written for another model or KV cache type (fingerprint {:016x}, expected {:016x})", Get64(p + 8),
        fingerprint);
  if (Get64(p + 16) != hash) return CorruptFileError("holds block {:016x}, not {:016x}", Get64(p + 16), hash);
  return file.subspan(kBlockFileHeaderBytes, payload);
}

StatusOr<uint64_t> FingerprintFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {  // a Hugging Face folder: every file in it, by name
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(path, ec))
      if (e.is_regular_file()) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    uint64_t h = files.size();
    for (const std::string& f : files) {
      FERRY_ASSIGN_OR_RETURN(uint64_t fh, FingerprintFile(f));
      h = Mix64(h ^ fh);
    }
    return h;
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return IoError("{}: cannot open the model file to fingerprint it", path);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  constexpr uint64_t kWindow = uint64_t{1} << 20;
  constexpr uint64_t kWindows = 16;
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, size);
  std::vector<char> buf(kWindow);
  const uint64_t stride = size <= kWindow * kWindows ? kWindow : (size - kWindow) / (kWindows - 1);
  for (uint64_t off = 0; off < size; off += stride) {
    const uint64_t n = std::min(kWindow, size - off);
    in.seekg(static_cast<std::streamoff>(off));
    in.read(buf.data(), static_cast<std::streamsize>(n));
    if (!in) {
      XXH64_freeState(st);
      return IoError("{}: read error while fingerprinting the model file", path);
    }
    XXH64_update(st, buf.data(), n);
  }
  const uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  return h;
}

}  // namespace ferry::kv
