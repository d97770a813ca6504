#!/usr/bin/env bash
# Set up, build, check formatting and run the whole test suite (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check_format.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
