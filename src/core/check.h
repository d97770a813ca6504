// LOOM_CHECK(cond) << "context";  aborts with file:line and the message when cond is false.
// For broken invariants only (bugs); user-caused errors are Status (core/status.h).
#pragma once

#include <sstream>

namespace loom::core {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* expr);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets `cond ? (void)0 : Voidify() & CheckFailure(...) << x` type-check.
struct CheckVoidify {
  void operator&(CheckFailure&) {}
  void operator&(CheckFailure&&) {}
};

}  // namespace loom::core

#define LOOM_CHECK(cond) \
  (cond) ? (void)0 : ::loom::core::CheckVoidify() & ::loom::core::CheckFailure(__FILE__, __LINE__, #cond)
