"""`workbench doctor`: ggml's registry in the loaded llama.cpp, the machine's GPUs from captured trees, mismatches."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from workbench.cli.main import main
from workbench.core.config.gpu_hardware import detect_gpus
from workbench.core.engine.backend_check import check_backends
from workbench.core.engine.backends import Backend, BackendDevice, LoadedBackends, loaded_backends

SYSFS = Path(__file__).parent / "sysfs"
CPU_DEVICE = BackendDevice("CPU", "test CPU", "CPU", 1 << 30, 1 << 31)


@pytest.fixture(autouse=True)
def no_build_variables(monkeypatch):
    """The user's own WORKBENCH_BACKEND or CMAKE_ARGS would change the build chosen."""


def _fake_nvcc(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nvcc").write_text("#!/bin/sh\nexit 0\n")
    (folder / "nvcc").chmod(0o755)


def test_the_loaded_llama_cpp_has_cpu_and_rpc_with_the_machines_memory():
    loaded = loaded_backends()
    assert loaded.available, loaded.reason
    assert {"CPU", "RPC"} <= set(loaded.names)
    cpu = next(backend for backend in loaded.backends if backend.name == "CPU")
    assert [device.kind for device in cpu.devices] == ["CPU"]
    total = psutil.virtual_memory().total  # /proc/meminfo, not ggml's own reading
    assert abs(cpu.devices[0].total_bytes - total) <= total * 0.01
    assert loaded.gpu_devices == ()


def test_jetson_tree_with_a_cpu_build_is_one_mismatch_line_with_the_cuda_rebuild(tmp_path, monkeypatch, capsys):
    loaded = loaded_backends()  # read (once a process, with ldd) before PATH holds only the fake nvcc
    _fake_nvcc(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["doctor", "--root", str(SYSFS / "jetson-orin-nano")]) == 1
    out = capsys.readouterr().out
    assert "Jetson Orin GPU (CUDA architecture 87)" in out
    mismatches = [line for line in out.splitlines() if line.startswith("mismatch:")]
    assert mismatches == [
        "mismatch: this machine has a Jetson Orin GPU (CUDA architecture 87) and nvcc, but the loaded llama.cpp has "
        f"only {', '.join(loaded.names)}, so every layer runs on the CPU: rebuild with "
        'CMAKE_ARGS="-DGGML_RPC=on -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=87" pip install --force-reinstall '
        f"--no-cache-dir --no-deps 'llama-cpp-python=={loaded.version}'"]


def test_jetson_without_nvcc_says_to_install_the_toolkit(tmp_path):
    check = check_backends(loaded_backends(), detect_gpus(SYSFS / "jetson-orin-nano", str(tmp_path)), None, {})
    assert check.choice.backend == "cpu"
    assert len(check.mismatches) == 1
    assert check.mismatches[0].fix.startswith('install the CUDA toolkit, then rebuild with '
                                              'CMAKE_ARGS="-DGGML_RPC=on -DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=87"')


def test_rk3588_mali_and_pi5_v3d_are_noted_not_mismatched(tmp_path, monkeypatch, capsys):
    assert loaded_backends().available  # read (once a process, with ldd) before PATH is emptied of it
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["doctor", "--root", str(SYSFS / "rk3588-mainline")]) == 0
    out = capsys.readouterr().out
    assert "render node renderD128: Arm Mali (panthor) (driver panthor, rockchip,rk3588-mali)" in out
    assert "llama.cpp/issues/17783" in out and "ok: " in out
    assert main(["doctor", "--root", str(SYSFS / "raspberry-pi-5"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["machine"]["render_nodes"] == [
        {"node": "renderD128", "driver": "v3d", "compatible": "brcm,2712-v3d", "kind": "Broadcom V3D"}]
    assert data["mismatches"] == [] and data["build"]["cmake_args"] == ["-DGGML_RPC=on"]
    assert "llama.cpp/issues/9801" in data["notes"][0]


def test_a_build_without_rpc_and_a_cuda_backend_without_devices_are_mismatches():
    loaded = LoadedBackends(True, "", (Backend("CPU", (CPU_DEVICE,)), Backend("CUDA", ())), "libggml.so", "0.3.36")
    check = check_backends(loaded, detect_gpus(SYSFS / "x86-laptop", ""), None, {})
    lines = [mismatch.line for mismatch in check.mismatches]
    assert lines == [
        "mismatch: the loaded llama.cpp has CPU, CUDA, no RPC backend: `workbench node` and --rpc cannot work: rebuild "
        "with CMAKE_ARGS=\"-DGGML_RPC=on\" pip install --force-reinstall --no-cache-dir --no-deps 'llama-cpp-python==0.3.36'",
        "mismatch: the loaded llama.cpp has CUDA but sees no CUDA device: check the GPU driver (nvidia-smi, vulkaninfo); "
        "llama.cpp runs on the CPU meanwhile",
    ]


def test_an_unloadable_llama_cpp_is_a_mismatch_with_the_rebuild():
    loaded = LoadedBackends(False, "llama-cpp-python cannot be imported (libggml.so.0: cannot open)")
    check = check_backends(loaded, detect_gpus(SYSFS / "x86-laptop", ""), None, {})
    assert [m.line for m in check.mismatches] == [
        "mismatch: llama-cpp-python cannot be imported (libggml.so.0: cannot open): rebuild it: "
        "CMAKE_ARGS=\"-DGGML_RPC=on\" pip install --force-reinstall --no-cache-dir --no-deps 'llama-cpp-python'"]
