// Two tiers of errors (ENGINEERING.md §2): Status/Expected<T> for anything a user
// can cause; LOOM_CHECK (core/check.h) for broken invariants.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace loom::core {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // malformed request / config / arguments
  kNotFound,           // missing file, tensor, key
  kUnsupported,        // valid input we do not handle (architecture, dtype, feature)
  kCorruptData,        // truncated or inconsistent file contents
  kOutOfRange,         // too long, too many, out of bounds
  kResourceExhausted,  // out of memory for one request
  kIoError,            // OS-level read/write failure
  kInternal,           // unexpected failure that is not a user error
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: message"
  std::string to_string() const;
  // Returns a copy with "context: " prepended to the message.
  Status with_context(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string msg) {
  return {StatusCode::kInvalidArgument, std::move(msg)};
}
inline Status not_found(std::string msg) {
  return {StatusCode::kNotFound, std::move(msg)};
}
inline Status unsupported(std::string msg) {
  return {StatusCode::kUnsupported, std::move(msg)};
}
inline Status corrupt_data(std::string msg) {
  return {StatusCode::kCorruptData, std::move(msg)};
}
inline Status out_of_range(std::string msg) {
  return {StatusCode::kOutOfRange, std::move(msg)};
}
inline Status resource_exhausted(std::string msg) {
  return {StatusCode::kResourceExhausted, std::move(msg)};
}
inline Status io_error(std::string msg) {
  return {StatusCode::kIoError, std::move(msg)};
}
inline Status internal_error(std::string msg) {
  return {StatusCode::kInternal, std::move(msg)};
}

// A value or an error Status (a small std::expected stand-in; C++20 has none).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Expected(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace loom::core

#define LOOM_CONCAT_INNER_(a, b) a##b
#define LOOM_CONCAT_(a, b) LOOM_CONCAT_INNER_(a, b)

// Propagates a non-ok Status from an expression returning Status.
#define LOOM_RETURN_IF_ERROR(expr)          \
  do {                                      \
    ::loom::core::Status loom_st_ = (expr); \
    if (!loom_st_.ok()) return loom_st_;    \
  } while (0)

// `LOOM_ASSIGN_OR_RETURN(auto x, make_x());` unwraps an Expected or returns its Status.
#define LOOM_ASSIGN_OR_RETURN(lhs, expr) \
  LOOM_ASSIGN_OR_RETURN_IMPL_(LOOM_CONCAT_(loom_ex_, __LINE__), lhs, expr)
#define LOOM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
