// The fast-backend configurations every comparison test runs: each instruction set this
// CPU supports (generic is always there), single-threaded and with 3 threads (odd, more
// than this machine's cores, so chunking and split-KV paths run with uneven shares).
#pragma once

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "ops/reference_ops.h"

namespace loom::ops::testing {

struct Variant {
  std::string name;
  std::unique_ptr<Ops> ops;
};

inline std::vector<Variant>& fast_variants() {
  static std::vector<Variant> variants = [] {
    using backends::cpu::CpuIsa;
    std::vector<Variant> v;
    std::string skipped;
    for (CpuIsa isa : {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
      if (backends::cpu::kernel_table(isa) == nullptr) {
        skipped += " " + std::string(backends::cpu::isa_name(isa));
        continue;
      }
      for (int threads : {1, 3}) {
        backends::cpu::CpuOpsOptions o;
        o.num_threads = threads;
        o.isa = isa;
        auto ops = backends::cpu::make_cpu_ops(o);
        std::string name = ops->name();
        v.push_back({std::move(name), std::move(ops)});
      }
    }
    std::cout << "[ops] fast backend variants:";
    for (const auto& x : v) std::cout << " " << x.name;
    if (!skipped.empty()) std::cout << " (not supported by this CPU:" << skipped << ")";
    std::cout << "\n";
    return v;
  }();
  return variants;
}

inline Ops& reference() {
  static std::unique_ptr<Ops> ref = make_reference_ops();
  return *ref;
}

}  // namespace loom::ops::testing
