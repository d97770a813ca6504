#!/usr/bin/env bash
# One device call: GPU tests, then `loom bench` and the transformers baseline on the same GPU.
#   gpu_run.sh        tests only
#   gpu_run.sh bench  + text prefill/decode (Qwen2.5-7B shapes, random weights)
#   gpu_run.sh vl     + image TTFT (Qwen2.5-VL-7B shapes, random weights, one 1280x720 JPEG)
# Binaries are built on the development machine (scripts/build_gpu_bundle.sh) and carried in
# .devrun/ with the shared libraries they need; the test binaries look for fixtures at the
# absolute path they were built in, so that path is linked to this checkout.
set -u
root=$(pwd)
export LD_LIBRARY_PATH=$root/.devrun/lib:${LD_LIBRARY_PATH:-}
mkdir -p "$(dirname "$(cat .devrun/source_dir)")"
ln -sfn "$root" "$(cat .devrun/source_dir)"
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
run_tests() {
  for t in "$@"; do
    name=$(basename "$t")
    timeout 150 "$t" --gtest_brief=1 > "$out/$name.log" 2>&1
    rc=$?
    line=$(grep -E "PASSED|FAILED  \] [0-9]+ test|SKIPPED" "$out/$name.log" | tr '\n' ' ' | cut -c1-200)
    echo "$name rc=$rc $line" | tee -a "$out/tests.txt"
  done
}
# The model-level GPU test first, the kernel suites after the benchmarks.
run_tests .devrun/bin/qwen_cuda_test
if [ "${1:-}" = "bench" ]; then
  python3 tools/bench/make_random_checkpoint.py --preset qwen2.5-7b --out /dev/shm/q7 | tee "$out/ckpt.txt"
  timeout 240 .devrun/bin/loom bench --model /dev/shm/q7 --device cuda --prompt-lens 128,1024,8192 \
      --batches 1,64 --context 1024 --decode-steps 32 --bandwidth-gbs 4230 --tflops 756 \
      --out "$out/loom_bench.json" 2>&1 | tee "$out/loom_bench.txt"
  timeout 300 python3 tools/bench/hf_baseline.py --preset qwen2.5-7b --prefill 8192 --decode-batches 1,64 \
      --context 1024 --decode-steps 32 --out "$out/hf_baseline.json" 2>&1 | grep -v Warning | tail -6 | tee "$out/hf.txt"
fi
if [ "${1:-}" = "vl" ]; then
  python3 tools/bench/make_random_checkpoint.py --preset qwen2.5-vl-7b --out /dev/shm/q7vl | tee "$out/ckpt_vl.txt"
  python3 tools/bench/make_vl_inputs.py --no-video --out /dev/shm/vlbench | tee "$out/vl_inputs.txt"
  timeout 240 .devrun/bin/loom bench --model /dev/shm/q7vl --device cuda --image /dev/shm/vlbench/image_1280x720.jpg \
      --reps 5 --tflops 756 --out "$out/loom_vl.json" 2>&1 | tee "$out/loom_vl.txt"
  timeout 300 python3 tools/bench/hf_baseline.py --vl-image /dev/shm/vlbench/image_1280x720.jpg --vl-model /dev/shm/q7vl \
      --reps 5 --out "$out/hf_vl.json" 2>&1 | grep -v Warning | tail -6 | tee "$out/hf_vl.txt"
fi
run_tests $(ls .devrun/bin/*_test | grep -v qwen_cuda_test)
