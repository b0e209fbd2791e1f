// ISA detection (cpuid via __builtin_cpu_supports), FERRY_ISA override and the per-ISA tables.
#include "kernels/dispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/check.h"
#include "base/log.h"
#include "kernels/avx2/avx2.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels {
namespace internal {
namespace {

KernelTable MakeScalar() {
  KernelTable t{};
  t.isa = Isa::kScalar;
  auto set_dot = [&](DType d, DotFn f) { t.dot[static_cast<int>(d)] = f; };
  set_dot(DType::kF32, ref::DotF32);
  set_dot(DType::kF16, ref::DotF16);
  set_dot(DType::kBF16, ref::DotBf16);
  set_dot(DType::kQ4_0, ref::DotQ4_0);
  set_dot(DType::kQ4_1, ref::DotQ4_1);
  set_dot(DType::kQ5_0, ref::DotQ5_0);
  set_dot(DType::kQ5_1, ref::DotQ5_1);
  set_dot(DType::kQ8_0, ref::DotQ8_0);
  set_dot(DType::kQ2_K, ref::DotQ2_K);
  set_dot(DType::kQ3_K, ref::DotQ3_K);
  set_dot(DType::kQ4_K, ref::DotQ4_K);
  set_dot(DType::kQ5_K, ref::DotQ5_K);
  set_dot(DType::kQ6_K, ref::DotQ6_K);
  auto set_q = [&](DType d, QuantizeFn f) { t.quantize_act[static_cast<int>(d)] = f; };
  set_q(DType::kF16, ref::QuantizeActF16);
  set_q(DType::kBF16, ref::QuantizeActBf16);
  set_q(DType::kQ8_0, ref::QuantizeActQ8_0);
  set_q(DType::kQ8_1, ref::QuantizeActQ8_1);
  set_q(DType::kQ8_K, ref::QuantizeActQ8_K);
  t.dot_f32 = ref::DotF32Plain;
  t.axpy = ref::Axpy;
  t.scale = ref::Scale;
  t.attn_scores = ref::AttnScores;
  t.attn_pv = ref::AttnPv;
  t.attn_softmax = ref::AttnSoftmax;
  t.rms_norm = ref::RmsNorm;
  t.add_rms_norm = ref::AddRmsNorm;
  t.softmax = ref::Softmax;
  t.silu_mul = ref::SiluMul;
  t.add = ref::AddInPlace;
  t.quantize_i8 = ref::QuantizeActInt8;
  t.dot_i8 = ref::DotI8;
  t.dot_i8x4 = ref::DotI8x4;
  t.packed_tile = ref::PackedTile;
  t.read_sum = ref::ReadSum;
  return t;
}

KernelTable MakeAvx2() {
  KernelTable t = MakeScalar();
  t.isa = Isa::kAvx2;
  auto set_dot = [&](DType d, DotFn f) { t.dot[static_cast<int>(d)] = f; };
  set_dot(DType::kF32, avx2::DotF32);
  set_dot(DType::kF16, avx2::DotF16);
  set_dot(DType::kBF16, avx2::DotBf16);
  set_dot(DType::kQ4_0, avx2::DotQ4_0);
  set_dot(DType::kQ4_1, avx2::DotQ4_1);
  set_dot(DType::kQ5_0, avx2::DotQ5_0);
  set_dot(DType::kQ5_1, avx2::DotQ5_1);
  set_dot(DType::kQ8_0, avx2::DotQ8_0);
  set_dot(DType::kQ4_K, avx2::DotQ4_K);
  set_dot(DType::kQ5_K, avx2::DotQ5_K);
  set_dot(DType::kQ6_K, avx2::DotQ6_K);
  t.dot_tile[static_cast<int>(DType::kQ4_K)] = avx2::DotTileQ4_K;
  t.dot_tile[static_cast<int>(DType::kQ5_K)] = avx2::DotTileQ5_K;
  t.dot_tile[static_cast<int>(DType::kQ6_K)] = avx2::DotTileQ6_K;
  // q2_K / q3_K keep the scalar dot (rare in practice).
  auto set_q = [&](DType d, QuantizeFn f) { t.quantize_act[static_cast<int>(d)] = f; };
  set_q(DType::kF16, avx2::QuantizeActF16);
  set_q(DType::kBF16, avx2::QuantizeActBf16);
  set_q(DType::kQ8_0, avx2::QuantizeActQ8_0);
  set_q(DType::kQ8_1, avx2::QuantizeActQ8_1);
  set_q(DType::kQ8_K, avx2::QuantizeActQ8_K);
  t.dot_f32 = avx2::DotF32Plain;
  t.axpy = avx2::Axpy;
  t.scale = avx2::Scale;
  t.attn_scores = avx2::AttnScores;
  t.attn_pv = avx2::AttnPv;
  t.attn_softmax = avx2::AttnSoftmax;
  t.rms_norm = avx2::RmsNorm;
  t.add_rms_norm = avx2::AddRmsNorm;
  t.softmax = avx2::Softmax;
  t.silu_mul = avx2::SiluMul;
  t.add = avx2::AddInPlace;
  t.quantize_i8 = avx2::QuantizeActInt8;
  t.dot_i8 = avx2::DotI8;
  t.dot_i8x4 = avx2::DotI8x4;
  t.packed_tile = avx2::PackedTile;
  t.read_sum = avx2::ReadSum;
  return t;
}

// CPU capability, ignoring what is implemented.
Isa CpuBestIsa() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  // F16C has no __builtin_cpu_supports name on older GCCs; every AVX2 x86 CPU has it.
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return Isa::kAvx512;
  return avx2 ? Isa::kAvx2 : Isa::kScalar;
}

// Highest ISA with its own table (avx512 is not implemented yet and runs the avx2 table; the
// W8A8 dots would use AVX-512 VNNI there, not written because the development VM lacks it).
constexpr Isa kBestImplemented = Isa::kAvx2;

Isa Clamp(Isa want) {
  Isa cpu = CpuBestIsa();
  Isa best = static_cast<int>(cpu) < static_cast<int>(kBestImplemented) ? cpu : kBestImplemented;
  return static_cast<int>(want) <= static_cast<int>(best) ? want : best;
}

Isa ChooseFromEnv() {
  const Isa best = Clamp(Isa::kAvx512);
  const char* env = std::getenv("FERRY_ISA");
  if (!env || !*env || std::strcmp(env, "auto") == 0) return best;
  Isa want;
  if (std::strcmp(env, "scalar") == 0) {
    want = Isa::kScalar;
  } else if (std::strcmp(env, "avx2") == 0) {
    want = Isa::kAvx2;
  } else if (std::strcmp(env, "avx512") == 0) {
    want = Isa::kAvx512;
  } else {
    Log(LogLevel::kWarn, "FERRY_ISA='{}' is not one of scalar|avx2|avx512; using {}", env, IsaName(best));
    return best;
  }
  const Isa got = Clamp(want);
  if (got != want)
    Log(LogLevel::kWarn, "FERRY_ISA={} unavailable on this CPU or not implemented; using {}", env,
        IsaName(got));
  return got;
}

std::atomic<const KernelTable*> g_active{nullptr};

}  // namespace

const KernelTable& TableFor(Isa isa) {
  static const KernelTable scalar = MakeScalar();
  static const KernelTable avx2 = MakeAvx2();
  switch (Clamp(isa)) {
    case Isa::kScalar:
      return scalar;
    default:
      return avx2;
  }
}

const KernelTable& Table() {
  const KernelTable* t = g_active.load(std::memory_order_acquire);
  if (t) return *t;
  const KernelTable* chosen = &TableFor(ChooseFromEnv());
  const KernelTable* expected = nullptr;
  g_active.compare_exchange_strong(expected, chosen, std::memory_order_acq_rel);
  return *g_active.load(std::memory_order_acquire);
}

}  // namespace internal

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

Isa ActiveIsa() {
  return internal::Table().isa;
}

Isa BestSupportedIsa() {
  return internal::Clamp(Isa::kAvx512);
}

bool ForceIsa(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(internal::CpuBestIsa())) return false;
  internal::g_active.store(&internal::TableFor(isa), std::memory_order_release);
  return true;
}

}  // namespace ferry::kernels
