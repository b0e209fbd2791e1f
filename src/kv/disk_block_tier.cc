#include "kv/disk_block_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "base/log.h"
#include "kv/block_file.h"

namespace ferry::kv {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSuffix = ".kvb";

// The file name's key: the block hash mixed with the fingerprint, so models sharing a
// directory never look up each other's files.
uint64_t FileKey(uint64_t fingerprint, BlockHash hash) {
  return Mix64(hash ^ Mix64(fingerprint + 0x9e3779b97f4a7c15ull));
}

}  // namespace

std::string DiskBlockTier::PathFor(BlockHash hash) const {
  return (fs::path(config_.dir) / fmt::format("{:016x}{}", FileKey(config_.fingerprint, hash), kSuffix))
      .string();
}

bool DiskBlockTier::Contains(BlockHash hash) const {
  return index_.count(FileKey(config_.fingerprint, hash)) != 0;
}

StatusOr<DiskBlockTier> DiskBlockTier::Open(const DiskTierConfig& config) {
  if (config.dir.empty()) return InvalidArgumentError("--prefix-cache-dir: empty directory name");
  std::error_code ec;
  fs::create_directories(config.dir, ec);
  if (ec || !fs::is_directory(config.dir))
    return IoError("--prefix-cache-dir {}: cannot create the directory ({})", config.dir, ec.message());
  DiskBlockTier t;
  t.config_ = config;
  struct Found {
    uint64_t key;
    size_t bytes;
    fs::file_time_type mtime;
  };
  std::vector<Found> found;
  for (const fs::directory_entry& e : fs::directory_iterator(config.dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 4 && name.ends_with(".tmp") && name[0] == '.') {  // a write cut short
      fs::remove(e.path(), ec);
      continue;
    }
    if (name.size() != 16 + std::strlen(kSuffix) || !name.ends_with(kSuffix) || !e.is_regular_file())
      continue;
    uint64_t key = 0;
    if (std::sscanf(name.c_str(), "%16lx", &key) != 1) continue;
    found.push_back({key, static_cast<size_t>(e.file_size(ec)), e.last_write_time(ec)});
  }
  if (ec) return IoError("--prefix-cache-dir {}: cannot list the directory ({})", config.dir, ec.message());
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime > b.mtime; });
  for (const Found& f : found) {
    t.lru_.push_back({f.key, f.bytes});
    t.index_.emplace(f.key, std::prev(t.lru_.end()));
    t.bytes_ += f.bytes;
  }
  t.EvictToFit(0);
  return t;
}

void DiskBlockTier::Drop(uint64_t key, bool delete_file) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  bytes_ -= it->second->file_bytes;
  lru_.erase(it->second);
  index_.erase(it);
  if (delete_file) {
    std::error_code ec;
    fs::remove(fs::path(config_.dir) / fmt::format("{:016x}{}", key, kSuffix), ec);
  }
}

void DiskBlockTier::EvictToFit(size_t incoming) {
  while (!lru_.empty() && bytes_ + incoming > config_.capacity_bytes) Drop(lru_.back().key, true);
}

Status DiskBlockTier::Put(BlockHash hash, std::span<const uint8_t> payload) {
  const uint64_t key = FileKey(config_.fingerprint, hash);
  Drop(key, false);  // rewritten below
  const std::vector<uint8_t> file = EncodeBlockFile(config_.fingerprint, hash, payload);
  if (file.size() > config_.capacity_bytes) return Status::Ok();  // never fits: nothing to keep
  EvictToFit(file.size());
  const std::string path = PathFor(hash);
  const std::string tmp =
      (fs::path(config_.dir) / fmt::format(".{:016x}.{}.tmp", key, static_cast<long>(getpid()))).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("{}: cannot create a prefix-cache file ({})", tmp, std::strerror(errno));
  size_t done = 0;
  while (done < file.size()) {
    const ssize_t n = ::write(fd, file.data() + done, file.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return IoError("{}: cannot write a prefix-cache file ({})", tmp, std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  // No fsync: a file the system loses in a crash comes back short or garbled, which the
  // checksum rejects; the rename only makes sure no reader sees a partial write.
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return IoError("{}: cannot store a prefix-cache file ({})", path, std::strerror(err));
  }
  lru_.push_front({key, file.size()});
  index_.emplace(key, lru_.begin());
  bytes_ += file.size();
  return Status::Ok();
}

BlockBytes DiskBlockTier::Get(BlockHash hash) {
  const uint64_t key = FileKey(config_.fingerprint, hash);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  const std::string path = PathFor(hash);
  std::ifstream in(path, std::ios::binary);
  if (!in) {  // removed behind our back: forget it
    Drop(key, false);
    return nullptr;
  }
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  StatusOr<std::span<const uint8_t>> payload = ParseBlockFile(file, config_.fingerprint, hash);
  if (!payload.ok()) {
    Log(LogLevel::kWarn, "prefix cache: deleting {}: {}", path, payload.status().message());
    ++rejected_;
    Drop(key, true);
    return nullptr;
  }
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // now: most recently used across restarts
  lru_.splice(lru_.begin(), lru_, it->second);
  return std::make_shared<const std::vector<uint8_t>>(payload->begin(), payload->end());
}

}  // namespace ferry::kv
