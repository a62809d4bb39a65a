"""The fit search against llama.cpp: the chosen preset loads under a budget made tight on purpose, the buffers
llama.cpp reports stay within it, and one 256-token step more goes over it (the context is maximal).

One engine per module; each family's tiny model is loaded twice (the choice, and its context + 256). The
models hold four wide KV heads on eight layers (16 KiB of f16 K and V per token), so one step of 256 tokens
is 4 MiB (2 MiB for gemma2, whose window layers do not grow): more than the ledger's error on the compute
buffer, so the step shows in llama.cpp's report.
"""

from __future__ import annotations

import dataclasses

import pytest
from arch_models import arch_model, write_arch_gguf
from real_engine import ROOMY

from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.engine.client import EngineClient
from workbench.core.fit.options import local_options
from workbench.core.fit.search import fit
from workbench.core.fit.types import FitRequest
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.predict import predict_ledger

MIB = 1024 * 1024
STEP = 256
KV_HEADS = {"n_layer": 8, "n_head": 4, "n_head_kv": 4, "head_dim": 128, "n_embd": 512}
FAMILIES = {  # dense, sliding-window layers, experts
    "llama": arch_model("llama", **KV_HEADS),
    "gemma2": arch_model("gemma2", **KV_HEADS, n_ctx_train=65536),  # its window layers hold 512 + ubatch cells
    "qwen2moe": arch_model("qwen2moe", **KV_HEADS),
}
BASE = Preset("base", ctx_size=2048, threads=1)


@pytest.fixture(scope="module")
def engine():
    with EngineClient() as client:
        yield client


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fit-llama")


def _reported(client: EngineClient, path, preset: Preset) -> tuple[int, int]:
    """(llama.cpp's weight + KV + compute buffers, the context it allocated) for `preset`."""
    loaded = client.load_blocking(path, preset, device=ROOMY)
    return loaded.model_buffer_bytes + loaded.kv_buffer_bytes + loaded.compute_buffer_bytes, loaded.n_ctx


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_chosen_preset_fits_llama_cpp_and_its_context_is_maximal(family, engine, model_dir):
    path = write_arch_gguf(model_dir / f"{family}.gguf", FAMILIES[family])
    model = read_gguf(path)
    # A budget made tight on purpose: what the plain preset needs at 3,000 tokens, to the next whole MiB.
    needed = predict_ledger(model, dataclasses.replace(BASE, ctx_size=3000), ROOMY).total_bytes
    device = DeviceProfile(name=f"tight-{family}", ram_total_mb=-(-needed // MIB), cores=2, mem_bandwidth_gbs=10)
    budget = device.budget_mb * MIB
    result = fit(local_options(model), device, FitRequest(base=BASE, ctx_min=1024))
    chosen = result.chosen
    assert chosen is not None, result.reason
    assert chosen.ctx < model.n_ctx_train  # the budget binds, not the trained context
    overhead = chosen.ledger.overhead_bytes  # the engine process beyond llama.cpp's buffers (not in its report)

    buffers, n_ctx = _reported(engine, path, chosen.preset)
    report = (f"{family}: {chosen.preset.cache_type_k} flash={chosen.preset.flash_attn} ub={chosen.preset.ubatch_size} "
              f"ctx {chosen.ctx}: llama.cpp buffers {buffers / MIB:.2f} + overhead {overhead / MIB:.2f} MiB "
              f"against {budget / MIB:.0f} MiB")
    assert n_ctx == chosen.ctx, report
    assert buffers + overhead <= budget, report

    more, more_ctx = _reported(engine, path, dataclasses.replace(chosen.preset, ctx_size=chosen.ctx + STEP))
    assert more_ctx == chosen.ctx + STEP
    assert more + overhead > budget, f"{report}; at ctx {more_ctx}: {more / MIB:.2f} MiB"
