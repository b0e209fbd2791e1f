// ISA detection (cpuid via __builtin_cpu_supports), FERRY_ISA override and the per-ISA tables.
#include "kernels/dispatch.h"

#include <cpuid.h>
#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/check.h"
#include "kernels/avx2/avx2.h"
#include "kernels/avx2vnni/avx2vnni.h"
#include "kernels/avx512/avx512.h"
#include "kernels/avx512vnni/avx512vnni.h"
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
  set_dot(DType::kMXFP4, ref::DotMXFP4);
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
  ref::FillAttention(t);
  t.rms_norm = ref::RmsNorm;
  t.add_rms_norm = ref::AddRmsNorm;
  t.softmax = ref::Softmax;
  t.silu_mul = ref::SiluMul;
  t.gelu_tanh_mul = ref::GeluTanhMul;
  t.gelu_fp16_table_mul = ref::GeluFp16TableMul;
  t.softcap = ref::SoftCap;
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
  set_dot(DType::kMXFP4, avx2::DotMXFP4);
  set_dot(DType::kQ4_K, avx2::DotQ4_K);
  set_dot(DType::kQ5_K, avx2::DotQ5_K);
  set_dot(DType::kQ6_K, avx2::DotQ6_K);
  t.dot_tile[static_cast<int>(DType::kQ4_K)] = avx2::DotTileQ4_K;
  t.dot_tile[static_cast<int>(DType::kQ5_K)] = avx2::DotTileQ5_K;
  t.dot_tile[static_cast<int>(DType::kQ6_K)] = avx2::DotTileQ6_K;
  t.dot_rows[static_cast<int>(DType::kQ4_0)] = avx2::DotRowsQ4_0;
  t.dot_rows[static_cast<int>(DType::kQ8_0)] = avx2::DotRowsQ8_0;
  t.dot_rows[static_cast<int>(DType::kMXFP4)] = avx2::DotRowsMXFP4;
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
  avx2::FillAttention(t);
  t.rms_norm = avx2::RmsNorm;
  t.add_rms_norm = avx2::AddRmsNorm;
  t.softmax = avx2::Softmax;
  t.silu_mul = avx2::SiluMul;
  t.gelu_tanh_mul = avx2::GeluTanhMul;
  t.gelu_fp16_table_mul = avx2::GeluFp16TableMul;
  t.softcap = avx2::SoftCap;
  t.add = avx2::AddInPlace;
  t.quantize_i8 = avx2::QuantizeActInt8;
  t.dot_i8 = avx2::DotI8;
  t.dot_i8x4 = avx2::DotI8x4;
  t.packed_tile = avx2::PackedTile;
  t.read_sum = avx2::ReadSum;
  return t;
}

// The AVX-VNNI and AVX-512 tables start from the AVX2 one and replace what their ISA does
// better; an entry they leave alone is the AVX2 kernel, which those CPUs also run.
KernelTable MakeAvx2Vnni() {
  KernelTable t = MakeAvx2();
  t.isa = Isa::kAvx2Vnni;
  avx2vnni::Fill(t);
  return t;
}

KernelTable MakeAvx512() {
  KernelTable t = MakeAvx2();
  t.isa = Isa::kAvx512;
  avx512::Fill(t);
  return t;
}

KernelTable MakeAvx512Vnni() {
  KernelTable t = MakeAvx512();
  t.isa = Isa::kAvx512Vnni;
  avx512vnni::Fill(t);
  return t;
}

