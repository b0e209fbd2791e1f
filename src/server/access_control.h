// Who may call the server: the API key on /v1/* and CORS for browser pages of other origins.
// Both run before routing; a CORS preflight (OPTIONS) is answered before the key is checked,
// since browsers never send credentials with it.
#pragma once

#include <httplib.h>

#include <string>
#include <string_view>
#include <vector>

namespace ferry::server {

struct AccessConfig {
  std::string api_key;                       // non-empty: /v1/* need "Authorization: Bearer <key>"
  std::vector<std::string> allowed_origins;  // "*": any origin; empty: no CORS
};

// Equal strings, compared in time that depends on their lengths only (no early exit that
// would let a client find the API key byte by byte).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// Installs the pre-routing handler: CORS headers and preflights, then the API key (401).
void InstallAccessControl(httplib::Server& http, AccessConfig config);

}  // namespace ferry::server
