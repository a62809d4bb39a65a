"""Tiny random-weight GGUFs of the attention families of 2026 edge boards that llama.cpp loads: deepseek2 with
MLA (the compressed latent cache), deepseek32 and glm-dsa (MLA plus the lightning indexer's key cache of DeepSeek
sparse attention), gemma3n (sliding window, caches shared by the last layers, per-layer embeddings) and gpt-oss
(MXFP4 experts, which the CPU backend repacks).

Tensor names, shapes and the keys each family requires follow llama.cpp 0c1e570 (src/models/deepseek2.cpp,
deepseek32.cpp, glm-dsa.cpp, gemma3n.cpp, openai-moe.cpp: load_arch_hparams / load_arch_tensors) and gguf-py's
MODEL_TENSORS lists. The vocabulary is arch_models' SentencePiece one; the text is noise, the buffers are real.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
from arch_models import ArchModel, _vocabulary
from gguf_cache import cached_writer
from gguf_factory import _add_tensor

from workbench.core.bench.probe_models import write_llama_vocabulary

# gemma3n's fixed hyper-parameters (llama-hparams.h, models.h): not read from the file
GEMMA3N_ALTUP = 4
GEMMA3N_PER_LAYER = 256  # n_embd_altup: each layer's slice of the per-layer token embedding
GEMMA3N_LAUREL_RANK = 64
GEMMA3N_KV_LAYERS = 20  # gemma3n.cpp: n_layer_kv_from_start; later layers reuse layer 18 (window) or 19 (global)


@dataclass(frozen=True)
class AttentionModel:
    arch: str
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 2
    n_head_kv: int = 1
    head_dim: int = 64
    n_ff: int = 384
    n_vocab: int = 32768
    n_ctx_train: int = 16384
    sliding_window: int = 0
    # deepseek2 MLA: the cache holds kv_lora_rank + rope values per cell, one "head", no V
    q_lora_rank: int = 64
    kv_lora_rank: int = 128
    rope_dim: int = 32
    nope_dim: int = 64
    v_head_dim: int = 64
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_expert: int = 0
    n_expert_shared: int = 0
    n_dense_lead: int = 0
    expert_type: str = "Q8_0"
    # DeepSeek-V3's router, as the V3.2 and GLM-5 files carry it: a selection bias per expert (exp_probs_b), the
    # weights normalized and scaled, the experts chosen from the best n_groups_used of n_groups groups
    selection_bias: bool = False
    weights_norm: bool = False
    weights_scale: float = 0.0
    n_groups: int = 0
    n_groups_used: int = 0
    gating: int = 2  # llama_expert_gating_func_type: SIGMOID in the released files (3, SOFTMAX_WEIGHT, in none)
    # DeepSeek sparse attention (deepseek32, glm-dsa): the lightning indexer's heads and key width; its key cache
    # holds indexer_dim values a cell on every "full" indexer layer (indexer_types: 1 full, 0 shared; () all full)
    indexer_heads: int = 0
    indexer_dim: int = 0
    indexer_top_k: int = 0
    indexer_types: tuple[int, ...] = ()
    # MTP (nextn_predict_layers): the last blocks are the multi-token-prediction head, a whole block plus its
    # eh_proj / enorm / hnorm, as DeepSeek-V3.2's 62nd block; llama.cpp loads and caches them only for an MTP
    # draft context (load_mtp), never in the main one
    mtp_layers: int = 0


ATTENTION_MODELS = {
    # DeepSeek-V2-Lite-like proportions at a tiny width: one dense layer, then MoE with a shared expert
    "deepseek2": AttentionModel("deepseek2", n_expert=4, n_expert_used=2, n_ff_expert=64, n_expert_shared=1,
                                n_dense_lead=1),
    # DeepSeek-V3.2's indexer (64 heads x 128 at full size) at a tiny width: every layer keeps indexer keys,
    # its router (256 experts in 8 groups, 4 kept; weights normalized, times 2.5) and its MTP block: 4 layers + 1
    "deepseek32": AttentionModel("deepseek32", n_layer=5, mtp_layers=1, n_expert=4, n_expert_used=2, n_ff_expert=64, n_expert_shared=1,
                                 n_dense_lead=1, indexer_heads=4, indexer_dim=64, indexer_top_k=256,
                                 selection_bias=True, weights_norm=True, weights_scale=2.5, n_groups=2, n_groups_used=1),
    # GLM-5.2's pattern: layers 0-2 and every fourth after compute their own top-k ("full"), the rest reuse it and
    # ship no indexer tensors; 8 layers, so that 4 of them (0, 1, 2, 6) keep indexer keys
    "glm-dsa": AttentionModel("glm-dsa", n_layer=8, n_expert=4, n_expert_used=2, n_ff_expert=64, n_expert_shared=1,
                              n_dense_lead=1, indexer_heads=4, indexer_dim=64, indexer_top_k=256,
                              indexer_types=(1, 1, 1, 0, 0, 0, 1, 0), selection_bias=True, weights_norm=True,
                              weights_scale=2.5),
    # 25 layers, so that the 5 past llama.cpp's 20 cache-owning ones share caches (as Gemma 3n E2B's 30);
    # a 4,096-token vocabulary keeps the per-layer embedding (256 x layers x vocabulary) small
    "gemma3n": AttentionModel("gemma3n", n_layer=25, n_vocab=4096, sliding_window=512),
    # gpt-oss: every other layer slides over a 128-token window; MXFP4 experts as the released files
    "gpt-oss": AttentionModel("gpt-oss", n_head=4, n_head_kv=2, sliding_window=128, n_expert=8, n_expert_used=2,
                              n_ff_expert=256, expert_type="MXFP4"),
}


def _add(writer: gguf.GGUFWriter, name: str, type_name: str, shape: tuple[int, ...], rng: np.random.Generator) -> None:
    if type_name != "MXFP4":
        _add_tensor(writer, name, type_name, shape, rng)
        return
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.MXFP4]
    numpy_shape = tuple(reversed(shape))
    data = rng.integers(0, 256, size=numpy_shape[:-1] + (numpy_shape[-1] // block, size), dtype=np.uint8)
    data[..., 0] = 120  # the E8M0 block scale: 2^-7, so the noise stays finite
    writer.add_tensor(name, data.reshape(numpy_shape[:-1] + (numpy_shape[-1] // block * size,)),
                      raw_dtype=gguf.GGMLQuantizationType.MXFP4)


def _header(writer: gguf.GGUFWriter, model: AttentionModel, key_length: int, value_length: int, n_head_kv: int) -> None:
    arch = model.arch
    writer.add_name(f"tiny-{arch}")
    file_type = gguf.LlamaFileType.MOSTLY_MXFP4_MOE if model.expert_type == "MXFP4" else gguf.LlamaFileType.MOSTLY_Q8_0
    writer.add_file_type(file_type)
    writer.add_block_count(model.n_layer)
    writer.add_embedding_length(model.n_embd)
    writer.add_feed_forward_length(model.n_ff)
    writer.add_head_count(model.n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_key_length(key_length)
    writer.add_value_length(value_length)
    writer.add_context_length(model.n_ctx_train)
    writer.add_layer_norm_rms_eps(1e-6)
    if model.sliding_window:
        writer.add_sliding_window(model.sliding_window)
    if model.n_expert:
        writer.add_expert_count(model.n_expert)
        writer.add_expert_used_count(model.n_expert_used)
        writer.add_expert_feed_forward_length(model.n_ff_expert)
    tokens, types = _vocabulary(ArchModel(arch, n_vocab=model.n_vocab, turn_tokens="gemma" if arch == "gemma3n" else ""))
    write_llama_vocabulary(writer, tokens, types)


@cached_writer
def write_attention_gguf(path: Path, model: AttentionModel, *, seed: int = 0) -> Path:
    """Write `model` as a GGUF the bundled llama.cpp loads and return the path."""
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), arch=model.arch)
    writers = {"deepseek2": _deepseek2, "deepseek32": _deepseek2, "glm-dsa": _deepseek2, "gemma3n": _gemma3n,
               "gpt-oss": _gpt_oss}
    writers[model.arch](writer, model, rng)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _deepseek2(writer: gguf.GGUFWriter, m: AttentionModel, rng: np.random.Generator) -> None:
    # MLA as convert_hf_to_gguf.py writes it: key/value_length are the latent (kv_lora_rank + rope, kv_lora_rank)
    # with one KV head; key/value_length_mla the per-head sizes after decompression
    _header(writer, m, m.kv_lora_rank + m.rope_dim, m.kv_lora_rank, 1)
    arch = m.arch
    writer.add_rope_dimension_count(m.rope_dim)
    writer.add_uint32(f"{arch}.attention.q_lora_rank", m.q_lora_rank)
    writer.add_uint32(f"{arch}.attention.kv_lora_rank", m.kv_lora_rank)
    writer.add_uint32(f"{arch}.attention.key_length_mla", m.nope_dim + m.rope_dim)
    writer.add_uint32(f"{arch}.attention.value_length_mla", m.v_head_dim)
    writer.add_uint32(f"{arch}.leading_dense_block_count", m.n_dense_lead)
    writer.add_uint32(f"{arch}.expert_shared_count", m.n_expert_shared)
    if m.weights_norm:
        writer.add_expert_weights_norm(True)
    if m.weights_scale:
        writer.add_expert_weights_scale(m.weights_scale)
    if m.n_groups:
        writer.add_uint32(f"{arch}.expert_group_count", m.n_groups)
        writer.add_uint32(f"{arch}.expert_group_used_count", m.n_groups_used)
    if m.indexer_dim:
        _indexer_keys(writer, m)
    if m.mtp_layers:
        writer.add_uint32(f"{arch}.nextn_predict_layers", m.mtp_layers)
    k_mla = m.nope_dim + m.rope_dim
    _add(writer, "token_embd.weight", "Q8_0", (m.n_embd, m.n_vocab), rng)
    for il in range(m.n_layer):
        def add(role: str, type_name: str, shape: tuple[int, ...]) -> None:
            _add(writer, f"blk.{il}.{role}", type_name, shape, rng)

        if il >= m.n_layer - m.mtp_layers:
            add("nextn.eh_proj.weight", "Q8_0", (2 * m.n_embd, m.n_embd))
            add("nextn.enorm.weight", "F32", (m.n_embd,))
            add("nextn.hnorm.weight", "F32", (m.n_embd,))
        add("attn_norm.weight", "F32", (m.n_embd,))
        add("attn_q_a.weight", "Q8_0", (m.n_embd, m.q_lora_rank))
        add("attn_q_a_norm.weight", "F32", (m.q_lora_rank,))
        add("attn_q_b.weight", "Q8_0", (m.q_lora_rank, m.n_head * k_mla))
        add("attn_kv_a_mqa.weight", "Q8_0", (m.n_embd, m.kv_lora_rank + m.rope_dim))
        add("attn_kv_a_norm.weight", "F32", (m.kv_lora_rank,))
        add("attn_k_b.weight", "Q8_0", (m.nope_dim, m.kv_lora_rank, m.n_head))
        add("attn_v_b.weight", "Q8_0", (m.kv_lora_rank, m.v_head_dim, m.n_head))
        add("attn_output.weight", "Q8_0", (m.n_head * m.v_head_dim, m.n_embd))
        add("ffn_norm.weight", "F32", (m.n_embd,))
        if m.indexer_dim and (not m.indexer_types or m.indexer_types[il]):
            add("indexer.k_norm.weight", "F32", (m.indexer_dim,))
            add("indexer.k_norm.bias", "F32", (m.indexer_dim,))
            add("indexer.proj.weight", "F32", (m.n_embd, m.indexer_heads))
            add("indexer.attn_k.weight", "Q8_0", (m.n_embd, m.indexer_dim))
            add("indexer.attn_q_b.weight", "Q8_0", (m.q_lora_rank, m.indexer_heads * m.indexer_dim))
        if il < m.n_dense_lead:
            add("ffn_gate.weight", "Q8_0", (m.n_embd, m.n_ff))
            add("ffn_up.weight", "Q8_0", (m.n_embd, m.n_ff))
            add("ffn_down.weight", "Q8_0", (m.n_ff, m.n_embd))
            continue
        add("ffn_gate_inp.weight", "F32", (m.n_embd, m.n_expert))
        if m.selection_bias:
            add("exp_probs_b.bias", "F32", (m.n_expert,))
        add("ffn_gate_exps.weight", m.expert_type, (m.n_embd, m.n_ff_expert, m.n_expert))
        add("ffn_up_exps.weight", m.expert_type, (m.n_embd, m.n_ff_expert, m.n_expert))
        add("ffn_down_exps.weight", m.expert_type, (m.n_ff_expert, m.n_embd, m.n_expert))
        shared = m.n_ff_expert * m.n_expert_shared
        add("ffn_gate_shexp.weight", "Q8_0", (m.n_embd, shared))
        add("ffn_up_shexp.weight", "Q8_0", (m.n_embd, shared))
        add("ffn_down_shexp.weight", "Q8_0", (shared, m.n_embd))
    _add(writer, "output_norm.weight", "F32", (m.n_embd,), rng)
    _add(writer, "output.weight", "Q8_0", (m.n_embd, m.n_vocab), rng)


def _indexer_keys(writer: gguf.GGUFWriter, m: AttentionModel) -> None:
    # the lightning indexer (deepseek32.cpp / glm-dsa.cpp load_arch_hparams); both read the expert gating function
    # (sigmoid in the released files); glm-dsa also reads the per-layer indexer types
    indexer = gguf.Keys.Attention.Indexer
    writer.add_uint32(indexer.HEAD_COUNT.format(arch=m.arch), m.indexer_heads)
    writer.add_uint32(indexer.KEY_LENGTH.format(arch=m.arch), m.indexer_dim)
    writer.add_uint32(indexer.TOP_K.format(arch=m.arch), m.indexer_top_k)
    writer.add_uint32(gguf.Keys.LLM.EXPERT_GATING_FUNC.format(arch=m.arch), m.gating)
    if m.indexer_types:
        writer.add_array(f"{m.arch}.attention.indexer.types", list(m.indexer_types))


def _gemma3n(writer: gguf.GGUFWriter, m: AttentionModel, rng: np.random.Generator) -> None:
    _header(writer, m, m.head_dim, m.head_dim, m.n_head_kv)
    writer.add_rope_dimension_count(m.head_dim)
    per_layer, altup = GEMMA3N_PER_LAYER, GEMMA3N_ALTUP
    n_q, n_kv = m.n_head * m.head_dim, m.n_head_kv * m.head_dim
    _add(writer, "token_embd.weight", "Q8_0", (m.n_embd, m.n_vocab), rng)  # tied: the output reuses it
    _add(writer, "altup_proj.weight", "Q8_0", (m.n_embd, m.n_embd, altup - 1), rng)
    _add(writer, "altup_unembd_proj.weight", "Q8_0", (m.n_embd, m.n_embd, altup - 1), rng)
    _add(writer, "per_layer_token_embd.weight", "Q8_0", (per_layer * m.n_layer, m.n_vocab), rng)
    _add(writer, "per_layer_model_proj.weight", "Q8_0", (m.n_embd, per_layer * m.n_layer), rng)
    _add(writer, "per_layer_proj_norm.weight", "F32", (per_layer,), rng)
    _add(writer, "output_norm.weight", "F32", (m.n_embd,), rng)
    for il in range(m.n_layer):
        def add(role: str, type_name: str, shape: tuple[int, ...]) -> None:
            _add(writer, f"blk.{il}.{role}", type_name, shape, rng)

        add("attn_norm.weight", "F32", (m.n_embd,))
        add("attn_q.weight", "Q8_0", (m.n_embd, n_q))
        add("attn_k.weight", "Q8_0", (m.n_embd, n_kv))
        add("attn_v.weight", "Q8_0", (m.n_embd, n_kv))
        add("attn_output.weight", "Q8_0", (n_q, m.n_embd))
        add("attn_q_norm.weight", "F32", (m.head_dim,))
        add("attn_k_norm.weight", "F32", (m.head_dim,))
        add("post_attention_norm.weight", "F32", (m.n_embd,))
        add("ffn_norm.weight", "F32", (m.n_embd,))
        add("ffn_gate.weight", "Q8_0", (m.n_embd, m.n_ff))
        add("ffn_up.weight", "Q8_0", (m.n_embd, m.n_ff))
        add("ffn_down.weight", "Q8_0", (m.n_ff, m.n_embd))
        add("post_ffw_norm.weight", "F32", (m.n_embd,))
        add("inp_gate.weight", "Q8_0", (m.n_embd, per_layer))
        add("proj.weight", "Q8_0", (per_layer, m.n_embd))
        add("post_norm.weight", "F32", (m.n_embd,))
        add("altup_correct_coef.weight", "F32", (altup, altup))
        add("altup_correct_scale.weight", "F32", (m.n_embd,))
        add("altup_predict_coef.weight", "F32", (altup, altup * altup))
        add("altup_router.weight", "F32", (m.n_embd, altup))
        add("altup_router_norm.weight", "F32", (m.n_embd,))
        add("laurel_l.weight", "Q8_0", (m.n_embd, GEMMA3N_LAUREL_RANK))
        add("laurel_r.weight", "Q8_0", (GEMMA3N_LAUREL_RANK, m.n_embd))
        add("laurel_post_norm.weight", "F32", (m.n_embd,))


def _gpt_oss(writer: gguf.GGUFWriter, m: AttentionModel, rng: np.random.Generator) -> None:
    _header(writer, m, m.head_dim, m.head_dim, m.n_head_kv)
    writer.add_rope_dimension_count(m.head_dim)
    n_q, n_kv = m.n_head * m.head_dim, m.n_head_kv * m.head_dim
    _add(writer, "token_embd.weight", "Q8_0", (m.n_embd, m.n_vocab), rng)
    for il in range(m.n_layer):
        def add(role: str, type_name: str, shape: tuple[int, ...]) -> None:
            _add(writer, f"blk.{il}.{role}", type_name, shape, rng)

        add("attn_norm.weight", "F32", (m.n_embd,))
        add("post_attention_norm.weight", "F32", (m.n_embd,))
        add("attn_q.weight", "Q8_0", (m.n_embd, n_q))
        add("attn_k.weight", "Q8_0", (m.n_embd, n_kv))
        add("attn_v.weight", "Q8_0", (m.n_embd, n_kv))
        add("attn_q.bias", "F32", (n_q,))
        add("attn_k.bias", "F32", (n_kv,))
        add("attn_v.bias", "F32", (n_kv,))
        add("attn_output.weight", "Q8_0", (n_q, m.n_embd))
        add("attn_output.bias", "F32", (m.n_embd,))
        add("attn_sinks.weight", "F32", (m.n_head,))
        add("ffn_gate_inp.weight", "F32", (m.n_embd, m.n_expert))
        add("ffn_gate_inp.bias", "F32", (m.n_expert,))
        add("ffn_gate_exps.weight", m.expert_type, (m.n_embd, m.n_ff_expert, m.n_expert))
        add("ffn_up_exps.weight", m.expert_type, (m.n_embd, m.n_ff_expert, m.n_expert))
        add("ffn_down_exps.weight", m.expert_type, (m.n_ff_expert, m.n_embd, m.n_expert))
        add("ffn_gate_exps.bias", "F32", (m.n_ff_expert, m.n_expert))
        add("ffn_up_exps.bias", "F32", (m.n_ff_expert, m.n_expert))
        add("ffn_down_exps.bias", "F32", (m.n_embd, m.n_expert))
    _add(writer, "output_norm.weight", "F32", (m.n_embd,), rng)
    _add(writer, "output.weight", "Q8_0", (m.n_embd, m.n_vocab), rng)
