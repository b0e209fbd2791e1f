// UTF-8 encoding and decoding of single code points, shared by the tokenizer, the template
// engine and the grammar compilers (which each used to carry a copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::utf8 {

// Appends the UTF-8 encoding of code point `cp` (<= 0x10FFFF; a surrogate is encoded like any
// other value: callers that must reject them check first).
void AppendCodepoint(std::string& out, uint32_t cp);

// Decodes the character at s[*pos] into *cp and moves *pos past it. Returns false, leaving *pos
// and *cp alone, at the end of s or when the bytes there are not well-formed UTF-8 (Unicode
// Table 3-7: no overlong form, surrogate, value above U+10FFFF, stray continuation byte or
// truncated sequence).
bool DecodeCodepoint(std::string_view s, size_t* pos, uint32_t* cp);

}  // namespace ferry::utf8
