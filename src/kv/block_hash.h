// BlockHash: the identity of a full KV block for prefix caching, a 64-bit hash chained over
// (parent block's hash, this block's token ids), so equal hashes mean equal whole prefixes.
#pragma once

#include <cstdint>
#include <span>

namespace ferry::kv {

using BlockHash = uint64_t;

// Hash of the (empty) prefix before the first block.
inline constexpr BlockHash kRootBlockHash = 0x6a09e667f3bcc909ull;

// splitmix64's finalizer: every input bit affects every output bit (avalanche), so a chain
// of these is a well-mixed 64-bit hash without an extra dependency.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Hash of a block holding `tokens` whose prefix before it hashes to `parent`.
inline BlockHash HashBlock(BlockHash parent, std::span<const int32_t> tokens) {
  uint64_t h = Mix64(parent ^ (0x9e3779b97f4a7c15ull * (tokens.size() + 1)));
  for (int32_t t : tokens) h = Mix64(h + 0x9e3779b97f4a7c15ull + static_cast<uint32_t>(t));
  return h;
}

}  // namespace ferry::kv
