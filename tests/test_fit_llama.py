"""The fit search against llama.cpp: the chosen preset loads under a budget made tight on purpose, the buffers
llama.cpp reports stay within it, and one 256-token step more goes over it (the context is maximal).

Every family the tests write, in one engine; each tiny model is loaded twice (the choice, and its context +
256). The arch_models families hold four wide KV heads on eight layers (16 KiB of f16 K and V per token), so
one step of 256 tokens is 4 MiB (less for window layers, which do not grow): more than the ledger's error on
the compute buffer, so the step shows in llama.cpp's report. Every file claims a trained context far above
what the budget holds, so the budget binds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest
from arch_attention_2026 import ATTENTION_MODELS, write_attention_gguf
from arch_models import ARCH_MODELS, arch_model, write_arch_gguf
from arch_recurrent import RECURRENT_MODELS, recurrent_model, write_recurrent_gguf
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
TRAINED = 262144  # far above what the budget holds: the budget binds, not the trained context
KV_HEADS = {"n_layer": 8, "n_head": 4, "n_head_kv": 4, "head_dim": 128, "n_embd": 512}
# every family the tests write: those of arch_models with wide KV heads, and the 2026 families as their own
# writers make them (MLA's latent, gemma3n's shared caches, gpt-oss's window, the hybrids' few attention layers)
WRITERS = {
    **{arch: (lambda path, arch=arch: write_arch_gguf(path, arch_model(arch, **KV_HEADS, n_ctx_train=TRAINED)))
       for arch in ARCH_MODELS},
    **{arch: (lambda path, arch=arch: write_attention_gguf(path, replace(ATTENTION_MODELS[arch], n_ctx_train=TRAINED)))
       for arch in ATTENTION_MODELS},
    **{arch: (lambda path, arch=arch: write_recurrent_gguf(path, recurrent_model(
        arch, base=replace(RECURRENT_MODELS[arch].base, n_ctx_train=TRAINED))))
       for arch in RECURRENT_MODELS},
}
BASE = Preset("base", ctx_size=2048, threads=1)
LOG_ROUNDING = 4 * 0.005 * MIB  # llama.cpp prints each of the four buffers in MiB to two decimals


@pytest.fixture(scope="module")
def engine():
    with EngineClient() as client:
        yield client


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fit-llama")


def _reported(client: EngineClient, path, preset: Preset) -> tuple[int, int]:
    """(llama.cpp's weight + KV + recurrent state + compute buffers, the context it allocated) for `preset`."""
    loaded = client.load_blocking(path, preset, device=ROOMY)
    buffers = loaded.model_buffer_bytes + loaded.kv_buffer_bytes + loaded.rs_buffer_bytes + loaded.compute_buffer_bytes
    return buffers, loaded.n_ctx


@pytest.mark.parametrize("family", sorted(WRITERS))
def test_the_chosen_preset_fits_llama_cpp_and_its_context_is_maximal(family, engine, model_dir):
    path = WRITERS[family](model_dir / f"{family}.gguf")
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
    assert buffers + overhead <= budget + LOG_ROUNDING, report

    more, more_ctx = _reported(engine, path, dataclasses.replace(chosen.preset, ctx_size=chosen.ctx + STEP))
    assert more_ctx == chosen.ctx + STEP
    assert more + overhead > budget, f"{report}; at ctx {more_ctx}: {more / MIB:.2f} MiB"
