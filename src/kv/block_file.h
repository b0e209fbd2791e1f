// BlockFile: the on-disk form of one KV block of the prefix cache's disk tier, and the model
// fingerprint that keys it. A file is
//   magic "FKVB" u32 | version u32 | fingerprint u64 | block hash u64 | payload bytes u64 |
//   payload | xxh64 of everything before it u64          (little-endian)
// so a truncated, bit-flipped or foreign (other model, other KV types) file is recognised
// from its own bytes and never trusted.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "kv/block_hash.h"

namespace ferry::kv {

inline constexpr uint32_t kBlockFileMagic = 0x42564b46;  // "FKVB"
inline constexpr uint32_t kBlockFileVersion = 1;
inline constexpr size_t kBlockFileHeaderBytes = 32;
inline constexpr size_t kBlockFileOverheadBytes = kBlockFileHeaderBytes + 8;  // header + checksum

// The whole file for `payload` (a block's K/V bytes) under (fingerprint, hash).
std::vector<uint8_t> EncodeBlockFile(uint64_t fingerprint, BlockHash hash, std::span<const uint8_t> payload);

// The payload of `file` if it is a complete, intact block file for exactly (fingerprint, hash);
// otherwise an error saying what is wrong (truncated, bad magic/version, checksum, foreign).
StatusOr<std::span<const uint8_t>> ParseBlockFile(std::span<const uint8_t> file, uint64_t fingerprint,
                                                  BlockHash hash);

// A fingerprint of a model file's contents: its size and xxh64 over up to 16 evenly spaced
// 1 MiB windows (the whole file when it is smaller), so a different or rewritten model file
// gets another fingerprint without hashing gigabytes at start-up.
StatusOr<uint64_t> FingerprintFile(const std::string& path);

// xxh64 of bytes with a seed (for fingerprints mixed from several parts).
uint64_t HashBytes(std::span<const uint8_t> bytes, uint64_t seed = 0);

}  // namespace ferry::kv
