// DiskBlockTier: the prefix cache's optional disk tier, one file per KV block in a directory
// (kv/block_file.h: checksummed, fingerprinted), bounded in bytes and evicted least recently
// used by file. It outlives the process: a new tier opened on the same directory finds the
// blocks an earlier one wrote. Files are written to a temporary name and renamed, so a reader
// never sees a half-written file under a block's name; one that is damaged anyway (truncated,
// bit-flipped, another model's) is deleted with a warning when it is read, never used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "kv/ram_block_tier.h"

namespace ferry::kv {

struct DiskTierConfig {
  std::string dir;
  size_t capacity_bytes = 0;  // file bytes on disk at most
  uint64_t fingerprint = 0;   // model file + KV layout (EngineCore mixes it)
};

class DiskBlockTier {
 public:
  // Creates the directory if needed and indexes the block files already in it (most recently
  // modified = most recently used), deleting leftover temporary files and evicting down to the
  // capacity. Files are not read until used.
  static StatusOr<DiskBlockTier> Open(const DiskTierConfig& config);

  const DiskTierConfig& config() const { return config_; }
  size_t bytes() const { return bytes_; }  // file bytes indexed
  size_t size() const { return lru_.size(); }
  bool Contains(BlockHash hash) const;
  int64_t rejected() const { return rejected_; }  // damaged or foreign files deleted

  // Writes the block's file (replacing one of the same block), evicting old files to fit.
  // A write error (disk full, permissions) is returned; the tier then holds no file for it.
  Status Put(BlockHash hash, std::span<const uint8_t> payload);
  // The block's payload if its file is intact (and marks it most recently used, in the file's
  // mtime too, so the order survives restarts); null if absent, or damaged (deleted, warned).
  BlockBytes Get(BlockHash hash);
  // The file that holds (or would hold) `hash`.
  std::string PathFor(BlockHash hash) const;

 private:
  // Entries are keyed by file key (FileKey(fingerprint, hash), the name of the file): that is
  // all a directory listing at Open tells.
  struct Entry {
    uint64_t key;
    size_t file_bytes;
  };
  void Drop(uint64_t key, bool delete_file);
  void EvictToFit(size_t incoming);

  DiskTierConfig config_;
  size_t bytes_ = 0;
  int64_t rejected_ = 0;
  std::list<Entry> lru_;                                            // front: most recently used
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;  // by file key
};

}  // namespace ferry::kv
