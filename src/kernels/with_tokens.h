// WithTokens: a micro-kernel's runtime token count becomes the template one its registers are
// sized by. Plain C++ (no intrinsics), so the ISA folders of every table share it.
#pragma once

#include <type_traits>

namespace ferry::kernels {

// Calls f(std::integral_constant<int, NT>{}) with NT = nt (1..4; more counts as 4).
// Capture by value in f: with its pointers captured by reference, GCC kept the inlined
// kernels' accumulators in memory (Packed/8/32 ran 1.6x slower).
template <typename F>
inline void WithTokens(int nt, F&& f) {
  switch (nt) {
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    case 3:
      f(std::integral_constant<int, 3>{});
      break;
    default:
      f(std::integral_constant<int, 4>{});
      break;
  }
}

}  // namespace ferry::kernels
