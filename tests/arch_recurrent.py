"""Tiny random-weight GGUFs of the families with recurrent state that llama.cpp loads: lfm2 (short
convolutions + attention), granitehybrid (Mamba2 + attention, MoE) and qwen3next (gated delta net +
attention, MoE with a shared expert).

Tensor names, shapes and keys follow llama.cpp 0c1e570: src/models/lfm2.cpp, granite-hybrid.cpp,
qwen3next.cpp (load_arch_hparams / load_arch_tensors) and src/llama-arch.cpp's name table. A layer is
recurrent where `<arch>.attention.head_count_kv` is 0 (lfm2, granitehybrid) or, for qwen3next, where
(il + 1) % `full_attention_interval` != 0. The recurrent state llama.cpp keeps per sequence and layer
(llama-hparams.cpp n_embd_r / n_embd_s, f32):
  lfm2          conv  n_embd x (l_cache - 1)                          no S state
  mamba2/qwen3next conv (d_conv - 1) x (d_inner + 2 n_group d_state),  S  d_state x d_inner
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import gguf
import numpy as np
from arch_models import ArchModel, _vocabulary, write_shape_keys
from gguf_cache import cached_writer
from gguf_factory import _add_tensor

from workbench.core.bench.probe_models import write_llama_vocabulary


@dataclass(frozen=True)
class RecurrentModel:
    """One tiny hybrid model: the attention part as ArchModel, plus its recurrent layers' widths."""

    base: ArchModel
    kv_heads: tuple[int, ...] = ()  # per layer, 0 = recurrent (lfm2, granitehybrid)
    full_attention_interval: int = 0  # qwen3next: every n-th layer attends
    shortconv_l_cache: int = 0  # lfm2
    ssm_d_conv: int = 0
    ssm_d_inner: int = 0
    ssm_d_state: int = 0
    ssm_dt_rank: int = 0  # Mamba2: SSM heads; qwen3next: value heads
    ssm_n_group: int = 0  # Mamba2: groups; qwen3next: key heads


RECURRENT_MODELS: dict[str, RecurrentModel] = {
    # LFM2's pattern: mostly short-convolution layers, attention on a few (layer 2 and 5 of 6 here)
    "lfm2": RecurrentModel(ArchModel("lfm2", n_layer=6, n_head_kv=1, turn_tokens="chatml", tied_embeddings=True),
                           kv_heads=(0, 0, 1, 0, 0, 1), shortconv_l_cache=3),
    # Granite 4.0-H: Mamba2 layers with one attention layer in four, MoE feed-forward; d_inner = 2 n_embd
    "granitehybrid": RecurrentModel(
        ArchModel("granitehybrid", n_layer=4, n_embd=256, n_head=4, n_expert=8, n_expert_used=2, n_ff=128,
                  turn_tokens="granite",
                  extra_keys={"logit_scale": 8.0, "residual_scale": 0.22, "embedding_scale": 12.0,
                              "attention.scale": 0.0078125}),
        kv_heads=(0, 0, 0, 1), ssm_d_conv=4, ssm_d_inner=512, ssm_d_state=128, ssm_dt_rank=8, ssm_n_group=1),
    # Qwen3-Next: gated delta net on 3 of every 4 layers, a gated full attention on the 4th
    "qwen3next": RecurrentModel(
        ArchModel("qwen3next", n_layer=4, n_expert=8, n_expert_used=2, n_ff_expert=128, n_ff_shared=128,
                  turn_tokens="chatml"),
        full_attention_interval=4, ssm_d_conv=4, ssm_d_inner=512, ssm_d_state=128, ssm_dt_rank=4, ssm_n_group=2),
}


def recurrent_model(arch: str, **changes: object) -> RecurrentModel:
    return replace(RECURRENT_MODELS[arch], **changes)


def is_recurrent(model: RecurrentModel, il: int) -> bool:
    if model.full_attention_interval:
        return (il + 1) % model.full_attention_interval != 0
    return model.kv_heads[il] == 0


