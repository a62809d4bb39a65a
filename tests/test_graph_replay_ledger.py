"""The compute buffer laid out by the ledger's replay of ggml-alloc over each family's reserve graph
(ledger/graph_families.py), against the buffer llama.cpp reports when the real engine loads tiny files.

The hybrids run with a 2,048-token vocabulary too: with the tests' 32k vocabulary the logits are the peak and
hide the recurrent layers' graph stage. Long contexts with ubatch 128 are where a count of live tensors missed by
a fraction of a MiB; several sequences change the reserve ubatch (one sequence per state); q8_0 K/V adds the
Hadamard rotation's inputs and products. qwen2 and a qwen3 with a wide query stand for the dense decoders, qwen2moe (a shared
expert) and olmoe (Q/K normed over their width) for the mixtures of experts.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from arch_attention_2026 import ATTENTION_MODELS, write_attention_gguf
from arch_models import ARCH_MODELS, write_arch_gguf
from arch_recurrent import RECURRENT_MODELS, write_recurrent_gguf
from real_engine import ROOMY

from workbench.core.config.preset import Preset
from workbench.core.engine.client import EngineClient
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.graph_families import laid_out_compute_bytes
from workbench.core.ledger.predict import predict_ledger

MIB = 1024 * 1024
LOG_ROUNDING = 0.006 * MIB  # llama.cpp prints the buffer in MiB with two decimals


def _small_vocab(arch: str):
    model = RECURRENT_MODELS[arch]
    return replace(model, base=replace(model.base, n_vocab=2048))


WRITERS = {
    "granitehybrid-v2k": lambda path: write_recurrent_gguf(path, _small_vocab("granitehybrid")),
    "qwen3next-v2k": lambda path: write_recurrent_gguf(path, _small_vocab("qwen3next")),
    "lfm2-v2k": lambda path: write_recurrent_gguf(path, _small_vocab("lfm2")),
    "qwen3next": lambda path: write_recurrent_gguf(path, RECURRENT_MODELS["qwen3next"]),
    "gemma3": lambda path: write_arch_gguf(path, ARCH_MODELS["gemma3"]),
    "gpt-oss": lambda path: write_attention_gguf(path, ATTENTION_MODELS["gpt-oss"]),
    "qwen2": lambda path: write_arch_gguf(path, ARCH_MODELS["qwen2"]),
    "qwen2moe": lambda path: write_arch_gguf(path, ARCH_MODELS["qwen2moe"]),
    "olmoe": lambda path: write_arch_gguf(path, ARCH_MODELS["olmoe"]),
    # a query twice n_embd wide (Qwen3-0.6B/4B): where the logits land moves with the context
    "qwen3-2xq": lambda path: write_arch_gguf(path, replace(ARCH_MODELS["qwen3"], n_head=4)),
}

# (ctx, ubatch, K type, V type, flash attention, sequences); without flash attention V stays f16
SETTINGS = ((2048, 512, "q8_0", "q8_0", True, 1), (8192, 512, "f16", "f16", True, 4), (3840, 256, "q8_0", "q8_0", True, 1),
            (2048, 256, "q8_0", "q8_0", True, 4), (4096, 128, "q4_0", "q4_0", True, 1),
            (65536, 128, "q8_0", "q8_0", True, 1), (2048, 512, "f16", "f16", False, 1), (8192, 256, "f16", "f16", False, 4),
            (4096, 512, "q8_0", "f16", False, 1))


@pytest.fixture(scope="module")
def engine():
    """One engine process for the module: each load makes a new context, whatever was loaded before."""
    with EngineClient() as client:
        yield client


@pytest.fixture(scope="module", params=sorted(WRITERS))
def family(request, tmp_path_factory, engine):
    return request.param, WRITERS[request.param](tmp_path_factory.mktemp("graph-replay") / f"{request.param}.gguf"), engine


@pytest.mark.parametrize("ctx,ubatch,k,v,flash,n_seq", SETTINGS,
                         ids=[f"ctx{c}-ub{u}-{k}-{v}-{'fa' if f else 'nofa'}-np{n}" for c, u, k, v, f, n in SETTINGS])
def test_compute_buffer_is_llama_cpps(family, ctx, ubatch, k, v, flash, n_seq):
    label, path, client = family
    preset = Preset(f"{label}-{ctx}", ctx_size=ctx, batch_size=ubatch, ubatch_size=ubatch, cache_type_k=k,
                    cache_type_v=v, flash_attn=flash, parallel=n_seq, threads=1)
    loaded = client.load_blocking(path, preset, device=ROOMY)
    model = read_gguf(path)
    ledger = predict_ledger(model, preset, ROOMY)
    assert laid_out_compute_bytes(model, preset, ledger.ctx_size) == ledger.compute_bytes  # the replay is the line
    report = (f"{label} {preset.name} ub{ubatch} {k}/{v} flash={flash} np{n_seq}: ledger {ledger.compute_bytes / MIB:.3f} MiB, "
              f"llama.cpp {loaded.compute_buffer_bytes / MIB:.3f} MiB")
    assert abs(ledger.compute_bytes - loaded.compute_buffer_bytes) <= 0.001 * loaded.compute_buffer_bytes + LOG_ROUNDING, \
        report


# MLA with DeepSeek sparse attention (graph_mla): llama.cpp makes no context for an MLA cache without flash attention
# unless K and V are both f16 (V quantization needs flash attention, and MLA one type for both)
DSA_SETTINGS = ((8192, 512, "f16", "f16", False, 1), (8192, 512, "f16", "f16", True, 1),
                (2048, 256, "q8_0", "q8_0", True, 4), (2048, 512, "f16", "f16", False, 4))


@pytest.fixture(scope="module", params=["deepseek32", "glm-dsa"])
def dsa_family(request, tmp_path_factory, engine):
    path = write_attention_gguf(tmp_path_factory.mktemp("graph-replay") / f"{request.param}.gguf",
                                ATTENTION_MODELS[request.param])
    return request.param, path, engine


@pytest.mark.parametrize("ctx,ubatch,k,v,flash,n_seq", DSA_SETTINGS,
                         ids=[f"ctx{c}-ub{u}-{k}-{'fa' if f else 'nofa'}-np{n}" for c, u, k, v, f, n in DSA_SETTINGS])
def test_dsa_compute_buffer_is_llama_cpps(dsa_family, ctx, ubatch, k, v, flash, n_seq):
    test_compute_buffer_is_llama_cpps(dsa_family, ctx, ubatch, k, v, flash, n_seq)
