// Kernel-table switching for tests: a scoped guard, so a test that forces an ISA never leaves
// the process-wide table changed for the tests after it.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "kernels/kernels.h"

namespace ferry::testing {

// Remembers the active table on construction and restores it on destruction; Set switches
// within the scope (false, and a test failure, if the CPU lacks the ISA).
class ScopedIsa {
 public:
  ScopedIsa() : prev_(kernels::ActiveIsa()) {}
  explicit ScopedIsa(kernels::Isa isa) : ScopedIsa() { Set(isa); }
  ~ScopedIsa() { kernels::ForceIsa(prev_); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

  bool Set(kernels::Isa isa) {
    const bool ok = kernels::ForceIsa(isa);
    EXPECT_TRUE(ok) << "this CPU lacks " << kernels::IsaName(isa);
    return ok;
  }

 private:
  kernels::Isa prev_;
};

// Every ISA table this CPU runs, scalar first. The first call names the tables it skips
// because the CPU lacks them, so a log shows what a green run did not cover.
inline std::vector<kernels::Isa> TestIsas() {
  static const bool reported = [] {
    for (int i = 0; i < kernels::kNumIsas; ++i) {
      const auto isa = static_cast<kernels::Isa>(i);
      if (!kernels::IsaSupported(isa))
        std::fprintf(stderr, "[ SKIPPED ISA ] %s: this CPU (%s) lacks it\n", kernels::IsaName(isa),
                     kernels::CpuModelName().c_str());
    }
    return true;
  }();
  (void)reported;
  return kernels::SupportedIsas();
}

}  // namespace ferry::testing
