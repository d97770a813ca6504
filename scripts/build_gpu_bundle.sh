#!/usr/bin/env bash
# Builds the CUDA binaries for sm_90a here and gathers them, with the shared libraries the
# device machine lacks (OpenBLAS, PCRE2, utf8proc, the image codecs and their runtimes; videos are
# off in this build, LOOM_VIDEO=OFF, as ffmpeg's dependencies would not fit the transfer), into .devrun/ for a
# device call (tools/device/gpu_run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real -DLOOM_VIDEO=OFF >/dev/null
cmake --build build-gpu -j "$(nproc)" --target loom qwen_cuda_test vl_cuda_test $(cd build-gpu && ninja -t targets all | grep -oE '^cuda[a-z_]*_(test|bench)' | sort -u | tr '\n' ' ')
rm -rf .devrun && mkdir -p .devrun/bin .devrun/lib
cp build-gpu/loom .devrun/bin/
find build-gpu/tests -type f \( -name '*_test' -o -name '*_bench' \) \( -path '*cuda*' -o -name 'vl_cuda_test' \) -exec cp {} .devrun/bin/ \;
for lib in $(ldd build-gpu/loom | awk '/=>/ {print $3}' | grep -E 'openblas|gfortran|quadmath|pcre2|utf8proc|jpeg|png16|webp|sharpyuv|gif|exif'); do
  cp -L "$lib" .devrun/lib/
done
pwd > .devrun/source_dir
grep -qx '/.devrun/' .git/info/exclude 2>/dev/null || echo '/.devrun/' >> .git/info/exclude
du -sh .devrun
