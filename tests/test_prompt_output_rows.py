"""A prompt's last layer: llama.cpp picks the output row after its attention in most families, so that layer's
feed-forward runs for one row a prompt, and the speed model prices it so (read once, not multiplied per token)."""

from __future__ import annotations

from pathlib import Path

import pytest
from arch_attention_2026 import ATTENTION_MODELS, write_attention_gguf
from arch_models import ARCH_MODELS, write_arch_gguf
from llama_graph_nodes import prompt_nodes

from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.experts import expert_counts
from workbench.core.ledger.speed_costs import model_costs

N_PROMPT = 16
WRITERS = {
    "llama": lambda path: write_arch_gguf(path, ARCH_MODELS["llama"]),
    "gemma3": lambda path: write_arch_gguf(path, ARCH_MODELS["gemma3"]),
    "olmoe": lambda path: write_arch_gguf(path, ARCH_MODELS["olmoe"]),
    "gpt-oss": lambda path: write_attention_gguf(path, ATTENTION_MODELS["gpt-oss"]),  # picks after the last layer
}


def _ffn_runs_every_token(nodes: list[tuple[str, tuple[int, ...]]], layer: int) -> bool:
    ffn = [shape for name, shape in nodes if name.startswith("ffn_") and name.endswith(f"-{layer}")]
    assert ffn, f"llama.cpp's graph names no feed-forward node of layer {layer}"
    return any(N_PROMPT in shape for shape in ffn)


@pytest.mark.parametrize("arch", list(WRITERS))
def test_the_last_feed_forward_is_priced_as_llama_cpp_runs_it(tmp_path: Path, arch: str):
    path = WRITERS[arch](tmp_path / f"{arch}.gguf")
    info = read_gguf(path)
    last = info.n_layer - 1
    nodes = prompt_nodes(path, N_PROMPT)
    assert _ffn_runs_every_token(nodes, last - 1)  # every other layer's feed-forward runs for each prompt token
    every_token = _ffn_runs_every_token(nodes, last)
    assert every_token == (arch == "gpt-oss")

    experts = expert_counts(info, "keep")
    used, total = (experts.used, experts.total) if experts else (1, 1)

    def share(tensor, amount: int) -> int:  # routed experts count at used/total
        return amount * (used if "_exps." in tensor.name else total) // total

    def flops(tensor) -> int:
        return share(tensor, 2 * tensor.n_elements)

    matrices = [t for t in info.tensors if t.name.startswith("blk.") and len(t.shape) > 1]
    last_ffn = [t for t in matrices if t.name.startswith(f"blk.{last}.ffn_")]
    assert last_ffn
    costs = model_costs(info)
    per_token = sum(flops(t) for t in matrices) - (0 if every_token else sum(flops(t) for t in last_ffn))
    assert sum(f for _, f in costs.prefill_flops) == per_token
    # the output layer, and the last feed-forward where it runs for the output row only, are read once
    output = next((t for t in info.tensors if t.name == "output.weight"), None)
    output = output or next(t for t in info.tensors if t.name == "token_embd.weight")
    once = 0 if every_token else sum(share(t, t.n_bytes) for t in last_ffn)
    assert sum(n for _, n in costs.output_bytes) == output.n_bytes + once
