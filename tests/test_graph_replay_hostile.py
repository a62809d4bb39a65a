"""A hostile header cannot size the allocator replay's walk: counts llama.cpp would refuse fall back on the formula."""

from __future__ import annotations

import threading
from dataclasses import replace

from arch_attention_2026 import ATTENTION_MODELS, write_attention_gguf
from arch_recurrent import RECURRENT_MODELS, write_recurrent_gguf

from workbench.core.config.preset import Preset
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.graph_families import MAX_EXPERTS, laid_out_compute_bytes

FLASH = Preset("flash", ctx_size=2048, threads=1, flash_attn=True)
LIVENESS_S = 60  # the honest file's replay takes milliseconds; ten million experts used would take hours


def _laid_out(path) -> list:
    """laid_out_compute_bytes in a thread, so that a walk sized by the header fails the test instead of hanging it."""
    result: list = []
    worker = threading.Thread(target=lambda: result.append(laid_out_compute_bytes(read_gguf(path), FLASH, 2048)),
                              daemon=True)
    worker.start()
    worker.join(LIVENESS_S)
    assert not worker.is_alive(), "the replay walked a graph the header sized"
    return result


def test_more_experts_used_than_the_file_has_is_not_laid_out(tmp_path):
    honest = RECURRENT_MODELS["granitehybrid"]
    assert _laid_out(write_recurrent_gguf(tmp_path / "honest.gguf", honest))[0] > 0
    hostile = replace(honest, base=replace(honest.base, n_expert_used=10**7))  # expert_used_count in the header
    assert _laid_out(write_recurrent_gguf(tmp_path / "used.gguf", hostile)) == [None]


def test_more_experts_than_llama_cpp_allows_is_not_laid_out(tmp_path):
    honest = RECURRENT_MODELS["granitehybrid"]
    hostile = replace(honest, base=replace(honest.base, n_expert=MAX_EXPERTS + 1))
    assert _laid_out(write_recurrent_gguf(tmp_path / "experts.gguf", hostile)) == [None]


def test_an_indexer_llama_cpp_would_refuse_is_not_laid_out(tmp_path):
    """deepseek32's rotation is as wide as the indexer keys only for a power of two (ggml_mul_mat asserts it) and
    its rope part must fit in them (deepseek32.cpp asserts it); expert groups must divide the experts, two or more
    to a group, and keep no more groups than there are (ggml_argsort_top_k asserts it): a header saying otherwise
    gets the formula."""
    honest = ATTENTION_MODELS["deepseek32"]
    assert _laid_out(write_attention_gguf(tmp_path / "honest.gguf", honest))[0] > 0
    for name, hostile in (("width", replace(honest, indexer_dim=96)), ("rope", replace(honest, indexer_dim=16)),
                          ("used", replace(honest, n_expert_used=10**7)),
                          ("groups", replace(honest, n_groups=3)), ("kept", replace(honest, n_groups_used=5))):
        assert _laid_out(write_attention_gguf(tmp_path / f"{name}.gguf", hostile)) == [None], name