def _small(writer: gguf.GGUFWriter, name: str, shape: tuple[int, ...], rng: np.random.Generator,
           value: float | None = None) -> None:
    """An f32 tensor of small values (the SSM's A, D, dt and convolutions stay finite)."""
    numpy_shape = tuple(reversed(shape))
    data = np.full(numpy_shape, value, np.float32) if value is not None else \
        (0.02 * rng.standard_normal(numpy_shape)).astype(np.float32)
    writer.add_tensor(name, data)


@cached_writer
def write_recurrent_gguf(path: Path, model: RecurrentModel, *, seed: int = 0) -> Path:
    """Write `model` as a GGUF the bundled llama.cpp loads and return the path."""
    rng = np.random.default_rng(seed)
    base, arch = model.base, model.base.arch
    writer = gguf.GGUFWriter(str(path), arch=arch)
    writer.add_name(base.name or f"tiny-{arch}")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    write_shape_keys(writer, base, list(model.kv_heads) if model.kv_heads else None)
    if model.shortconv_l_cache:
        writer.add_uint32(f"{arch}.shortconv.l_cache", model.shortconv_l_cache)
    if model.ssm_d_inner:
        writer.add_ssm_conv_kernel(model.ssm_d_conv)
        writer.add_ssm_inner_size(model.ssm_d_inner)
        writer.add_ssm_state_size(model.ssm_d_state)
        writer.add_ssm_time_step_rank(model.ssm_dt_rank)
        writer.add_ssm_group_count(model.ssm_n_group)
    if model.full_attention_interval:
        writer.add_uint32(f"{arch}.full_attention_interval", model.full_attention_interval)
    tokens, types = _vocabulary(base)
    write_llama_vocabulary(writer, tokens, types)

    wtype, n_embd = base.weight_type, base.n_embd
    _add_tensor(writer, "token_embd.weight", wtype, (n_embd, base.n_vocab), rng)
    for il in range(base.n_layer):
        def add(role: str, shape: tuple[int, ...], type_name: str = wtype) -> None:
            _add_tensor(writer, f"blk.{il}.{role}", type_name, shape, rng)

        add("attn_norm.weight", (n_embd,), "F32")
        recurrent = is_recurrent(model, il)
        if arch == "lfm2":
            _lfm2_layer(writer, model, il, recurrent, add, rng)
        elif arch == "granitehybrid":
            _granite_layer(writer, model, il, recurrent, add, rng)
        else:
            _qwen3next_layer(writer, model, il, recurrent, add, rng)
    _add_tensor(writer, "token_embd_norm.weight" if arch == "lfm2" else "output_norm.weight", "F32", (n_embd,), rng)
    if not base.tied_embeddings:
        _add_tensor(writer, "output.weight", wtype, (n_embd, base.n_vocab), rng)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _lfm2_layer(writer, model: RecurrentModel, il: int, recurrent: bool, add, rng) -> None:
    base, n_embd = model.base, model.base.n_embd
    if recurrent:
        _small(writer, f"blk.{il}.shortconv.conv.weight", (model.shortconv_l_cache, n_embd), rng)
        add("shortconv.in_proj.weight", (n_embd, 3 * n_embd))
        add("shortconv.out_proj.weight", (n_embd, n_embd))
    else:
        n_kv = model.kv_heads[il] * base.head_dim
        add("attn_q_norm.weight", (base.head_dim,), "F32")
        add("attn_k_norm.weight", (base.head_dim,), "F32")
        add("attn_q.weight", (n_embd, n_embd))
        add("attn_k.weight", (n_embd, n_kv))
        add("attn_v.weight", (n_embd, n_kv))
        add("attn_output.weight", (n_embd, n_embd))
    add("ffn_norm.weight", (n_embd,), "F32")
    add("ffn_gate.weight", (n_embd, base.n_ff))
    add("ffn_up.weight", (n_embd, base.n_ff))
    add("ffn_down.weight", (base.n_ff, n_embd))


