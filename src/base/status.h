// Status / StatusOr: the error regime for anything a user, a file or a socket can cause.
// Internal invariants use FERRY_CHECK (check.h) instead; kernels never fail.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ferry {

// One error enum for the whole engine; the server maps it to HTTP codes.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad user input (CLI flag, request field)
  kNotFound,           // missing file, key or tensor
  kCorruptFile,        // bytes on disk violate the format
  kUnsupported,        // valid but not implemented (e.g. an unknown tensor type)
  kOutOfRange,         // prompt longer than the context, index past the end
  kResourceExhausted,  // out of memory / KV blocks
  kIoError,            // open/read/mmap failed
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corrupt file: <message>"
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Helpers taking fmt-style arguments: InvalidArgument("bad --ctx {}", n).
#define FERRY_DEFINE_STATUS_HELPER(Name, Code)                                       \
  template <typename... Args>                                                        \
  Status Name(fmt::format_string<Args...> f, Args&&... args) {                       \
    return Status(StatusCode::Code, fmt::format(f, std::forward<Args>(args)...));    \
  }
FERRY_DEFINE_STATUS_HELPER(InvalidArgumentError, kInvalidArgument)
FERRY_DEFINE_STATUS_HELPER(NotFoundError, kNotFound)
FERRY_DEFINE_STATUS_HELPER(CorruptFileError, kCorruptFile)
FERRY_DEFINE_STATUS_HELPER(UnsupportedError, kUnsupported)
FERRY_DEFINE_STATUS_HELPER(OutOfRangeError, kOutOfRange)
FERRY_DEFINE_STATUS_HELPER(ResourceExhaustedError, kResourceExhausted)
FERRY_DEFINE_STATUS_HELPER(IoError, kIoError)
FERRY_DEFINE_STATUS_HELPER(InternalError, kInternal)
#undef FERRY_DEFINE_STATUS_HELPER

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : v_(status) {}  // NOLINT: implicit by design
  StatusOr(Status&& status) : v_(std::move(status)) {}
  StatusOr(const T& value) : v_(value) {}
  StatusOr(T&& value) : v_(std::move(value)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace ferry

#define FERRY_STATUS_CONCAT_INNER(a, b) a##b
#define FERRY_STATUS_CONCAT(a, b) FERRY_STATUS_CONCAT_INNER(a, b)

#define FERRY_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::ferry::Status _ferry_st = (expr);          \
    if (!_ferry_st.ok()) return _ferry_st;       \
  } while (0)

#define FERRY_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

// FERRY_ASSIGN_OR_RETURN(auto x, MakeX());
#define FERRY_ASSIGN_OR_RETURN(lhs, expr) \
  FERRY_ASSIGN_OR_RETURN_IMPL(FERRY_STATUS_CONCAT(_ferry_or_, __LINE__), lhs, expr)
