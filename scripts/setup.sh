#!/usr/bin/env bash
# Installs what fusediff needs to build and test, from Debian packages: only what is missing (apt-get update
# runs only then), and silently when everything is already present. Idempotent; run as root or with sudo.
set -euo pipefail

packages=(
  cmake g++ make git
  libgtest-dev librapidcheck-dev          # GoogleTest, RapidCheck (rapidcheck/gtest.h)
  libboost-dev libmpfr-dev libgmp-dev     # Boost.Multiprecision with the MPFR backend
  libfmt-dev libfccp-dev                  # fmt, Fast C++ CSV Parser
  nlohmann-json3-dev libcli11-dev         # JSON, command line
  librandom123-dev                        # counter-based RNG (Philox)
  libssl-dev                              # SHA-256 of table files (libcrypto)
  clang libclang-rt-14-dev                # libFuzzer target (clang -fsanitize=fuzzer)
  python3 python3-mpmath                  # regenerating / cross-checking the golden activation values
  python3-yaml                            # parsing the Kubernetes example manifest (ctest examples.kubernetes)
  libssl-dev                              # SHA-256 (OpenSSL EVP) for sample-set identities and table digests
  chromium                                # headless rendering test of the HTML sign-off report
  libdnnl-dev ocl-icd-opencl-dev          # oneDNN fused path (its CMake config wants the OpenCL headers)
  libbenchmark-dev                        # Google Benchmark (bench/)
  python3-numpy python3-scipy             # bench/gate_numpy.py: the NumPy/SciPy baseline of the gate benchmark
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} > 0)); then
  sudo=""
  if [[ "$(id -u)" -ne 0 ]]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
