#pragma once

#include <CLI/CLI.hpp>

namespace loom::cli {

inline constexpr const char* kVersion = "0.1.0";

// Registers `loom generate`.
void add_generate_command(CLI::App& app);
// Registers `loom bench`.
void add_bench_command(CLI::App& app);
// Exit code set by the subcommand that ran.
int last_exit_code();
void set_exit_code(int code);

}  // namespace loom::cli
