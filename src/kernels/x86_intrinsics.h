// <immintrin.h> for the ISA folders (through their *_util.h; nothing else in a TU may include
// <immintrin.h> before it). GCC 12's AVX-512 intrinsics pass `_mm512_undefined_ps()` (`__m512 __Y = __Y;`)
// as a pass-through operand, which -Werror=uninitialized rejects once inlined (GCC bug 105593);
// the warning is silenced for the header's own lines only, so Ferry's code keeps it.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // the same operands (_mm512_cvtph_ps, 512 -> 256 casts)
#include <immintrin.h>
#pragma GCC diagnostic pop
