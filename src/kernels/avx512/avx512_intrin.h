// <immintrin.h> for the AVX-512 folders (include it first, before any header that includes
// immintrin.h). GCC 12's AVX-512 intrinsics (_mm512_reduce_add_ps, the 512 -> 256 extracts)
// initialise their "undefined" operand from itself, which -W(maybe-)uninitialized flags at -O3
// (GCC PR 105593); the warning is silenced for the header's own lines only.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
