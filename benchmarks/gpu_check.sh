#!/usr/bin/env bash
# A real GPU check, on a machine with an NVIDIA GPU and nvcc: build llama.cpp's CUDA backend for
# this GPU's architecture only (minutes, not the hour every architecture takes) into a fresh venv,
# then run benchmarks/gpu_check.py there: the bundled model with every layer on CUDA0, the
# per-device ledger against llama.cpp's CUDA0 / CUDA_Host buffers (target within 2%), and the
# predicted against the measured prefill and decode rates.
#
#   benchmarks/gpu_check.sh                 # the check; says "not run" and why without a GPU or nvcc
#   benchmarks/gpu_check.sh --cpu-smoke     # the Python side only, with this checkout's llama.cpp, no GPU
#   GPU_CHECK_VENV=DIR                      # where the venv goes (default /tmp/workbench-gpu-check)
#   GPU_CHECK_VRAM_GBS=4800                 # the GPU's memory bandwidth (datasheet), for the decode prediction
#
# The venv sees the system's site-packages (textual, psutil, gguf, the bundled model) and gets
# its own llama-cpp-python, so the machine's own install is left as it is. pip needs the
# llama-cpp-python sdist and its build requirements (scikit-build-core, cmake) from an index or
# PIP_FIND_LINKS; the build is not cached (--no-cache-dir), so no CPU-only wheel is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}

if [[ ${1:-} == --cpu-smoke ]]; then
    exec "$python" benchmarks/gpu_check.py --cpu-smoke
fi

not_run() { echo "gpu_check: not run: $*"; exit 0; }

command -v nvidia-smi >/dev/null || not_run "no nvidia-smi on PATH (no NVIDIA GPU driver here)"
caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null) || not_run "nvidia-smi finds no GPU"
cap=$(printf '%s\n' "$caps" | head -n 1 | tr -d ' ')
[[ $cap =~ ^[0-9]{1,2}\.[0-9]$ ]] || not_run "compute capability '$cap' from nvidia-smi is not understood"
arch=${cap/./}
nvcc=$(command -v nvcc || true)
if [[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]]; then nvcc=/usr/local/cuda/bin/nvcc; fi
[[ -n $nvcc ]] || not_run "no nvcc (not on PATH, not in /usr/local/cuda/bin): install the CUDA toolkit"
echo "gpu_check: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -n 1), compute $cap;" \
     "nvcc $nvcc ($("$nvcc" --version | tail -n 1))"

venv=${GPU_CHECK_VENV:-/tmp/workbench-gpu-check}
requirement=$("$python" -c 'import sys; sys.path.insert(0, "."); from workbench.core.config.build_choice import LLAMA_REQUIREMENT; print(LLAMA_REQUIREMENT)')
"$python" -m venv --system-site-packages "$venv"
export CUDACXX=$nvcc
export CMAKE_ARGS="-DGGML_RPC=on -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$arch"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
echo "gpu_check: building $requirement with CMAKE_ARGS=\"$CMAKE_ARGS\" into $venv"
start=$(date +%s)
"$venv/bin/python" -m pip install --quiet --force-reinstall --no-cache-dir --no-deps "$requirement"
echo "gpu_check: built in $(( $(date +%s) - start )) s"

args=()
if [[ -n ${GPU_CHECK_VRAM_GBS:-} ]]; then args+=(--vram-bandwidth-gbs "$GPU_CHECK_VRAM_GBS"); fi
"$venv/bin/python" -m workbench.cli.main doctor || true  # the venv's llama.cpp as doctor sees it
exec "$venv/bin/python" benchmarks/gpu_check.py ${args[@]+"${args[@]}"}
