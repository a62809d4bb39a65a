"""Reserve graphs of whole models, one builder per family, laid out by graph_alloc.

Each builder follows its llama.cpp 0c1e570 model file (src/models/<family>.cpp) layer by layer
with the blocks of graph_layers, graph_recurrent and graph_mla; `laid_out_compute_bytes` is the compute buffer
llama.cpp reserves for it: the peak of ggml-alloc over the graph of one full ubatch (every token an
output, all n_ctx cells visible) or of one token per sequence, whichever is higher. Every builder
was checked node by node against the address llama.cpp gives each tensor of that graph (read
through its eval callback on a ubatch that fills the cache, so that its graph is the reserve
one): same ops, shapes and offsets, and the same buffer size, for the tests' tiny files at
ctx 2048-8192, ubatch 256-512, f16 and q8_0 K/V, flash attention on and off.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from workbench.core.config.preset import Preset
from workbench.core.gguf.checks import MAX_LAYERS
from workbench.core.gguf.ggml_types import cache_type
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.graph_build import Graph
from workbench.core.ledger.graph_layers import (
    Route,
    Shape,
    attention,
    declare_inputs,
    dense_ffn,
    embeddings,
    hadamard_side,
    moe_ffn,
    shared_expert,
)
from workbench.core.ledger.graph_mla import MlaShape, indexer_rotation_side, mla_graph
from workbench.core.ledger.graph_recurrent import delta_net, mamba2, shortconv
from workbench.core.ledger.indexer_cache import indexer_cache
from workbench.core.ledger.kv_layers import kv_cells, preset_n_ubatch, sliding_window
from workbench.core.ledger.mtp import mtp_layers
from workbench.core.ledger.recurrent import recurrent_state
from workbench.core.ledger.sequences import preset_kv_unified, preset_n_seq


@dataclass(frozen=True)
class FamilyGraph:
    """What a family's builder needs: the widths, which layers are recurrent / slide, and the options
    its model file switches on from the tensors the file has."""

    shape: Shape
    recurrent: tuple[bool, ...]
    n_vocab: int
    scaled: frozenset[str] = frozenset()  # granite's embedding / residual / logit scales that are set
    swa: tuple[bool, ...] = ()  # per layer: it reads the sliding-window cache
    swa_cells: int = 0
    architecture: str = ""
    qk_norm: bool | str = False  # per-head Q and K norms (qwen3); "full": over their whole width (olmoe)
    qkv_bias: bool = False  # biases on Q, K and V (qwen2)
    mla: MlaShape | None = None  # deepseek2 / deepseek32 / glm-dsa: the latent and indexer widths (graph_mla)


def _granite_hybrid(f: FamilyGraph) -> Graph:
    """src/models/granite-hybrid.cpp: Mamba2 or attention, then the feed-forward: routed experts (plus an
    ungated shared expert where the file has one) or a dense SwiGLU."""
    g, s = Graph(), f.shape
    inp = declare_inputs(g, s, recurrent=any(f.recurrent))
    x = embeddings(g, s, inp, f.n_vocab, scaled="embedding" in f.scaled)
    for il, recurrent in enumerate(f.recurrent):
        residual = x
        cur = g.rms_norm(x)
        cur = mamba2(g, s, inp, cur) if recurrent else attention(g, s, inp, cur)
        if il == len(f.recurrent) - 1:
            cur, residual = g.get_rows(cur, inp.out_ids), g.get_rows(residual, inp.out_ids)
        x = g.same("ADD", g.same("SCALE", cur) if "residual" in f.scaled else cur, residual)
        cur = g.rms_norm(x)
        if s.n_expert:
            routed = moe_ffn(g, s, cur, norm_weights=True)
            cur = shared_expert(g, s, cur, routed, gate="") if s.n_ff_shared else routed
        else:
            cur = dense_ffn(g, s, cur)
        x = g.same("ADD", g.same("SCALE", cur) if "residual" in f.scaled else cur, x)
    logits = g.mul_mat(g.weight(), g.rms_norm(x), f.n_vocab)
    g.expand(g.same("SCALE", logits) if "logit" in f.scaled else logits)
    return g


def _qwen3next(f: FamilyGraph) -> Graph:
    """src/models/qwen3next.cpp: gated delta net or gated attention (Q and K normed), a post-attention norm,
    the routed experts plus a sigmoid-gated shared expert; the output rows are picked after the final norm."""
    g, s = Graph(), f.shape
    inp = declare_inputs(g, s, recurrent=any(f.recurrent))
    x = embeddings(g, s, inp, f.n_vocab)
    for recurrent in f.recurrent:
        cur = g.rms_norm(x)
        if recurrent:
            cur = delta_net(g, s, inp, g.expand(cur))
        else:
            cur = attention(g, s, inp, cur, qk_norm=True, q_gate=True)
        residual = g.same("ADD", cur, x)
        cur = g.rms_norm(residual)
        routed = moe_ffn(g, s, cur, norm_weights=True)
        x = g.same("ADD", shared_expert(g, s, cur, routed) if s.n_ff_shared else routed, residual)
    hidden = g.rms_norm(x)
    hidden.is_output = True  # the model's embeddings output (t_embd) is the normed state before the row pick
    g.expand(g.mul_mat(g.weight(), g.get_rows(hidden, inp.out_ids), f.n_vocab))
    return g


def _lfm2(f: FamilyGraph) -> Graph:
    """src/models/lfm2.cpp: short convolution or attention (Q and K normed), a dense SwiGLU feed-forward."""
    g, s = Graph(), f.shape
    inp = declare_inputs(g, s, recurrent=any(f.recurrent))
    x = embeddings(g, s, inp, f.n_vocab)
    for il, recurrent in enumerate(f.recurrent):
        residual = x
        cur = g.rms_norm(x)
        cur = shortconv(g, s, inp, cur) if recurrent else attention(g, s, inp, cur, qk_norm=True)
        if il == len(f.recurrent) - 1:
            residual, cur = g.get_rows(residual, inp.out_ids), g.get_rows(cur, inp.out_ids)
        residual = g.same("ADD", residual, cur)
        x = g.same("ADD", residual, dense_ffn(g, s, g.rms_norm(residual)))
    g.expand(g.mul_mat(g.weight(), g.rms_norm(x), f.n_vocab))
    return g


def _gemma3(f: FamilyGraph) -> Graph:
    """src/models/gemma3.cpp with a sliding window (llm_build_gemma3<iswa>): scaled embeddings; Q and K normed,
    Q scaled after RoPE; post-attention and post-feed-forward norms; a GELU-gated feed-forward."""
    g, s = Graph(), f.shape
    inp = declare_inputs(g, s, swa_cells=f.swa_cells)
    x = embeddings(g, s, inp, f.n_vocab, scaled=True)
    for il, swa in enumerate(f.swa):
        cur = attention(g, s, inp, g.rms_norm(x), qk_norm=True, swa=swa, q_scale=True)
        residual = x
        if il == len(f.swa) - 1:
            cur, residual = g.get_rows(cur, inp.out_ids), g.get_rows(residual, inp.out_ids)
        sa_out = g.same("ADD", g.rms_norm(cur), residual)
        x = g.same("ADD", g.rms_norm(dense_ffn(g, s, g.rms_norm(sa_out))), sa_out)
    g.expand(g.mul_mat(g.weight(), g.rms_norm(x), f.n_vocab))
    return g


def _openai_moe(f: FamilyGraph) -> Graph:
    """src/models/openai-moe.cpp (gpt-oss): attention with biases and sinks over alternating window and full
    caches, a post-attention norm, biased experts under SOFTMAX_WEIGHT gating; the output rows picked after
    the last layer."""
    g, s = Graph(), f.shape
    inp = declare_inputs(g, s, swa_cells=f.swa_cells)
    x = embeddings(g, s, inp, f.n_vocab)
    for swa in f.swa:
        ffn_inp = g.same("ADD", attention(g, s, inp, g.rms_norm(x), swa=swa, bias=True), x)
        x = g.same("ADD", moe_ffn(g, s, g.rms_norm(ffn_inp), softmax_after=True, bias=True), ffn_inp)
    # the last layer's output stays live to the end: llama.cpp gives it an address no later tensor reuses, as
    # an output's (this llama.cpp picks the output rows from it after the last layer and keeps it as a result)
    x.is_output = True
    g.expand(g.mul_mat(g.weight(), g.rms_norm(g.get_rows(x, inp.out_ids)), f.n_vocab))
    return g


def _dense(f: FamilyGraph) -> Graph:
    """src/models/llama.cpp, qwen2.cpp (Q/K/V biases), qwen3.cpp (Q/K norms) and their mixture-of-experts kin
    qwen2moe.cpp (softmax router, a shared expert gated by silu(x)/x), qwen3moe.cpp (weights normalized) and
    olmoe.cpp (Q/K normed over their whole width): attention and a SwiGLU feed-forward; the last layer picks
    the output rows of the attention output and its residual."""
    g, s = Graph(), f.shape
    inp = declare_inputs(g, s)
    x = embeddings(g, s, inp, f.n_vocab)
    for il in range(len(f.recurrent)):
        cur = attention(g, s, inp, g.rms_norm(x), qk_norm=f.qk_norm, bias=f.qkv_bias, out_bias=False)
        residual = x
        if il == len(f.recurrent) - 1:
            cur, residual = g.get_rows(cur, inp.out_ids), g.get_rows(residual, inp.out_ids)
        ffn_inp = g.same("ADD", cur, residual)
        cur = g.rms_norm(ffn_inp)
        if s.n_expert:
            routed = moe_ffn(g, s, cur, norm_weights=f.architecture == "qwen3moe")
            cur = shared_expert(g, s, cur, routed, gate="silu_div") if s.n_ff_shared else routed
        else:
            cur = dense_ffn(g, s, cur)
        x = g.same("ADD", cur, ffn_inp)
    g.expand(g.mul_mat(g.weight(), g.rms_norm(x), f.n_vocab))
    return g


def _mla(f: FamilyGraph) -> Graph:
    assert f.mla is not None
    return mla_graph(f.shape, f.mla, f.n_vocab)


_BUILDERS = {"deepseek2": _mla, "deepseek32": _mla, "glm-dsa": _mla, "llama": _dense, "qwen2": _dense, "qwen3": _dense, "qwen2moe": _dense, "qwen3moe": _dense, "olmoe": _dense, "gpt-oss": _openai_moe, "gemma3": _gemma3, "granitehybrid": _granite_hybrid, "qwen3next": _qwen3next, "lfm2": _lfm2}


# The families whose graph picks the output rows after the last layer (above); every other model file of
# llama.cpp picks them after the last layer's attention, so that its feed-forward runs for the output rows only.
ROWS_PICKED_AFTER_LAST_LAYER = frozenset({"gpt-oss", "qwen3next"})

_SLIDING = frozenset({"gemma3", "gpt-oss"})


def _metadata_int(model: ModelInfo, name: str) -> int:
    value = model.metadata.get(f"{model.architecture}.{name}")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _rows(model: ModelInfo, *suffixes: str) -> int:
    """The output width of the first tensor named with one of `suffixes` (ggml's ne[1]), 0 without one."""
    for tensor in model.tensors:
        if tensor.name.endswith(suffixes) and len(tensor.shape) >= 2:
            return tensor.shape[1]
    return 0


def family_graph(model: ModelInfo, preset: Preset, n_ctx: int) -> FamilyGraph | None:
    """The reserve graph's description for `model` under `preset`, or None where no builder lays it out."""
    if model.architecture not in _BUILDERS or not 1 <= model.n_layer <= MAX_LAYERS:
        return None
    if _BUILDERS[model.architecture] is _mla:
        return _mla_family(model, preset, n_ctx)
    if model.head_dim_k != model.head_dim_v:
        return None
    names = {tensor.name for tensor in model.tensors}
    if _BUILDERS[model.architecture] is _dense and (any(name.endswith("attn_qkv.weight") for name in names) or (
            model.architecture == "llama" and (_metadata_int(model, "expert_count") > 1
                                               or any(name.endswith("ffn_gate_exps.weight") for name in names)))):
        return None  # a fused QKV projection, or a llama with experts (Mixtral's layout), is another graph
    n_ubatch = preset_n_ubatch(preset, n_ctx)
    n_seq = preset_n_seq(preset)
    unified = preset_kv_unified(preset)
    cells = kv_cells(model, n_ctx, n_ubatch=n_ubatch, swa_full=preset.swa_full, n_seq=n_seq, kv_unified=unified)
    window = sliding_window(model)
    if (model.architecture in _SLIDING) != (window is not None):  # these builders are the sliding-window ones
        return None
    state = recurrent_state(model)
    recurrent = state.is_recurrent if state is not None else (False,) * model.n_layer
    attn_heads = [model.kv_heads(il) for il in range(model.n_layer) if not recurrent[il]]
    if len(set(attn_heads)) > 1:
        return None
    hd = model.head_dim_k
    shape = Shape(
        n_embd=model.n_embd, n_head=model.n_head, n_head_kv=attn_heads[0] if attn_heads else model.n_head_kv,
        head_dim=hd, n_tokens=min(n_ubatch, n_ctx), n_kv=cells.global_cells, n_seqs=n_seq, n_rs=n_seq,
        rot_k=hadamard_side(hd, cache_type(preset.cache_type_k).quantized, value=False),
        rot_v=hadamard_side(hd, cache_type(preset.cache_type_v).quantized, value=True), flash=preset.flash_attn,
        n_ff=_metadata_int(model, "expert_feed_forward_length") or _rows(model, "ffn_up.weight", "ffn_up_exps.weight"),
        n_ff_shared=_metadata_int(model, "expert_shared_feed_forward_length") or _rows(model, "ffn_up_shexp.weight"),
        n_expert=_metadata_int(model, "expert_count"), n_expert_used=_metadata_int(model, "expert_used_count"),
        d_conv=_metadata_int(model, "ssm.conv_kernel") or _metadata_int(model, "shortconv.l_cache"), d_inner=_metadata_int(model, "ssm.inner_size"),
        d_state=_metadata_int(model, "ssm.state_size"), ssm_heads=_metadata_int(model, "ssm.time_step_rank"),
        ssm_groups=_metadata_int(model, "ssm.group_count"))
    if not _laid_out_bounds(shape):
        return None
    scaled = frozenset(name for name in ("embedding", "residual", "logit")
                       if model.metadata.get(f"{model.architecture}.{name}_scale"))
    return FamilyGraph(shape=shape, recurrent=recurrent, n_vocab=model.n_vocab, scaled=scaled,
                       swa=window.is_swa if window is not None else (), swa_cells=cells.swa_cells,
                       architecture=model.architecture, qkv_bias="blk.0.attn_q.bias" in names,
                       qk_norm=("full" if model.architecture == "olmoe" else True) if "blk.0.attn_q_norm.weight" in names
                       else False)


def _mla_family(model: ModelInfo, preset: Preset, n_ctx: int) -> FamilyGraph | None:
    """deepseek2 / deepseek32 / glm-dsa with MLA (key/value_length_mla set), or None where the file asks for a
    graph graph_mla does not lay out: MHA without the latent, Mistral-Large's temperature scale, a gating
    function other than softmax or sigmoid, expert groups that do not divide the experts."""
    arch, names = model.architecture, {tensor.name for tensor in model.tensors}
    n_layer = model.n_layer - mtp_layers(model)
    k_mla, v_mla = _metadata_int(model, "attention.key_length_mla"), _metadata_int(model, "attention.value_length_mla")
    latent, rope = _metadata_int(model, "attention.kv_lora_rank"), _metadata_int(model, "rope.dimension_count")
    q_lora = _metadata_int(model, "attention.q_lora_rank") if "blk.0.attn_q.weight" not in names else 0
    if not (k_mla and v_mla and latent and 0 < rope <= k_mla) or not 1 <= n_layer <= MAX_LAYERS:
        return None
    if model.metadata.get(f"{arch}.attention.temperature_scale"):
        return None
    route = _mla_route(model, n_layer)
    if route is None:
        return None
    heads = dim = top_k = 0
    full: tuple[bool, ...] = ()
    if arch != "deepseek2":
        indexer = indexer_cache(model)
        heads, top_k = _metadata_int(model, "attention.indexer.head_count"), _metadata_int(model, "attention.indexer.top_k")
        if indexer is None or not (q_lora and heads and top_k) or 0 not in indexer.layers:
            return None  # glm-dsa.cpp asserts a full layer comes before any shared one
        dim, full = indexer.key_length, tuple(il in indexer.layers for il in range(n_layer))
        # deepseek32.cpp asserts n_rot <= the key width; the rotation is multiplied into the keys (ggml_mul_mat
        # asserts it is as wide as they are)
        if rope > dim or indexer_rotation_side(dim) != dim:
            return None
    n_ubatch = preset_n_ubatch(preset, n_ctx)
    n_seq = preset_n_seq(preset)
    cells = kv_cells(model, n_ctx, n_ubatch=n_ubatch, n_seq=n_seq, kv_unified=preset_kv_unified(preset))
    n_ff_exp = _metadata_int(model, "expert_feed_forward_length") or _rows(model, "ffn_up_exps.weight")
    shape = Shape(n_embd=model.n_embd, n_head=model.n_head, n_head_kv=1, head_dim=latent + rope,
                  n_tokens=min(n_ubatch, n_ctx), n_kv=cells.global_cells, n_seqs=n_seq, n_rs=n_seq,
                  flash=preset.flash_attn, n_ff=n_ff_exp, n_expert=_metadata_int(model, "expert_count"),
                  n_expert_used=_metadata_int(model, "expert_used_count"),
                  n_ff_shared=_rows(model, "ffn_up_shexp.weight") or n_ff_exp * _metadata_int(model, "expert_shared_count"))
    n_dense = min(_metadata_int(model, "leading_dense_block_count"), n_layer)
    if not _laid_out_bounds(shape) or (n_dense < n_layer and not (shape.n_expert and shape.n_expert_used)):
        return None
    mla = MlaShape(q_lora_rank=q_lora, kv_lora_rank=latent, rope_dims=rope, k_mla=k_mla, v_mla=v_mla, n_layer=n_layer,
                   n_dense_lead=n_dense, n_ff_dense=_metadata_int(model, "feed_forward_length") or _rows(model, "ffn_up.weight"),
                   k_type_size=float(cache_type(preset.cache_type_k).bytes_per_element),
                   weights_norm=bool(model.metadata.get(f"{arch}.expert_weights_norm")), route=route,
                   indexer_heads=heads, indexer_dim=dim, indexer_top_k=top_k, indexer_full=full)
    return FamilyGraph(shape=shape, recurrent=(False,) * n_layer, n_vocab=model.n_vocab, architecture=arch, mla=mla)


def _mla_route(model: ModelInfo, n_layer: int) -> Route | None:
    """How an MLA file's router picks experts (deepseek2.cpp / deepseek32.cpp / glm-dsa.cpp load_arch_hparams and
    build_moe_ffn), or None for a gating graph_layers does not lay out."""
    arch = model.architecture
    gating = _metadata_int(model, "expert_gating_func")
    if not gating:  # deepseek2: softmax for DeepSeek-V2 files without the key, sigmoid for GLM 4.7 Lite's shape
        glm_lite = n_layer in (47, 48) and model.n_vocab == 154880
        gating = _SIGMOID if arch == "glm-dsa" or (arch == "deepseek2" and glm_lite) else _SOFTMAX
    n_groups, n_used = _metadata_int(model, "expert_group_count"), _metadata_int(model, "expert_group_used_count")
    n_expert = _metadata_int(model, "expert_count")
    if gating not in (_SOFTMAX, _SIGMOID):
        return None
    if n_groups > 1 and not (n_expert % n_groups == 0 and n_expert // n_groups >= 2 and 1 <= n_used <= n_groups):
        return None  # ggml_argsort_top_k asserts two experts a group, and as many groups as it keeps
    scale = model.metadata.get(f"{arch}.expert_weights_scale")
    biased = any(tensor.name.endswith("exp_probs_b.bias") for tensor in model.tensors)
    return Route(sigmoid=gating == _SIGMOID, selection_bias=biased, n_groups=n_groups if n_groups > 1 else 0,
                 n_groups_used=n_used if n_groups > 1 else 0,
                 scale=isinstance(scale, (int, float)) and scale not in (0, 1))


_SOFTMAX, _SIGMOID = 1, 2  # llama_expert_gating_func_type


# llama-hparams.h LLAMA_MAX_EXPERTS; llama.cpp refuses a file with more, or with more used than there are
MAX_EXPERTS = 512


def _laid_out_bounds(shape: Shape) -> bool:
    """Whether the file's counts are ones llama.cpp loads: the builders add a node per expert used and divide
    the SSM width by its heads, so a hostile header falls back on the formula instead of sizing the walk."""
    if shape.n_expert > MAX_EXPERTS or shape.n_expert_used > max(shape.n_expert, 1):
        return False
    return not (shape.d_inner and (not shape.ssm_heads or shape.d_inner % shape.ssm_heads))


def build_graph(f: FamilyGraph, architecture: str) -> Graph:
    return _BUILDERS[architecture](f)


def laid_out_compute_bytes(model: ModelInfo, preset: Preset, n_ctx: int) -> int | None:
    """The CPU compute buffer llama.cpp reserves, laid out, or None for a family without a builder here. llama_context::sched_reserve reserves the graph of a full ubatch and of
    one token per sequence, both with n_seq_max sequences (unified KV cache or not), and keeps the larger."""
    f = family_graph(model, preset, n_ctx)
    if f is None:
        return None
    return max(_peak(f, model.architecture), _peak(replace(f, shape=replace(f.shape, n_tokens=f.shape.n_seqs)),
                                                   model.architecture))


@lru_cache(maxsize=1024)
def _peak(f: FamilyGraph, architecture: str) -> int:
    return build_graph(f, architecture).peak()
