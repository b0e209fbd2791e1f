// ApiError: an HTTP error in OpenAI's shape,
// {"error": {"message", "type", "param", "code"}}, with the status it is sent with.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace ferry::server {

struct ApiError {
  ApiError(int status_, std::string message_, std::string param_ = "", std::string code_ = "")
      : status(status_), message(std::move(message_)), param(std::move(param_)), code(std::move(code_)) {}

  int status = 400;
  std::string message;
  std::string param;  // the offending request field ("" when none)
  // OpenAI's machine-readable `code`, which clients branch on: "context_length_exceeded",
  // "model_not_found", "invalid_type", ... ("" sends null; 401 is always "invalid_api_key").
  std::string code;

  // OpenAI's `type` for the status: invalid_request_error, authentication_error, ...
  const char* Type() const {
    switch (status) {
      case 401:
        return "authentication_error";
      case 404:
        return "not_found_error";
      case 413:
        return "request_too_large";
      case 503:
        return "service_unavailable_error";
      default:
        return status >= 500 ? "server_error" : "invalid_request_error";
    }
  }
  nlohmann::ordered_json ToJson() const {
    nlohmann::ordered_json e;
    e["message"] = message;
    e["type"] = Type();
    e["param"] = param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param);
    const std::string c = status == 401 && code.empty() ? "invalid_api_key" : code;
    e["code"] = c.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(c);
    return nlohmann::ordered_json{{"error", e}};
  }
};

inline ApiError BadRequest(std::string message, std::string param = "", std::string code = "") {
  return {400, std::move(message), std::move(param), std::move(code)};
}

// A field of the wrong JSON type: 400 as OpenAI and vLLM answer (not 422), code "invalid_type".
inline ApiError InvalidType(std::string message, std::string param) {
  return {400, std::move(message), std::move(param), "invalid_type"};
}

}  // namespace ferry::server
