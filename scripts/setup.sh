#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages. Idempotent: does
# nothing when everything is already installed.
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config git
      libpcre2-dev libutf8proc-dev libopenblas-dev nlohmann-json3-dev
      libgtest-dev libcli11-dev clang-format
      libjpeg62-turbo-dev libpng-dev libwebp-dev libgif-dev libexif-dev
      libavformat-dev libavcodec-dev libswscale-dev libavutil-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
