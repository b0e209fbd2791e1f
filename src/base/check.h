// FERRY_CHECK: internal invariants only (never user input). Aborts with file:line.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FERRY_CHECK(cond)                                                                  \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "FERRY_CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

#ifdef NDEBUG
#define FERRY_DCHECK(cond) \
  do {                     \
  } while (0)
#else
#define FERRY_DCHECK(cond) FERRY_CHECK(cond)
#endif
