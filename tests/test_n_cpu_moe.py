"""n_cpu_moe (llama-server --n-cpu-moe): the preset key, the ledger's placement of the experts, and llama.cpp's load."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import gguf
import pytest
from arch_models import ARCH_MODELS, write_arch_gguf
from real_engine import ROOMY

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.config.presets import llama_server_args, preset_from_mapping, preset_problems, preset_to_toml
from workbench.core.engine.client import EngineClient
from workbench.core.engine.events import ChatMessage, Sampling, TurnFinished
from workbench.core.errors import PresetError
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.gpu_device import local_gpu_device
from workbench.core.ledger.predict import predict_ledger
from workbench.core.ledger.split import predict_split

MIB = 1024 * 1024
GPU_HOST = DeviceProfile(name="gpu-host", ram_total_mb=4096, cores=2, accelerator="cuda", vram_mb=2048)
BASE = Preset("moe", ctx_size=512, batch_size=256, ubatch_size=256, threads=1)


@pytest.fixture(scope="module")
def olmoe(tmp_path_factory) -> Path:
    return write_arch_gguf(tmp_path_factory.mktemp("moe") / "olmoe.gguf", ARCH_MODELS["olmoe"])


def _expert_tensors(path: Path, layers: range) -> dict[str, int]:
    """Routed-expert tensors of `layers` and their bytes, read with gguf-py (not the workbench's reader)."""
    names = {f"blk.{layer}.ffn_{kind}_exps.weight" for layer in layers for kind in ("gate", "up", "down", "gate_up")}
    return {t.name: int(t.n_bytes) for t in gguf.GGUFReader(path).tensors if t.name in names}


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
        loaded = client.load_blocking(olmoe, dataclasses.replace(BASE, n_cpu_moe=2), device=ROOMY)
        events = list(client.chat([ChatMessage("user", "hi")], Sampling(temperature=0.0, seed=1, max_tokens=4)))
        log = Path(client.log_path).read_text(errors="replace")
    overridden = set(re.findall(r"^tensor (\S+) \(\d+ MiB \w+\) buffer type overridden to CPU$", log, re.MULTILINE))
    assert overridden == expected
    assert loaded.n_ctx == BASE.ctx_size
    finished = [event for event in events if isinstance(event, TurnFinished)]
    assert finished and finished[0].generated_tokens > 0
