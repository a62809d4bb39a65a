"""`workbench doctor`: the backends the loaded llama.cpp has, the GPUs the machine has, and a fix when they differ."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from workbench.cli.json_output import write_json
from workbench.core.config.gpu_hardware import MachineGpus, detect_gpus, find_nvcc
from workbench.core.engine.backend_check import BackendCheck, check_backends
from workbench.core.engine.backends import LoadedBackends, loaded_backends
from workbench.core.units import mib


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="which backends the loaded llama.cpp has, what GPUs this machine has, and the rebuild command",
        description="List ggml's registered backends and devices (with their memory) in the llama.cpp that "
        "llama-cpp-python loads, this machine's GPUs (Jetson, NVIDIA cards, render nodes) and the CUDA "
        "compiler, and one line per mismatch with the command that rebuilds. Exit status 1 when there is one.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--root", default="/", help=argparse.SUPPRESS)  # a recorded /proc, /sys, /etc tree (tests)
    parser.set_defaults(func=run)


def _on_path(nvcc: Path | None) -> bool:
    folders = {Path(part).resolve() for part in os.environ.get("PATH", "").split(os.pathsep) if part}
    return nvcc is not None and nvcc.parent.resolve() in folders


def loaded_text(loaded: LoadedBackends) -> list[str]:
    if not loaded.available:
        return [f"llama.cpp: not loadable: {loaded.reason}"]
    lines = [f"llama.cpp (llama-cpp-python {loaded.version or 'version unknown'}, registry in {loaded.library}):"]
    for backend in loaded.backends:
        if not backend.devices:
            what = " (nodes are added by --rpc)" if backend.name == "RPC" else ""
            lines.append(f"  backend {backend.name}: no devices{what}")
        for device in backend.devices:
            memory = (f"{mib(device.free_bytes)} free of {mib(device.total_bytes)}" if device.total_bytes
                      else "memory not reported")
            lines.append(f"  backend {backend.name}: {device.name} ({device.kind}, {device.description}): {memory}")
    return lines


def machine_text(gpus: MachineGpus, nvcc: Path | None) -> list[str]:
    lines = ["this machine:"]
    if gpus.jetson is not None:
        arch = gpus.jetson.cuda_arch or "unknown"
        l4t = f", L4T {gpus.jetson.l4t}" if gpus.jetson.l4t else ""
        lines.append(f"  Jetson {gpus.jetson.family} GPU (CUDA architecture {arch}{l4t}), from {gpus.jetson.source}")
    for gpu in gpus.nvidia:
        lines.append(f"  NVIDIA GPU {gpu.name} (compute capability {gpu.compute_cap or 'unknown'}), from {gpu.source}")
    for node in gpus.render_nodes:
        compatible = f", {node.compatible}" if node.compatible else ""
        lines.append(f"  render node {node.node}: {node.kind} (driver {node.driver}{compatible})")
    if not gpus.has_cuda_gpu and not gpus.render_nodes:
        lines.append("  no GPU found (" + "; ".join(gpus.notes + ("no render node under /sys/class/drm",)) + ")")
    lines.append(f"  CUDA compiler: {nvcc}" if nvcc else "  CUDA compiler: none (nvcc not on PATH, no /usr/local/cuda/bin/nvcc)")
    return lines


def check_text(check: BackendCheck) -> list[str]:
    lines = [f"the install would build: {check.choice.backend} (+ RPC) with CMAKE_ARGS=\"{check.choice.cmake_args_text}\""]
    lines += [f"  why: {reason}" for reason in check.choice.reasons]
    lines += [f"note: {note}" for note in check.notes]
    lines += [mismatch.line for mismatch in check.mismatches]
    if not check.mismatches:
        lines.append("ok: the loaded llama.cpp has the backends this machine can use")
    return lines


def run(args: argparse.Namespace) -> int:
    root = Path(args.root)
    path = os.environ.get("PATH", "")
    gpus = detect_gpus(root, path)
    nvcc = find_nvcc(root, path)
    loaded = loaded_backends()
    check = check_backends(loaded, gpus, nvcc, os.environ, path_has_nvcc=_on_path(nvcc))
    if args.json:
        write_json({
            "loaded": dataclasses.asdict(loaded),
            "machine": {**dataclasses.asdict(gpus), "nvcc": str(nvcc) if nvcc else None},
            "build": {"backend": check.choice.backend, "cmake_args": list(check.choice.cmake_args),
                      "reasons": list(check.choice.reasons)},
            "notes": list(check.notes),
            "mismatches": [dataclasses.asdict(mismatch) for mismatch in check.mismatches],
        })
    else:
        sys.stdout.write("\n".join(loaded_text(loaded) + machine_text(gpus, nvcc) + check_text(check)) + "\n")
    return 1 if check.mismatches else 0