def _granite_layer(writer, model: RecurrentModel, il: int, recurrent: bool, add, rng) -> None:
    base, n_embd = model.base, model.base.n_embd
    d_inner, n_group, d_state, n_head = model.ssm_d_inner, model.ssm_n_group, model.ssm_d_state, model.ssm_dt_rank
    conv_dim = d_inner + 2 * n_group * d_state
    if recurrent:
        add("ssm_in.weight", (n_embd, 2 * d_inner + 2 * n_group * d_state + n_head))
        _small(writer, f"blk.{il}.ssm_conv1d.weight", (model.ssm_d_conv, conv_dim), rng)
        _small(writer, f"blk.{il}.ssm_conv1d.bias", (conv_dim,), rng)
        _small(writer, f"blk.{il}.ssm_dt.bias", (n_head,), rng)
        _small(writer, f"blk.{il}.ssm_a", (1, n_head), rng, value=-1.0)
        _small(writer, f"blk.{il}.ssm_d", (1, n_head), rng, value=1.0)
        _small(writer, f"blk.{il}.ssm_norm.weight", (d_inner // n_group, n_group), rng, value=1.0)
        add("ssm_out.weight", (d_inner, n_embd))
    else:
        n_q, n_kv = base.n_head * base.head_dim, model.kv_heads[il] * base.head_dim
        add("attn_q.weight", (n_embd, n_q))
        add("attn_k.weight", (n_embd, n_kv))
        add("attn_v.weight", (n_embd, n_kv))
        add("attn_output.weight", (n_q, n_embd))
    add("ffn_norm.weight", (n_embd,), "F32")
    add("ffn_gate_inp.weight", (n_embd, base.n_expert), "F32")
    add("ffn_gate_exps.weight", (n_embd, base.n_ff, base.n_expert))
    add("ffn_up_exps.weight", (n_embd, base.n_ff, base.n_expert))
    add("ffn_down_exps.weight", (base.n_ff, n_embd, base.n_expert))


def _qwen3next_layer(writer, model: RecurrentModel, il: int, recurrent: bool, add, rng) -> None:
    base, n_embd, hd = model.base, model.base.n_embd, model.base.head_dim
    key_dim = model.ssm_d_state * model.ssm_n_group
    value_dim = model.ssm_d_inner
    add("post_attention_norm.weight", (n_embd,), "F32")
    if recurrent:
        add("attn_qkv.weight", (n_embd, 2 * key_dim + value_dim))
        add("attn_gate.weight", (n_embd, value_dim))
        _small(writer, f"blk.{il}.ssm_conv1d.weight", (model.ssm_d_conv, 2 * key_dim + value_dim), rng)
        _small(writer, f"blk.{il}.ssm_dt.bias", (model.ssm_dt_rank,), rng)
        _small(writer, f"blk.{il}.ssm_a", (model.ssm_dt_rank,), rng, value=-1.0)
        add("ssm_ba.weight", (n_embd, 2 * model.ssm_dt_rank))
        _small(writer, f"blk.{il}.ssm_norm.weight", (model.ssm_d_inner // model.ssm_dt_rank,), rng, value=1.0)
        add("ssm_out.weight", (value_dim, n_embd))
    else:
        n_kv = base.n_head_kv * hd
        add("attn_q.weight", (n_embd, 2 * base.n_head * hd))
        add("attn_k.weight", (n_embd, n_kv))
        add("attn_v.weight", (n_embd, n_kv))
        add("attn_output.weight", (base.n_head * hd, n_embd))
        add("attn_q_norm.weight", (hd,), "F32")
        add("attn_k_norm.weight", (hd,), "F32")
    add("ffn_gate_inp.weight", (n_embd, base.n_expert), "F32")
    add("ffn_gate_exps.weight", (n_embd, base.n_ff_expert, base.n_expert))
    add("ffn_up_exps.weight", (n_embd, base.n_ff_expert, base.n_expert))
    add("ffn_down_exps.weight", (base.n_ff_expert, n_embd, base.n_expert))
    add("ffn_gate_inp_shexp.weight", (n_embd,), "F32")
    add("ffn_gate_shexp.weight", (n_embd, base.n_ff_shared))
    add("ffn_up_shexp.weight", (n_embd, base.n_ff_shared))
    add("ffn_down_shexp.weight", (base.n_ff_shared, n_embd))
