"""The preset keys that place layers on devices (GPUs, RPC nodes), in llama.cpp's vocabulary and checks."""

from __future__ import annotations

import math
import re
from typing import Any

from workbench.core.config.rpc_endpoints import parse_endpoints
from workbench.core.config.toml_checks import TomlSource, closest, get_int, get_str, wrong_type
from workbench.core.errors import PresetError, WorkbenchError

SPLIT_KEYS = ("gpu_layers", "split_mode", "tensor_split", "main_gpu", "rpc", "n_cpu_moe")
SPLIT_MODES = ("layer", "row", "none")  # llama-server -sm; llama.h LLAMA_SPLIT_MODE_NONE/LAYER/ROW
LLAMA_SPLIT_MODE = {"none": 0, "layer": 1, "row": 2}
ALL_LAYERS = -1  # gpu_layers = "all": every repeating layer and the output layer (llama.cpp's -1)
MAX_DEVICES = 16  # llama_max_devices()
_MAX_LAYERS = 1 << 16


def _gpu_layers(data: dict[str, Any], source: TomlSource) -> int | None:
    if "gpu_layers" not in data:
        return None
    value = data["gpu_layers"]
    if isinstance(value, str):
        if value.strip().lower() == "all":
            return ALL_LAYERS
        raise PresetError(f'gpu_layers = "{value}" is neither a number of layers nor "all"',
                          where=source.where("gpu_layers"), fix='Write gpu_layers = 20 or gpu_layers = "all"')
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise PresetError(f"gpu_layers = {value} is negative", where=source.where("gpu_layers"),
                          fix='Write gpu_layers = "all" for every layer, or a count from 0')
    return get_int(data, "gpu_layers", None, source, minimum=0, maximum=_MAX_LAYERS,
                   example='gpu_layers = 20 (or "all")', unit="layers")


def _split_mode(data: dict[str, Any], source: TomlSource) -> str:
    mode = get_str(data, "split_mode", "layer", source, example='split_mode = "layer"')
    if mode.lower() in SPLIT_MODES:
        return mode.lower()
    guess = closest(mode.lower(), SPLIT_MODES)
    hint = f"Did you mean {guess}? " if guess else ""
    raise PresetError(f'split_mode = "{mode}" is not a llama.cpp split mode', where=source.where("split_mode"),
                      fix=f"{hint}Use one of: {', '.join(SPLIT_MODES)}")


def _tensor_split(data: dict[str, Any], source: TomlSource) -> tuple[float, ...]:
    if "tensor_split" not in data:
        return ()
    value = data["tensor_split"]
    where = source.where("tensor_split")
    if not isinstance(value, list):
        raise wrong_type("tensor_split", value, "a list of proportions", "tensor_split = [3, 1]", source)
    if not 1 <= len(value) <= MAX_DEVICES:
        raise PresetError(f"tensor_split has {len(value)} entries", where=where,
                          fix=f"Give one proportion per device, 1 to {MAX_DEVICES} of them, e.g. tensor_split = [3, 1]")
    proportions = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int | float) or not math.isfinite(item) or item < 0:
            raise PresetError(f"tensor_split entry {item!r} is not a proportion", where=where,
                              fix="Each entry is a number >= 0, e.g. tensor_split = [3, 1] puts 3/4 of the layers on the first device")
        proportions.append(float(item))
    if sum(proportions) <= 0:
        raise PresetError("tensor_split is all zeros", where=where,
                          fix="Give at least one positive proportion, or leave tensor_split out to split by free memory")
    return tuple(proportions)


def _rpc(data: dict[str, Any], source: TomlSource) -> tuple[str, ...]:

    if "rpc" not in data:
        return ()
    value = data["rpc"]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise wrong_type("rpc", value, "a list of \"host:port\" texts", 'rpc = ["192.168.1.20:50052"]', source)
    try:
        endpoints = parse_endpoints(value, allow_profile=False)
    except WorkbenchError as error:
        raise PresetError(error.what, where=source.where("rpc"), fix=error.fix) from None
    return tuple(endpoint.address for endpoint in endpoints)


def split_fields(data: dict[str, Any], source: TomlSource) -> dict[str, Any]:
    """The Preset keyword arguments of the split keys, each checked (PresetError with file:line)."""
    return {
        "gpu_layers": _gpu_layers(data, source),
        "split_mode": _split_mode(data, source),
        "tensor_split": _tensor_split(data, source),
        "main_gpu": get_int(data, "main_gpu", 0, source, minimum=0, maximum=MAX_DEVICES - 1, example="main_gpu = 0"),
        "rpc": _rpc(data, source),
        "n_cpu_moe": get_int(data, "n_cpu_moe", 0, source, minimum=0, maximum=_MAX_LAYERS,
                             example="n_cpu_moe = 4  (experts of the first 4 layers stay on the CPU)", unit="layers"),
    }