bool CpuHas(Isa isa) {
  __builtin_cpu_init();
  const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return avx2;
    case Isa::kAvx2Vnni:
      return avx2 && __builtin_cpu_supports("avxvnni");
    case Isa::kAvx512:
      return avx512;
    case Isa::kAvx512Vnni:
      return avx512 && __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

// Fastest first: what auto-selection picks from.
constexpr Isa kPreference[] = {Isa::kAvx512Vnni, Isa::kAvx512, Isa::kAvx2Vnni, Isa::kAvx2, Isa::kScalar};

Isa Best() {
  for (Isa isa : kPreference)
    if (CpuHas(isa)) return isa;
  return Isa::kScalar;
}

// FERRY_ISA -> the ISA it names; error text when unknown or not on this CPU.
std::string ParseIsaEnv(Isa* out) {
  const char* env = std::getenv("FERRY_ISA");
  if (!env || !*env || std::strcmp(env, "auto") == 0) {
    *out = Best();
    return "";
  }
  for (int i = 0; i < kNumIsas; ++i) {
    const Isa isa = static_cast<Isa>(i);
    if (std::strcmp(env, IsaName(isa)) != 0) continue;
    if (!CpuHas(isa)) {
      std::string have;
      for (Isa s : SupportedIsas()) have += std::string(have.empty() ? "" : ", ") + IsaName(s);
      return fmt::format(
          "FERRY_ISA={}: this CPU ({}) lacks {}; it runs: {} (unset FERRY_ISA to pick the best)", env,
          CpuModelName(), env, have);
    }
    *out = isa;
    return "";
  }
  return fmt::format("FERRY_ISA='{}' is not one of auto|scalar|avx2|avx2vnni|avx512|avx512vnni", env);
}

std::atomic<const KernelTable*> g_active{nullptr};

}  // namespace

const KernelTable& TableFor(Isa isa) {
  FERRY_CHECK(CpuHas(isa));  // callers check IsaSupported first
  static const KernelTable scalar = MakeScalar();
  switch (isa) {
    case Isa::kScalar:
      return scalar;
    case Isa::kAvx2: {
      static const KernelTable t = MakeAvx2();
      return t;
    }
    case Isa::kAvx2Vnni: {
      static const KernelTable t = MakeAvx2Vnni();
      return t;
    }
    case Isa::kAvx512: {
      static const KernelTable t = MakeAvx512();
      return t;
    }
    case Isa::kAvx512Vnni: {
      static const KernelTable t = MakeAvx512Vnni();
      return t;
    }
  }
  return scalar;
}

const KernelTable& Table() {
  const KernelTable* t = g_active.load(std::memory_order_acquire);
  if (t) return *t;
  Isa isa = Isa::kScalar;
  const std::string err = ParseIsaEnv(&isa);
  if (!err.empty()) {  // the ferry command reports this before any kernel runs (CheckIsaEnv)
    std::fprintf(stderr, "ferry: %s\n", err.c_str());
    std::exit(2);
  }
  const KernelTable* chosen = &TableFor(isa);
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
    case Isa::kAvx2Vnni:
      return "avx2vnni";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Vnni:
      return "avx512vnni";
  }
  return "unknown";
}

Isa ActiveIsa() {
  return internal::Table().isa;
}

bool IsaSupported(Isa isa) {
  return internal::CpuHas(isa);
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> v;
  for (int i = 0; i < kNumIsas; ++i)
    if (internal::CpuHas(static_cast<Isa>(i))) v.push_back(static_cast<Isa>(i));
  return v;
}

Isa BestSupportedIsa() {
  return internal::Best();
}

std::string CheckIsaEnv() {
  Isa isa;
  return internal::ParseIsaEnv(&isa);
}

bool ForceIsa(Isa isa) {
  if (!internal::CpuHas(isa)) return false;
  internal::g_active.store(&internal::TableFor(isa), std::memory_order_release);
  return true;
}

std::string CpuModelName() {
  unsigned int regs[12] = {};
  unsigned int max_ext = 0, b, c, d;
  if (!__get_cpuid(0x80000000u, &max_ext, &b, &c, &d) || max_ext < 0x80000004u) return "unknown";
  for (unsigned int i = 0; i < 3; ++i)
    __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
  std::string name(reinterpret_cast<const char*>(regs), sizeof(regs));
  name = name.c_str();  // drop the NUL padding
  const size_t first = name.find_first_not_of(' '), last = name.find_last_not_of(' ');
  return first == std::string::npos ? "unknown" : name.substr(first, last - first + 1);
}

}  // namespace ferry::kernels
