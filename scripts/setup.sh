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
  zlib1g-dev                              # results JSON: compressed per-code and per-draw texts
  clang libclang-rt-14-dev                # libFuzzer target (clang -fsanitize=fuzzer)
  python3 python3-mpmath                  # regenerating / cross-checking the golden activation values
  python3-yaml                            # parsing the Kubernetes example manifest (ctest examples.kubernetes)
  libssl-dev                              # SHA-256 (OpenSSL EVP) for sample-set identities and table digests
  chromium                                # headless rendering test of the HTML sign-off report
  libdnnl-dev ocl-icd-opencl-dev          # oneDNN fused path (its CMake config wants the OpenCL headers)
  libxnnpack-dev                          # XNNPACK fused paths (fused/xnnpack; its pthreadpool.h typedef is vendored)
  libbenchmark-dev                        # Google Benchmark (bench/)
  python3-numpy python3-scipy             # bench/gate_numpy.py: the NumPy/SciPy baseline of the gate benchmark
  libonnx-dev libprotobuf-dev             # ONNX files (export-onnx, bisect): ONNX 1.12 onnx-ml.proto, protobuf
  libeigen3-dev                           # Eigen (header only): float16 and bfloat16 tensors in harness/onnx
  python3-onnx                            # outside-built test models (tests/bisect/outside_models.py)
  libonnx-testdata                        # ONNX's backend test models and data (scripts/corpus.sh, ctest bisect.corpus_sample)
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

# ONNX Runtime for `fusediff bisect`: the npm package onnxruntime-node, pinned by the committed lockfile, into the
# git-ignored fused/onnxruntime/runner/node_modules (about 300 MB). --ignore-scripts: its postinstall would fetch
# GPU libraries from outside; the CPU library (bin/napi-v6/linux/x64/libonnxruntime.so.1) ships in the package.
# Node.js >= 18: the machine's node if it has one, else Debian's nodejs and npm.
runner="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/fused/onnxruntime/runner"
node_major() { node -e 'process.stdout.write(process.versions.node.split(".")[0])' 2>/dev/null || echo 0; }
if ! command -v node >/dev/null || ! command -v npm >/dev/null || (( $(node_major) < 18 )); then
  sudo=""
  if [[ "$(id -u)" -ne 0 ]]; then sudo="sudo"; fi
  echo "setup: installing nodejs npm" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
# npm ls fails when what is installed does not match package.json (another version, a missing package).
if [[ ! -f "$runner/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1" ]] ||
   ! (cd "$runner" && npm ls --omit=dev >/dev/null 2>&1); then
  echo "setup: npm ci --ignore-scripts in $runner" >&2
  (cd "$runner" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
fi
# ONNX Runtime's C API header for fusediff's in-process runtime (the library stays onnxruntime-node's): Debian has no
# onnxruntime package and onnxruntime-node ships no header, so it comes from the registry package that carries ONNX
# Runtime's own iOS framework (MIT, Microsoft), pinned by fused/onnxruntime/capi/package-lock.json (about 400 MB).
# Configure (cmake) after this: the build finds the header there.
capi="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/fused/onnxruntime/capi"
if [[ -z "$(find "$capi/node_modules" -name onnxruntime_c_api.h -print -quit 2>/dev/null)" ]] ||
   ! (cd "$capi" && npm ls --omit=dev >/dev/null 2>&1); then
  echo "setup: npm ci --ignore-scripts in $capi" >&2
  (cd "$capi" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
fi
