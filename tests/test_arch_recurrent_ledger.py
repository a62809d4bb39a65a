"""The ledger on models with recurrent state and on several sequences: predicted weights, KV, RS and compute
against what llama.cpp reports when the real engine loads tiny random-weight files (arch_recurrent.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from arch_models import ARCH_MODELS, write_arch_gguf
from arch_recurrent import RECURRENT_MODELS, is_recurrent, write_recurrent_gguf
from real_engine import ROOMY

from workbench.core.config.preset import Preset
from workbench.core.engine.client import EngineClient
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.predict import predict_ledger

MIB = 1024 * 1024
LOG_ROUNDING = 0.006 * MIB  # llama.cpp prints each buffer in MiB with two decimals

# ctx 2048 and 8192; f16 K/V, and q8_0 K/V with flash attention; 1 and 4 sequences. One thread.
CASES = tuple(
    pytest.param(Preset(f"{kv}-ctx{ctx}-np{n_seq}", ctx_size=ctx, batch_size=512, ubatch_size=512,
                        cache_type_k=kv, cache_type_v=kv, flash_attn=kv == "q8_0", parallel=n_seq, threads=1),
                 id=f"{kv}{'+fa' if kv == 'q8_0' else ''}-ctx{ctx}-np{n_seq}")
    for ctx in (2048, 8192) for kv in ("f16", "q8_0") for n_seq in (1, 4)
)


def within(predicted: int, reported: int, share: float = 0.02) -> bool:
    return abs(predicted - reported) <= share * reported + LOG_ROUNDING


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("recurrent")


@pytest.fixture(scope="module")
def engine():
    """One engine process for the module: each load makes a new context, whatever was loaded before."""
    with EngineClient() as client:
        yield client


@pytest.fixture(scope="module", params=sorted(RECURRENT_MODELS))
def recurrent_engine(request, model_dir, engine):
    """Each family's file, loaded setting after setting into the module's engine."""
    arch = request.param
    yield arch, write_recurrent_gguf(model_dir / f"{arch}.gguf", RECURRENT_MODELS[arch]), engine


def _report(label: str, ledger, loaded) -> str:
    return (f"{label}: predicted weights {ledger.weights_bytes / MIB:.3f} KV {ledger.kv_bytes / MIB:.3f} "
            f"RS {ledger.rs_bytes / MIB:.3f} compute {ledger.compute_bytes / MIB:.3f}; llama.cpp weights "
            f"{loaded.model_buffer_bytes / MIB:.3f} KV {loaded.kv_buffer_bytes / MIB:.3f} RS "
            f"{loaded.rs_buffer_bytes / MIB:.3f} compute {loaded.compute_buffer_bytes / MIB:.3f} MiB")


@pytest.mark.parametrize("preset", CASES)
def test_weights_kv_rs_and_compute_within_two_percent(recurrent_engine, preset):
    arch, path, client = recurrent_engine
    loaded = client.load_blocking(path, preset, device=ROOMY)
    ledger = predict_ledger(read_gguf(path), preset, ROOMY)
    report = _report(f"{arch}/{preset.name}", ledger, loaded)
    assert loaded.n_seq_max == preset.parallel == ledger.n_seq, report
    assert loaded.n_ctx == ledger.ctx_size, report
    assert within(ledger.weights_bytes, loaded.model_buffer_bytes), report
    assert within(ledger.kv_bytes, loaded.kv_buffer_bytes), report
    assert within(ledger.rs_bytes, loaded.rs_buffer_bytes), report
    assert within(ledger.compute_bytes, loaded.compute_buffer_bytes), report


def _rs_by_hand(arch: str, n_seq: int) -> int:
    """f32 R and S rows per recurrent layer and sequence, from the file's own dimensions (llama-hparams.cpp)."""
    model = RECURRENT_MODELS[arch]
    if model.shortconv_l_cache:
        per_layer = model.base.n_embd * (model.shortconv_l_cache - 1)
    else:
        conv = (model.ssm_d_conv - 1) * (model.ssm_d_inner + 2 * model.ssm_n_group * model.ssm_d_state)
        per_layer = conv + model.ssm_d_state * model.ssm_d_inner
    n_recurrent = sum(is_recurrent(model, il) for il in range(model.base.n_layer))
    return 4 * per_layer * n_recurrent * n_seq


def test_recurrent_state_is_per_sequence_and_independent_of_context(recurrent_engine):
    """The RS buffer grows with the sequences, not the context; the KV counts the attention layers only."""
    arch, path, client = recurrent_engine
    model = RECURRENT_MODELS[arch]
    info = read_gguf(path)
    for n_seq in (1, 4):
        preset = Preset("rs", ctx_size=2048, parallel=n_seq, threads=1)
        loaded = client.load_blocking(path, preset, device=ROOMY)
        ledger = predict_ledger(info, preset, ROOMY)
        assert ledger.rs_bytes == _rs_by_hand(arch, n_seq)
        assert abs(loaded.rs_buffer_bytes - _rs_by_hand(arch, n_seq)) <= LOG_ROUNDING, _report(arch, ledger, loaded)
        assert predict_ledger(info, Preset("long", ctx_size=8192, parallel=n_seq), ROOMY).rs_bytes == ledger.rs_bytes
    attention = tuple(il for il in range(model.base.n_layer) if not is_recurrent(model, il))
    assert ledger.recurrent.attention_layers == attention
    # f16 K and V of one 64-wide head: 256 bytes per cell and attention layer
    assert ledger.kv_bytes == 256 * 2048 * len(attention)
    client.run_op("bench", n_prompt=32, n_gen=4)  # it generates


# The families the ledger was built on, with 4 sequences: the unified cache of n_ctx cells, the
# window cache of window x 4 + ubatch cells, the compute buffer of the re-made context.
PARALLEL = Preset("np4", ctx_size=2048, batch_size=512, ubatch_size=256, cache_type_k="q8_0", cache_type_v="q8_0",
                  flash_attn=True, parallel=4, threads=1)


@pytest.mark.parametrize("arch", sorted(ARCH_MODELS))
def test_four_sequences_on_every_family(arch, model_dir, engine):
    path = model_dir / f"{arch}.gguf"
    write_arch_gguf(path, ARCH_MODELS[arch])
    loaded = engine.load_blocking(path, PARALLEL, device=ROOMY)
    ledger = predict_ledger(read_gguf(path), PARALLEL, ROOMY)
    report = _report(f"{arch}/np4", ledger, loaded)
    assert loaded.n_seq_max == 4, report
    assert within(ledger.kv_bytes, loaded.kv_buffer_bytes), report
    assert within(ledger.compute_bytes, loaded.compute_buffer_bytes), report
    assert ledger.rs_bytes == loaded.rs_buffer_bytes == 0, report
