#!/usr/bin/env bash
# Installs what zerosim needs on Debian 12, skipping what is already there. Run as root (or with
# sudo available). The CUDA toolkit with NCCL is optional and not installed here: the CUDA
# kernels and the GPU harness build when nvcc is found.
#
# clang and libclang-rt-14-dev are for the fuzz preset (docs/RELIABILITY.md): libFuzzer and
# clang's sanitizer runtimes live in libclang-rt-14-dev, which clang-14 only recommends, so it is
# named here (installs skip recommends). gcc's ASan/UBSan/TSan runtimes come with g++.
set -euo pipefail

packages=(build-essential cmake g++ git
          libboost-graph-dev libboost-program-options-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev googletest libbenchmark-dev
          libopenmpi-dev openmpi-bin python3 python3-matplotlib
          clang libclang-rt-14-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  echo "installing: ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