def split_toml(preset: Any) -> dict[str, Any]:
    """The split keys a TOML file needs to say (the defaults are left out)."""
    out: dict[str, Any] = {}
    if preset.gpu_layers is not None:
        out["gpu_layers"] = "all" if preset.gpu_layers == ALL_LAYERS else preset.gpu_layers
    if preset.split_mode != "layer":
        out["split_mode"] = preset.split_mode
    if preset.tensor_split:
        out["tensor_split"] = list(preset.tensor_split)
    if preset.main_gpu:
        out["main_gpu"] = preset.main_gpu
    if preset.rpc:
        out["rpc"] = list(preset.rpc)
    if preset.n_cpu_moe:
        out["n_cpu_moe"] = preset.n_cpu_moe
    return out


def effective_gpu_layers(preset: Any) -> int:
    """What llama.cpp gets as n_gpu_layers: the preset's, else all when RPC nodes are named, else 0.

    0 is llama-cpp-python's default; a preset that names RPC nodes but no gpu_layers means
    "use the nodes", so every layer goes to the devices (llama-server's own default is "all").
    """
    if preset.gpu_layers is not None:
        return preset.gpu_layers
    return ALL_LAYERS if preset.rpc else 0


def split_server_args(preset: Any) -> list[str]:
    """llama-server flags for the split keys (-ngl, -sm, -ts, -mg, --rpc, --n-cpu-moe); none when nothing is set."""
    args: list[str] = []
    if preset.gpu_layers is not None or preset.rpc:
        layers = effective_gpu_layers(preset)
        args += ["-ngl", "all" if layers == ALL_LAYERS else str(layers)]
    if preset.split_mode != "layer":
        args += ["-sm", preset.split_mode]
    if preset.tensor_split:
        args += ["-ts", ",".join(f"{value:g}" for value in preset.tensor_split)]
    if preset.main_gpu:
        args += ["-mg", str(preset.main_gpu)]
    if preset.rpc:
        args += ["--rpc", ",".join(preset.rpc)]
    if preset.n_cpu_moe:
        args += ["--n-cpu-moe", str(preset.n_cpu_moe)]
    return args


# common/common.h (llama.cpp 0c1e570) LLM_FFN_EXPS_REGEX and llm_ffn_exps_block_regex(i): --n-cpu-moe N adds one
# override per layer 0..N-1, each sending the matching tensors to the CPU buffer type (regex_search: a substring).
_EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_exps"


def cpu_moe_patterns(n_cpu_moe: int) -> tuple[str, ...]:
    """The tensor-name patterns llama.cpp's --n-cpu-moe N keeps in CPU memory (the routed experts of layers < N)."""
    return tuple(rf"blk\.{layer}{_EXPS_REGEX}" for layer in range(n_cpu_moe))


def expert_on_cpu(tensor_name: str, n_cpu_moe: int) -> bool:
    """Whether --n-cpu-moe N keeps this tensor in CPU memory (a pattern of cpu_moe_patterns matches it)."""
    match = re.match(r"blk\.(\d+)\.", tensor_name)
    if match is None or int(match.group(1)) >= n_cpu_moe:
        return False
    return re.search(rf"blk\.{match.group(1)}{_EXPS_REGEX}", tensor_name) is not None


def split_problems(preset: Any) -> list[tuple[str, str, str]]:
    """(level, message, fix) for split settings that cannot work or do nothing."""
    problems = []
    if preset.rpc and preset.gpu_layers == 0:
        problems.append(("warning", f"rpc names {len(preset.rpc)} node(s) but gpu_layers = 0 puts no layer on them",
                         'Set gpu_layers = "all" (or a count) to place layers on the nodes'))
    if preset.tensor_split and not preset.rpc and preset.gpu_layers in (None, 0):
        problems.append(("warning", "tensor_split is set but no layer is offloaded (gpu_layers is 0)",
                         'Set gpu_layers to a count or "all"'))
    if preset.split_mode == "row" and preset.rpc:
        problems.append(("warning", "split_mode = row splits tensors across CUDA GPUs only; RPC nodes get whole layers",
                         'Use split_mode = "layer" with RPC nodes'))
    return problems


def llama_split_kwargs(preset: Any) -> dict[str, Any]:
    """`llama_cpp.Llama` keyword arguments for the split keys (n_gpu_layers, split_mode, main_gpu, tensor_split)."""
    kwargs: dict[str, Any] = {
        "n_gpu_layers": effective_gpu_layers(preset),
        "split_mode": LLAMA_SPLIT_MODE[preset.split_mode],
        "main_gpu": preset.main_gpu,
    }
    if preset.tensor_split:
        kwargs["tensor_split"] = list(preset.tensor_split)
    return kwargs
