"""n_cpu_moe (llama-server --n-cpu-moe): the preset key, the ledger's placement of the experts, and llama.cpp's load."""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path

import gguf
import pytest
from arch_models import ARCH_MODELS, write_arch_gguf
from real_engine import ROOMY

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.config.presets import (
    llama_server_args,
    llama_server_command,
    preset_from_mapping,
    preset_problems,
    preset_to_toml,
)
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, Sampling, TurnFinished
from workbench.core.errors import EngineError, PresetError
from workbench.core.fit.devices import fit_devices
from workbench.core.fit.options import local_options
from workbench.core.fit.search import fit
from workbench.core.fit.types import FitRequest
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.gpu_device import local_gpu_device
from workbench.core.ledger.predict import predict_ledger
from workbench.core.ledger.speed_costs import decode_bytes_by_layer
from workbench.core.ledger.split import predict_split

MIB = 1024 * 1024
GPU_HOST = DeviceProfile(name="gpu-host", ram_total_mb=4096, cores=2, accelerator="cuda", vram_mb=2048)
BASE = Preset("moe", ctx_size=512, batch_size=256, ubatch_size=256, threads=1)


@pytest.fixture(scope="module")
def olmoe(tmp_path_factory) -> Path:
    return write_arch_gguf(tmp_path_factory.mktemp("moe") / "olmoe.gguf", ARCH_MODELS["olmoe"])


@functools.cache
def _tensor_bytes(path: Path) -> dict[str, int]:
    """Every tensor of the file and its bytes, read with gguf-py (not the workbench's reader)."""
    return {t.name: int(t.n_bytes) for t in gguf.GGUFReader(path).tensors}


def _expert_tensors(path: Path, layers: range) -> dict[str, int]:
    """Routed-expert tensors of `layers` (llama.cpp's names: ffn_{gate,up,down,gate_up}_exps) and their bytes."""
    names = {f"blk.{layer}.ffn_{kind}_exps.weight" for layer in layers for kind in ("gate", "up", "down", "gate_up")}
    return {name: n for name, n in _tensor_bytes(path).items() if name in names}


def test_the_key_is_checked_saved_and_on_the_server_line(olmoe):
    preset = preset_from_mapping({"name": "m", "n_cpu_moe": 3})
    assert preset.n_cpu_moe == 3 and preset_from_mapping({"name": "m"}).n_cpu_moe == 0
    assert "n_cpu_moe = 3" in preset_to_toml(preset) and "n_cpu_moe" not in preset_to_toml(BASE)
    args = llama_server_args(preset, "m.gguf")
    assert args[args.index("--n-cpu-moe") + 1] == "3" and "--n-cpu-moe" not in llama_server_args(BASE, "m.gguf")
    for bad in (-1, "two", True):
        with pytest.raises(PresetError, match="n_cpu_moe"):
            preset_from_mapping({"name": "m", "n_cpu_moe": bad})
    model = read_gguf(olmoe)
    too_many = [p for p in preset_problems(dataclasses.replace(BASE, n_cpu_moe=5), model) if p.level == "error"]
    assert [p.message for p in too_many] == ["n_cpu_moe = 5 is more than the 4 layers of " + (model.name or "the model")]
    assert not preset_problems(dataclasses.replace(BASE, n_cpu_moe=4), model)


