#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace loom::core {

CheckFailure::CheckFailure(const char* file, int line, const char* expr) {
  stream_ << file << ":" << line << ": LOOM_CHECK(" << expr << ") failed: ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "%s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace loom::core
