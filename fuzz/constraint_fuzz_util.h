// Shared by the constraint fuzz targets: a compiled grammar is also run over bytes (the
// input's own), so the matcher is exercised on whatever the compiler accepted.
#pragma once

#include <string_view>

#include "constraint/grammar.h"
#include "constraint/stack_machine.h"

namespace ferry::constraint {

inline void RunCompiled(const StatusOr<Grammar>& g, std::string_view input) {
  if (!g.ok()) return;
  auto p = Lower(*g);
  if (!p.ok()) return;
  StackMachine m(&*p);
  int32_t s = m.Start();
  for (size_t i = 0; i < input.size() && i < 256 && s != StackMachine::kDead; ++i)
    s = m.Advance(s, static_cast<uint8_t>(input[i]));
}

}  // namespace ferry::constraint
