"""Tiny random-weight GGUFs of each architecture family that llama.cpp loads (the text is noise; the buffers are real).

Tensor names, shapes and required keys follow llama.cpp 0c1e570, src/models/<arch>.cpp
(load_arch_hparams / load_arch_tensors) and gguf-py's constants. The vocabulary is a
SentencePiece ("llama") one: <unk> <s> </s>, the 256 byte tokens, the family's turn tokens
(as control tokens, the way converters write them) and filler pieces up to `n_vocab`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import gguf
import numpy as np
from gguf_cache import cached_writer
from gguf_factory import _add_tensor

from workbench.core.bench.probe_models import write_llama_vocabulary

# Turn tokens by family, as the converted models carry them.
TURN_TOKENS = {
    "gemma": ("<start_of_turn>", "<end_of_turn>"),
    "llama3": ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
    "chatml": ("<|im_start|>", "<|im_end|>"),
    "phi3": ("<|user|>", "<|assistant|>", "<|end|>", "<|system|>", "<|endoftext|>"),  # llama.cpp needs <|endoftext|> for phi3
    "granite": ("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"),
}


@dataclass(frozen=True)
class ArchModel:
    """One tiny model of an architecture family."""

    arch: str
    # Proportions of a small real model: a vocabulary 256x n_embd (SmolLM2 85x, Qwen3-0.6B 148x,
    # Gemma 3 1B 227x), a query as wide as n_embd (Llama, Qwen3-1.7B/8B), grouped KV heads.
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 2
    n_head_kv: int = 1
    head_dim: int = 64
    n_ff: int = 384
    n_vocab: int = 32768
    n_ctx_train: int = 8192
    weight_type: str = "Q8_0"
    tied_embeddings: bool = False
    qkv_bias: bool = False
    qk_norm: str = ""  # "": none, "head": per head (qwen3, gemma3), "full": over n_embd (olmoe)
    post_norms: bool = False  # gemma2/3: attn_post_norm and ffn_post_norm
    fused_qkv: bool = False  # phi3: attn_qkv, and ffn_up holds gate and up
    sliding_window: int = 0  # written as <arch>.attention.sliding_window when > 0
    sliding_window_pattern: int | tuple[bool, ...] | None = None
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_expert: int = 0
    n_ff_shared: int = 0  # qwen2moe's shared expert
    extra_keys: dict = field(default_factory=dict)  # arch-relative key -> float (granite's scales)
    turn_tokens: str = ""  # a TURN_TOKENS family
    chat_template: str | None = None
    name: str = ""
    output_bias_token: str = ""  # an output.bias that makes this token win every time (qwen2 reads output.bias)


ARCH_MODELS: dict[str, ArchModel] = {
    "llama": ArchModel("llama", turn_tokens="llama3"),
    "qwen2": ArchModel("qwen2", qkv_bias=True, turn_tokens="chatml"),
    "qwen3": ArchModel("qwen3", qk_norm="head", turn_tokens="chatml"),
    "gemma2": ArchModel("gemma2", n_layer=6, tied_embeddings=True, post_norms=True, sliding_window=512,
                        turn_tokens="gemma"),
    # Gemma 3's real vocabulary (262,144), tied embeddings, SWA on 5 of every 6 layers.
    "gemma3": ArchModel("gemma3", n_layer=8, n_vocab=262144, tied_embeddings=True, qk_norm="head", post_norms=True,
                        sliding_window=512, turn_tokens="gemma"),
    "phi3": ArchModel("phi3", n_head_kv=2, fused_qkv=True, turn_tokens="phi3"),  # no grouped KV, as Phi-3 mini
    "granite": ArchModel("granite", turn_tokens="granite", extra_keys={
        "logit_scale": 8.0, "residual_scale": 0.22, "embedding_scale": 12.0, "attention.scale": 0.0078125}),
    # olmoe sizes its experts with feed_forward_length (llama.cpp olmoe.cpp), like the real OLMoE (1024);
    # its k-norm spans n_embd, so KV heads = query heads
    "olmoe": ArchModel("olmoe", qk_norm="full", n_head_kv=2, n_ff=128, n_expert=8, n_expert_used=2, n_ff_expert=128),
    "qwen2moe": ArchModel("qwen2moe", qkv_bias=True, n_expert=8, n_expert_used=2, n_ff_expert=128,
                          n_ff_shared=256, turn_tokens="chatml"),
    "qwen3moe": ArchModel("qwen3moe", qk_norm="head", n_expert=8, n_expert_used=2, n_ff_expert=128,
                          turn_tokens="chatml"),
}


def _vocabulary(model: ArchModel) -> tuple[list[str], list[int]]:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{byte:02X}>" for byte in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    for token in TURN_TOKENS.get(model.turn_tokens, ()):
        tokens.append(token)
        types.append(gguf.TokenType.CONTROL)
    # Filler pieces: single letters first (so text tokenizes), then numbered pieces.
    letters = [f"\u2581{c}" for c in "abcdefghijklmnopqrstuvwxyz"] + list("abcdefghijklmnopqrstuvwxyz.,!?")
    for piece in letters:
        if len(tokens) < model.n_vocab:
            tokens.append(piece)
            types.append(gguf.TokenType.NORMAL)
    tokens += [f"\u2581p{i}" for i in range(model.n_vocab - len(tokens))]
    types += [gguf.TokenType.NORMAL] * (model.n_vocab - len(types))
    return tokens, [int(t) for t in types]


def write_shape_keys(writer: gguf.GGUFWriter, model: ArchModel, head_count_kv: int | list[int] | None = None) -> None:
    """The hyperparameters every family reads (layers, widths, heads: one KV count or one per layer, context),
    the experts' and the family's own scalar keys."""
    writer.add_block_count(model.n_layer)
    writer.add_embedding_length(model.n_embd)
    writer.add_feed_forward_length(model.n_ff)
    writer.add_head_count(model.n_head)
    writer.add_head_count_kv(model.n_head_kv if head_count_kv is None else head_count_kv)
    writer.add_key_length(model.head_dim)
    writer.add_value_length(model.head_dim)
    writer.add_rope_dimension_count(model.head_dim)
    writer.add_context_length(model.n_ctx_train)
    writer.add_layer_norm_rms_eps(1e-6)
    if model.n_expert:
        writer.add_expert_count(model.n_expert)
        writer.add_expert_used_count(model.n_expert_used)
        if model.n_ff_expert:  # else llama.cpp sizes the experts with feed_forward_length
            writer.add_expert_feed_forward_length(model.n_ff_expert)
    if model.n_ff_shared:
        writer.add_expert_shared_feed_forward_length(model.n_ff_shared)
    for key, value in model.extra_keys.items():
        writer.add_float32(f"{model.arch}.{key}", value)


@cached_writer
def write_arch_gguf(path: Path, model: ArchModel, *, seed: int = 0) -> Path:
    """Write `model` as a GGUF llama.cpp loads and return the path."""
    rng = np.random.default_rng(seed)
    arch = model.arch
    writer = gguf.GGUFWriter(str(path), arch=arch)
    writer.add_name(model.name or f"tiny-{arch}")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if model.weight_type == "Q8_0" else gguf.LlamaFileType.MOSTLY_F16)
    write_shape_keys(writer, model)
    if model.sliding_window:
        writer.add_sliding_window(model.sliding_window)
    if isinstance(model.sliding_window_pattern, tuple):
        writer.add_array(f"{arch}.attention.sliding_window_pattern", list(model.sliding_window_pattern))
    elif model.sliding_window_pattern:
        writer.add_uint32(f"{arch}.attention.sliding_window_pattern", model.sliding_window_pattern)

    tokens, types = _vocabulary(model)
    write_llama_vocabulary(writer, tokens, types)
    if model.turn_tokens == "gemma":
        writer.add_eot_token_id(tokens.index("<end_of_turn>"))
    if model.chat_template:
        writer.add_chat_template(model.chat_template)

    wtype = model.weight_type
    n_q, n_kv = model.n_head * model.head_dim, model.n_head_kv * model.head_dim
    _add_tensor(writer, "token_embd.weight", wtype, (model.n_embd, model.n_vocab), rng)
    for il in range(model.n_layer):
        def add(role: str, type_name: str, shape: tuple[int, ...]) -> None:
            _add_tensor(writer, f"blk.{il}.{role}", type_name, shape, rng)

        add("attn_norm.weight", "F32", (model.n_embd,))
        if model.fused_qkv:
            add("attn_qkv.weight", wtype, (model.n_embd, n_q + 2 * n_kv))
        else:
            add("attn_q.weight", wtype, (model.n_embd, n_q))
            add("attn_k.weight", wtype, (model.n_embd, n_kv))
            add("attn_v.weight", wtype, (model.n_embd, n_kv))
        if model.qkv_bias:
            add("attn_q.bias", "F32", (n_q,))
            add("attn_k.bias", "F32", (n_kv,))
            add("attn_v.bias", "F32", (n_kv,))
        if model.qk_norm == "head":
            add("attn_q_norm.weight", "F32", (model.head_dim,))
            add("attn_k_norm.weight", "F32", (model.head_dim,))
        elif model.qk_norm == "full":
            add("attn_q_norm.weight", "F32", (n_q,))
            add("attn_k_norm.weight", "F32", (n_kv,))
        add("attn_output.weight", wtype, (n_q, model.n_embd))
        if model.post_norms:
            add("post_attention_norm.weight", "F32", (model.n_embd,))
            add("post_ffw_norm.weight", "F32", (model.n_embd,))
        add("ffn_norm.weight", "F32", (model.n_embd,))
        if model.n_expert:
            add("ffn_gate_inp.weight", "F32", (model.n_embd, model.n_expert))
            for role in ("ffn_gate_exps", "ffn_up_exps"):
                add(f"{role}.weight", wtype, (model.n_embd, model.n_ff_expert, model.n_expert))
            add("ffn_down_exps.weight", wtype, (model.n_ff_expert, model.n_embd, model.n_expert))
            if model.n_ff_shared:
                add("ffn_gate_inp_shexp.weight", "F32", (model.n_embd,))
                add("ffn_gate_shexp.weight", wtype, (model.n_embd, model.n_ff_shared))
                add("ffn_up_shexp.weight", wtype, (model.n_embd, model.n_ff_shared))
                add("ffn_down_shexp.weight", wtype, (model.n_ff_shared, model.n_embd))
        elif model.fused_qkv:
            add("ffn_up.weight", wtype, (model.n_embd, 2 * model.n_ff))
            add("ffn_down.weight", wtype, (model.n_ff, model.n_embd))
        else:
            add("ffn_gate.weight", wtype, (model.n_embd, model.n_ff))
            add("ffn_up.weight", wtype, (model.n_embd, model.n_ff))
            add("ffn_down.weight", wtype, (model.n_ff, model.n_embd))
    _add_tensor(writer, "output_norm.weight", "F32", (model.n_embd,), rng)
    if not model.tied_embeddings:
        _add_tensor(writer, "output.weight", wtype, (model.n_embd, model.n_vocab), rng)
    if model.output_bias_token:
        bias = np.zeros(model.n_vocab, dtype=np.float32)
        bias[tokens.index(model.output_bias_token)] = 1e4  # far above any logit random weights give
        writer.add_tensor("output.bias", bias)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def arch_model(arch: str, **changes: object) -> ArchModel:
    """The family's tiny model, optionally changed (e.g. no turn tokens, a template)."""
    return replace(ARCH_MODELS[arch], **changes)
