// `loom`: the command-line entry point. Subcommands live in their own files.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Loom: an inference engine for Qwen-family omni and vision-language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(loom::cli::kVersion));
  loom::cli::add_generate_command(app);
  loom::cli::add_bench_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return loom::cli::last_exit_code();
}