def test_the_ledger_moves_the_experts_of_the_first_layers_to_the_host(olmoe):
    model = read_gguf(olmoe)
    gpu = local_gpu_device(GPU_HOST)
    experts = _expert_tensors(olmoe, range(2))
    assert len(experts) == 6  # gate, up and down of layers 0 and 1

    def split(**changes):
        preset = dataclasses.replace(BASE, gpu_layers=-1, mmap=False, **changes)
        return predict_split(model, preset, [gpu], host_budget_bytes=GPU_HOST.budget_mb * MIB)

    before, after = split().devices, split(n_cpu_moe=2).devices
    # Each tensor padded to its buffer's alignment (ggml: 128 bytes for CUDA, 32 for the CPU buffer type).
    assert before[1].weights_bytes - after[1].weights_bytes == sum(-(-n // 128) * 128 for n in experts.values())
    assert after[0].weights_bytes - before[0].weights_bytes == sum(-(-n // 32) * 32 for n in experts.values())
    # Layers kept on the CPU (gpu_layers 0) or a CPU-only device: the experts are there already.
    on_host = dataclasses.replace(BASE, gpu_layers=0)
    assert predict_split(model, dataclasses.replace(on_host, n_cpu_moe=2), [gpu],
                         host_budget_bytes=GPU_HOST.budget_mb * MIB).devices == \
        predict_split(model, on_host, [gpu], host_budget_bytes=GPU_HOST.budget_mb * MIB).devices
    assert predict_ledger(model, dataclasses.replace(BASE, n_cpu_moe=2), ROOMY).total_bytes == \
        predict_ledger(model, BASE, ROOMY).total_bytes


def test_llama_cpp_keeps_those_experts_on_the_cpu_and_generates(olmoe):
    expected = set(_expert_tensors(olmoe, range(2)))
    with EngineClient() as client:
        plain = client.load_blocking(olmoe, BASE, device=ROOMY)
        loaded = client.load_blocking(olmoe, dataclasses.replace(BASE, n_cpu_moe=2), device=ROOMY)
        events = list(client.chat([ChatMessage("user", "hi")], Sampling(temperature=0.0, seed=1, max_tokens=4)))
        log = Path(client.log_path).read_text(errors="replace")
        with pytest.raises(EngineError, match="n_cpu_moe = 5 is more than the 4 layers"):
            client.load_blocking(olmoe, dataclasses.replace(BASE, n_cpu_moe=5), device=ROOMY)
    overridden = set(re.findall(r"^tensor (\S+) \(\d+ MiB \w+\) buffer type overridden to CPU$", log, re.MULTILINE))
    assert overridden == expected
    assert loaded.n_ctx == BASE.ctx_size
    # CPU only: the experts were in host memory already, so llama.cpp's buffers are the same as without
    assert (loaded.model_buffer_bytes, loaded.kv_buffer_bytes, loaded.compute_buffer_bytes) == \
        (plain.model_buffer_bytes, plain.kv_buffer_bytes, plain.compute_buffer_bytes)
    finished = [event for event in events if isinstance(event, TurnFinished)]
    assert finished and finished[0].generated_tokens > 0


# Experts large enough that one layer's (3 x 256 x 256 x 16 Q8_0 values, 3.3 MiB) is more than the
# 1 MiB step of vram_mb, so the count of layers to move is exact.
BIG_MOE = dataclasses.replace(ARCH_MODELS["qwen3moe"], n_layer=6, n_embd=256, n_head=4, n_ff_expert=256,
                              n_expert=16, n_expert_used=2)


def _gpu(vram_mb: int | None) -> DeviceProfile:
    if vram_mb is None:
        return DeviceProfile(name="cpu", ram_total_mb=4096, cores=2, mem_bandwidth_gbs=50)
    return DeviceProfile(name="gpu", ram_total_mb=4096, cores=2, mem_bandwidth_gbs=50, accelerator="cuda",
                         vram_mb=vram_mb, vram_bandwidth_gbs=500)


def _fit(model, device: DeviceProfile):
    request = FitRequest(base=BASE, ctx_min=512, quality="q8", devices=fit_devices(device, ()))
    return fit(local_options(model), device, request)


def test_fit_keeps_the_experts_of_the_fewest_layers_on_the_cpu(tmp_path):
    path = write_arch_gguf(tmp_path / "qwen3moe.gguf", BIG_MOE)
    model = read_gguf(path)
    experts = _expert_tensors(path, range(BIG_MOE.n_layer))
    per_layer = [sum(-(-n // 128) * 128 for name, n in experts.items() if name.startswith(f"blk.{layer}."))
                 for layer in range(BIG_MOE.n_layer)]
    assert min(per_layer) > 3 * MIB
    # The GPU's share with every layer on it (the ledger's figure at --ctx-min 512), then a VRAM budget 2.5
    # layers of experts short of it
    sizing = dataclasses.replace(BASE, gpu_layers=-1)
    vram_mb = (predict_split(model, sizing, [local_gpu_device(_gpu(1 << 20))], host_budget_bytes=1 << 40).devices[1]
               .total_bytes - int(2.5 * per_layer[0])) // MIB
    result = _fit(model, _gpu(vram_mb))
    assert result.fits
    chosen = result.chosen.preset
    assert chosen.gpu_layers == -1 and chosen.n_cpu_moe >= 1
    # Independently: the fewest layers whose experts (from the file's tensor list) bring the GPU's share of the
    # chosen preset at --ctx-min under the budget
    at_min = dataclasses.replace(chosen, ctx_size=512, n_cpu_moe=0)
    gpu_total = predict_split(model, at_min, [local_gpu_device(_gpu(1 << 20))],
                              host_budget_bytes=1 << 40).devices[1].total_bytes
    expected = next(n for n in range(1, BIG_MOE.n_layer + 1) if gpu_total - sum(per_layer[:n]) <= vram_mb * MIB)
    assert chosen.n_cpu_moe == expected
    change = next(c for c in result.changes if c.key == "n_cpu_moe")
    assert change.new == expected and "--n-cpu-moe" in change.why and "fewest" in change.why
    assert f"--n-cpu-moe {expected}" in llama_server_command(chosen, path)
    cuda = result.chosen.split.devices[1]
    assert cuda.name == "CUDA0" and cuda.total_bytes <= vram_mb * MIB
    # A GPU that holds it all, and a CPU-only board: no experts move
    for device in (_gpu(4096), _gpu(None)):
        other = _fit(model, device)
        assert other.fits and other.chosen.preset.n_cpu_moe == 0


def test_the_speed_model_reads_those_experts_on_the_host(olmoe):
    model = read_gguf(olmoe)
    used, total = ARCH_MODELS["olmoe"].n_expert_used, ARCH_MODELS["olmoe"].n_expert
    before, after = decode_bytes_by_layer(model), decode_bytes_by_layer(model, n_cpu_moe=2)
    # a decoded token reads used/total of each routed-expert tensor (all Q8_0 here)
    moved = sum(n * used // total for n in _expert_tensors(olmoe, range(2)).values())
    assert sum(after[-2].values()) - sum(before[-2].values()) == moved
    assert sum(before[0].values()) + sum(before[1].values()) - sum(after[0].values()) - sum(after[1].values()) == moved
    assert after[2] == before[2] and after[3] == before[3]
