"""The engine's expected RSS after a prompt of a given length: what a bench's measured peak RSS compares with.

The ledger's total holds the whole compute buffer (its logits area too) and is what must fit the budget;
a process only makes resident the pages it writes. After load: the overhead, the weights and the KV cache
(ledger.predict.predicted_resident). A prompt of n tokens then runs a graph of min(n, n_ubatch) tokens over
n cells (llama.cpp pads the cells a graph reads to 256), writing that graph's attention and feed-forward
part of the compute buffer; the decodes after it run smaller graphs."""

from __future__ import annotations

import dataclasses

from workbench.core.config.preset import Preset
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.compute import predicted_prompt_compute_bytes
from workbench.core.ledger.kv_layers import preset_n_ubatch
from workbench.core.ledger.predict import llama_n_ctx
from workbench.core.ledger.types import Ledger


def expected_rss_after_prompt(model: ModelInfo, preset: Preset, ledger: Ledger, n_prompt: int) -> int | None:
    """Bytes resident after loading with `preset` and reading an `n_prompt`-token prompt; None without the
    ledger's resident figures."""
    if ledger.resident is None:
        return None
    cells = min(llama_n_ctx(model, max(n_prompt, 1)), ledger.ctx_size)
    tokens = min(preset_n_ubatch(preset, ledger.ctx_size), max(n_prompt, 1))  # the prompt's largest ubatch
    graph = dataclasses.replace(preset, ctx_size=cells, batch_size=tokens, ubatch_size=tokens)
    return ledger.resident.after_load_bytes + predicted_prompt_compute_bytes(model, graph, cells)
