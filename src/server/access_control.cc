#include "server/access_control.h"

#include <algorithm>
#include <memory>

#include "server/api_error.h"
#include "server/generation.h"

namespace ferry::server {
namespace {

void SendJsonError(const ApiError& e, httplib::Response& res) {
  res.status = e.status;
  res.set_content(Dump(e.ToJson()), "application/json");
}

// The Access-Control-Allow-Origin value for this request's Origin ("" when not allowed).
std::string AllowedOrigin(const AccessConfig& c, const httplib::Request& req) {
  const std::string origin = req.get_header_value("Origin");
  if (origin.empty() || c.allowed_origins.empty()) return "";
  for (const std::string& o : c.allowed_origins)
    if (o == "*" || o == origin) return o == "*" ? "*" : origin;
  return "";
}

}  // namespace

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

void InstallAccessControl(httplib::Server& http, AccessConfig config) {
  auto c = std::make_shared<const AccessConfig>(std::move(config));
  http.set_pre_routing_handler([c](const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    const std::string origin = AllowedOrigin(*c, req);
    if (!origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", origin);
      if (origin != "*") res.set_header("Vary", "Origin");
    }
    if (req.method == "OPTIONS" && req.has_header("Access-Control-Request-Method")) {
      if (origin.empty()) {
        SendJsonError({403, "CORS: the origin '" + req.get_header_value("Origin") +
                                "' is not allowed (the server's --allowed-origins)."},
                      res);
        return R::Handled;
      }
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      const std::string asked = req.get_header_value("Access-Control-Request-Headers");
      res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
      res.set_header("Access-Control-Max-Age", "600");
      return R::Handled;
    }
    if (c->api_key.empty() || req.path.rfind("/v1/", 0) != 0) return R::Unhandled;
    if (ConstantTimeEquals(req.get_header_value("Authorization"), "Bearer " + c->api_key))
      return R::Unhandled;
    // Anthropic's clients send the key as x-api-key (llama-server accepts both).
    if (req.has_header("x-api-key") && ConstantTimeEquals(req.get_header_value("x-api-key"), c->api_key))
      return R::Unhandled;
    SendJsonError(
        {401, "Incorrect API key provided: send 'Authorization: Bearer <key>' (the server's --api-key)."},
        res);
    return R::Handled;
  });
}

}  // namespace ferry::server
