"""benchmarks/gpu_check.sh without a GPU: what it says where it cannot run, and the build it would run on an
H100 (a fake nvidia-smi, nvcc and python on PATH record it), offline from a bundle."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_check.sh"


def _tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


TOOLS = ("bash", "dirname", "head", "tail", "tr", "date", "nproc", "ls")  # what the script runs beside the GPU's


def _run(*args: str, path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": str(path), "HOME": os.environ["HOME"], **env})


def _fake_gpu(folder: Path) -> None:
    _tool(folder, "nvidia-smi", 'case "$*" in *compute_cap*) echo "9.0";; *) echo "NVIDIA H100 80GB HBM3, 81559 MiB";; esac\n')
    _tool(folder, "nvcc", 'echo "Build cuda_13.0.r13.0/compiler.36424714_0"\n')


def _bin(tmp_path: Path) -> Path:
    """A PATH of one folder holding the script's plain tools and nothing else, whatever this machine has."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in TOOLS:
        (folder / tool).symlink_to(shutil.which(tool))
    return folder


def test_without_a_gpu_driver_it_says_not_run_and_why(tmp_path: Path):
    done = _run(path=_bin(tmp_path))
    assert done.returncode == 0
    assert done.stdout.strip() == "gpu_check: not run: no nvidia-smi on PATH (no NVIDIA GPU driver here)"


def test_an_unknown_option_is_refused(tmp_path: Path):
    done = _run("--build", path=_bin(tmp_path))
    assert done.returncode == 2 and "unknown option --build" in done.stderr


def test_the_check_alone_needs_an_earlier_build(tmp_path: Path):
    _fake_gpu(folder := _bin(tmp_path))
    empty = tmp_path / "target"
    empty.mkdir()
    done = _run("--no-build", path=folder, GPU_CHECK_TARGET=str(empty))
    assert done.returncode == 0, done.stderr
    assert "NVIDIA H100 80GB HBM3, 81559 MiB, compute 9.0" in done.stdout
    assert done.stdout.strip().endswith(f"gpu_check: not run: no llama-cpp-python in {empty}: run with --build-only "
                                        "first, or without --no-build")


def test_the_build_from_a_bundle_is_offline_and_for_this_gpu_only(tmp_path: Path):
    _fake_gpu(folder := _bin(tmp_path))
    log = tmp_path / "python.log"
    # a python that records each call with the build's variables, and builds nothing
    _tool(folder, "python3", f'echo "CMAKE_ARGS=$CMAKE_ARGS CUDACXX=$CUDACXX | $*" >> {log}\n')
    bundle = tmp_path / "bundle"
    (bundle / "wheels").mkdir(parents=True)
    (bundle / "wheels" / "jinja2-3.1.6-py3-none-any.whl").write_bytes(b"")
    (bundle / "llama_cpp_python-0.3.36.tar.gz").write_bytes(b"")
    target = tmp_path / "target"
    done = _run("--build-only", path=folder, GPU_CHECK_BUNDLE=str(bundle),
                GPU_CHECK_TARGET=str(target))
    assert done.returncode == 0, done.stderr
    wheels, build = log.read_text().splitlines()
    offline = f"--no-deps --target {target} --no-index --find-links {bundle}/wheels"
    assert wheels.endswith(f"-m pip install --quiet --no-cache-dir --upgrade {offline} {bundle}/wheels/jinja2-3.1.6-py3-none-any.whl")
    assert build.startswith(f"CMAKE_ARGS=-DGGML_RPC=on -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90 CUDACXX={folder}/nvcc |")
    assert build.endswith(f"{offline} {bundle}/llama_cpp_python-0.3.36.tar.gz")
    assert "gpu_check: built in" in done.stdout and "not run" not in done.stdout
