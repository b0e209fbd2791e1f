# Writes the chat page as a C++ raw string literal: cmake -DIN=chat.html -DOUT=webui_page.h -P this.
file(READ ${IN} page)
string(FIND "${page}" ")ferry_page\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )ferry_page\"")
endif()
file(WRITE ${OUT} "// Generated from src/server/webui/chat.html by embed_page.cmake; do not edit.\n#pragma once\n\n#include <string_view>\n\nnamespace ferry::server {\n\ninline constexpr std::string_view kChatPageHtml = R\"ferry_page(${page})ferry_page\";\n\n}  // namespace ferry::server\n")
