// The avx2vnni table's own entries (the rest come from the table it extends: dispatch.cc).
#include "kernels/avx2vnni/avx2vnni.h"

namespace ferry::kernels::avx2vnni {

void Fill(internal::KernelTable& t) {
  // in-place dots
  FillKQuantDots(t);
}

}  // namespace ferry::kernels::avx2vnni
