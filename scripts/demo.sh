#!/usr/bin/env bash
# The main job: set up, build, and run the bundled default model on the CPU.
# Until the trained demo model lands, that is the tiny random Qwen3 checkpoint from the test
# fixtures: it shows the whole path (template, tokenizer, decoder, sampler, streaming) working,
# and its words are random.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
model=tests/fixtures/models/qwen3-gqa-tiny
echo "== loom generate --prompt (streamed text) =="
build/loom generate --model "$model" --prompt "Hello! What can you do?" --max-tokens 24 --temperature 0
echo "== loom generate --request (OpenAI chat.completion JSON) =="
build/loom generate --model "$model" --request tests/fixtures/requests/demo.json
