#include "engine/prefix_tiers.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <vector>

#include "base/timer.h"
#include "core/median.h"
#include "engine/micro_batches.h"
#include "kv/block_file.h"
#include "model/scratch.h"

namespace ferry {

Status SplitBlockContent::Read(kv::BlockId block, uint8_t* out) const {
  FERRY_RETURN_IF_ERROR(own_.Read(block, out));
  return leader_.ReadBlock(block, out + own_.BlockBytes());
}

Status SplitBlockContent::Write(kv::BlockId block, const uint8_t* in) {
  FERRY_RETURN_IF_ERROR(own_.Write(block, in));
  return leader_.WriteBlock(block, in + own_.BlockBytes());
}

uint64_t PrefixTierFingerprint(uint64_t model_fingerprint, const ModelConfig& mc, const KvCacheTypes& types,
                               int32_t block_size, size_t block_bytes, int32_t ranks, int32_t stages) {
  const uint64_t parts[] = {model_fingerprint,
                            static_cast<uint64_t>(types.k),
                            static_cast<uint64_t>(types.v),
                            static_cast<uint64_t>(types.rotate_k),
                            static_cast<uint64_t>(block_size),
                            static_cast<uint64_t>(mc.n_layers),
                            static_cast<uint64_t>(mc.n_kv_heads),
                            static_cast<uint64_t>(mc.head_dim),
                            static_cast<uint64_t>(mc.n_vocab),
                            block_bytes,
                            static_cast<uint64_t>(ranks),
                            static_cast<uint64_t>(stages)};
  return kv::HashBytes({reinterpret_cast<const uint8_t*>(parts), sizeof(parts)}, 0x46455252594b56ull);
}

namespace {

// Seconds to read and verify one block file that is not in the page cache.
StatusOr<double> MeasureRead(const std::string& dir, size_t block_bytes) {
  std::vector<uint8_t> payload(block_bytes);
  std::iota(payload.begin(), payload.end(), uint8_t{0});
  const std::vector<uint8_t> file = kv::EncodeBlockFile(0, 0, payload);
  const std::string path = (std::filesystem::path(dir) / fmt::format(".probe.{}.tmp", getpid())).string();
  std::vector<double> times;
  std::vector<uint8_t> back(file.size());
  for (int rep = 0; rep < 5; ++rep) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return IoError("--prefix-cache-dir {}: cannot write a probe file", dir);
    const bool wrote = ::write(fd, file.data(), file.size()) == static_cast<ssize_t>(file.size());
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // read it back from the device, not memory
    ::close(fd);
    if (!wrote) {
      ::unlink(path.c_str());
      return IoError("--prefix-cache-dir {}: cannot write a probe file (disk full?)", dir);
    }
    Timer t;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const ssize_t n = fd >= 0 ? ::read(fd, back.data(), back.size()) : -1;
    if (fd >= 0) ::close(fd);
    const bool ok = n == static_cast<ssize_t>(back.size()) && kv::ParseBlockFile(back, 0, 0).ok();
    times.push_back(t.Seconds());
    if (!ok) {
      ::unlink(path.c_str());
      return IoError("--prefix-cache-dir {}: a probe file did not read back intact", dir);
    }
  }
  ::unlink(path.c_str());
  return Median(times);
}

}  // namespace

StatusOr<kv::DiskCostModel> MeasureDiskCost(const Model& model, PagedKvCache& cache, ThreadPool* pool,
                                            StepLeader* leader, size_t block_bytes, const std::string& dir,
                                            int32_t max_seq_len) {
  kv::DiskCostModel cost;
  FERRY_ASSIGN_OR_RETURN(cost.read_s, MeasureRead(dir, block_bytes));
  const int32_t bs = cache.block_size();
  // A deeper block attends over more keys: price block 0 and block `depth` to get the slope.
  const int32_t depth = std::max(0, std::min({cache.num_blocks() - 1, max_seq_len / bs - 1, 15}));
  std::vector<int32_t> table(static_cast<size_t>(depth) + 1);
  std::iota(table.begin(), table.end(), 0);
  StepPlan plan;  // what the followers run of each probe pass (over split ranks)
  plan.num_groups = cache.groups().num_groups();
  plan.block_tables.assign(static_cast<size_t>(plan.num_groups), table);
  for (int32_t g = 0; g < plan.num_groups; ++g) cache.SetBlockTable(0, table, g);
  std::vector<float> logits(static_cast<size_t>(model.config().n_vocab));
  ForwardScratch scratch;
  ForwardOptions fo;
  fo.scratch = &scratch;
  PipelinedForward pipelined;
  auto pass = [&](int32_t first, int32_t n) -> StatusOr<double> {
    plan.batch.Clear();
    for (int32_t p = first; p < first + n; ++p)
      plan.batch.Add((1 + p % 7) % model.config().n_vocab, p, 0, p + 1 == first + n);
    plan.micro_batch_cuts = {0, plan.batch.size()};
    Timer t;
    if (leader) FERRY_RETURN_IF_ERROR(leader->Step(plan));
    FERRY_RETURN_IF_ERROR(
        pipelined.Run(model, plan.batch, plan.micro_batch_cuts, cache, logits.data(), pool, fo));
    return t.Seconds();
  };
  std::vector<double> t0, td;
  for (int rep = 0; rep < 3; ++rep) {
    FERRY_ASSIGN_OR_RETURN(double s, pass(0, bs));
    t0.push_back(s);
  }
  cost.recompute_base_s = Median(t0);
  if (depth > 0) {
    if (depth > 1) FERRY_RETURN_IF_ERROR(pass(bs, (depth - 1) * bs).status());
    for (int rep = 0; rep < 3; ++rep) {
      FERRY_ASSIGN_OR_RETURN(double s, pass(depth * bs, bs));
      td.push_back(s);
    }
    cost.recompute_per_depth_s = std::max(0.0, (Median(td) - cost.recompute_base_s) / depth);
  }
  for (int32_t g = 0; g < plan.num_groups; ++g) cache.SetBlockTable(0, {}, g);
  // The passes recompute every layer; a tier file holds one group's, and the groups have as
  // many layers each (over pipeline stages too, whose layouts keep every group).
  cost.recompute_share = 1.0 / plan.num_groups;
  return cost;
}

}  // namespace ferry
