"""The recurrent state (llama.cpp's "RS" buffer): which layers are recurrent and what state each keeps per sequence.

Sources (llama.cpp 0c1e570):
- src/llama-arch.cpp llm_arch_is_recurrent / llm_arch_is_hybrid: which architectures keep one;
- src/models/<arch>.cpp load_arch_hparams: which layers are recurrent (a 0 in
  `<arch>.attention.head_count_kv` for lfm2, granitehybrid, jamba, plamo2; every layer for
  mamba/mamba2/rwkv; for qwen3next/qwen35 the `<arch>.attention.recurrent_layers` flags, else
  every layer but each `full_attention_interval`-th, default 4);
- src/llama-hparams.cpp n_embd_r / n_embd_s: the per-sequence widths of the two state tensors,
  R (the convolution or token-shift history) and S (the SSM / delta-net / WKV state);
- src/llama-model.cpp create_memory and src/llama-memory-recurrent.cpp: both tensors are f32,
  one [n_embd_r, rs_size] and one [n_embd_s, rs_size] per recurrent layer, rs_size =
  max(1, n_seq_max): one cell per sequence, whatever the context.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.gguf.model_info import ModelInfo

RS_TYPE = "f32"  # create_memory passes GGML_TYPE_F32 for both R and S on every architecture
RS_TYPE_SIZE = 4
TENSOR_ALIGNMENT = 32

ALL_LAYERS = "all"  # every layer is recurrent
KV_HEADS_ZERO = "kv0"  # a layer is recurrent where its head_count_kv is 0
INTERVAL = "interval"  # recurrent_layers flags, else all but every full_attention_interval-th layer

# architecture -> (which layers are recurrent, what the state is called)
RECURRENT_ARCHITECTURES: dict[str, tuple[str, str]] = {
    "mamba": (ALL_LAYERS, "Mamba conv + SSM state"),
    "mamba2": (ALL_LAYERS, "Mamba2 conv + SSM state"),
    "rwkv6": (ALL_LAYERS, "RWKV token shift + WKV state"),
    "rwkv6qwen2": (ALL_LAYERS, "RWKV token shift + WKV state"),
    "rwkv7": (ALL_LAYERS, "RWKV token shift + WKV state"),
    "arwkv7": (ALL_LAYERS, "RWKV token shift + WKV state"),
    "lfm2": (KV_HEADS_ZERO, "LFM2 short-conv state"),
    "lfm2moe": (KV_HEADS_ZERO, "LFM2 short-conv state"),
    "granitehybrid": (KV_HEADS_ZERO, "Mamba2 conv + SSM state"),
    "jamba": (KV_HEADS_ZERO, "Mamba conv + SSM state"),
    "plamo2": (KV_HEADS_ZERO, "Mamba conv + SSM state"),
    "qwen3next": (INTERVAL, "gated delta-net conv + state"),
    "qwen35": (INTERVAL, "gated delta-net conv + state"),
    "qwen35moe": (INTERVAL, "gated delta-net conv + state"),
}


@dataclass(frozen=True)
class RecurrentState:
    """A model's recurrent layers and the f32 values each keeps per sequence."""

    kind: str  # what the state is, e.g. "Mamba2 conv + SSM state"
    is_recurrent: tuple[bool, ...]  # one flag per layer
    r_values: int  # R (conv / token-shift history) values per layer and sequence: n_embd_r
    s_values: int  # S (SSM / delta-net / WKV state) values per layer and sequence: n_embd_s
    source: str  # the keys the widths and the layer pattern were read from

    @property
    def n_recurrent(self) -> int:
        return sum(self.is_recurrent)

    @property
    def attention_layers(self) -> tuple[int, ...]:
        return tuple(il for il, flag in enumerate(self.is_recurrent) if not flag)

    @property
    def recurrent_layers(self) -> tuple[int, ...]:
        return tuple(il for il, flag in enumerate(self.is_recurrent) if flag)

    @property
    def bytes_per_sequence(self) -> int:
        return self.n_recurrent * (self.r_values + self.s_values) * RS_TYPE_SIZE


def _key(model: ModelInfo, name: str) -> int:
    value = model.metadata.get(f"{model.architecture}.{name}")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _flags(model: ModelInfo, rule: str) -> tuple[tuple[bool, ...], str]:
    arch, n_layer = model.architecture, model.n_layer
    if rule == ALL_LAYERS:
        return (True,) * n_layer, f"{arch}: every layer (llama.cpp)"
    if rule == KV_HEADS_ZERO:
        per_layer = model.n_head_kv_per_layer
        if len(per_layer) < n_layer:  # one count for all layers: none is recurrent
            return (False,) * n_layer, f"{arch}.attention.head_count_kv (one value: no recurrent layer)"
        return tuple(per_layer[il] == 0 for il in range(n_layer)), f"{arch}.attention.head_count_kv = 0"
    flags_key = f"{arch}.attention.recurrent_layers"
    flags = model.metadata.get(flags_key)
    if isinstance(flags, tuple) and len(flags) >= n_layer:
        return tuple(bool(flag) for flag in flags[:n_layer]), flags_key
    interval = _key(model, "full_attention_interval")
    source = f"{arch}.full_attention_interval = {interval}" if interval else f"{arch} full-attention interval 4 (llama.cpp)"
    interval = interval or 4
    return tuple((il + 1) % interval != 0 for il in range(n_layer)), source


def recurrent_state(model: ModelInfo) -> RecurrentState | None:
    """The model's recurrent state as llama.cpp will allocate it, or None for a model without one."""
    rule = RECURRENT_ARCHITECTURES.get(model.architecture)
    if rule is None or model.n_layer <= 0:
        return None
    pattern, kind = rule
    is_recurrent, layer_source = _flags(model, pattern)
    if not any(is_recurrent):
        return None
    n_embd = model.n_embd
    wkv, l_cache = _key(model, "wkv.head_size"), _key(model, "shortconv.l_cache")
    d_conv, d_inner, d_state = _key(model, "ssm.conv_kernel"), _key(model, "ssm.inner_size"), _key(model, "ssm.state_size")
    n_group = _key(model, "ssm.group_count")
    arch = model.architecture
    if wkv:
        shifts = _key(model, "token_shift_count") or 2
        r_values, s_values = shifts * n_embd, n_embd * wkv
        source = f"{arch}.wkv.head_size, token_shift_count"
    elif l_cache:
        r_values, s_values = n_embd * (l_cache - 1), 0
        source = f"{arch}.shortconv.l_cache = {l_cache}"
    else:
        r_values = max(0, d_conv - 1) * (d_inner + 2 * n_group * d_state)
        s_values = d_state * d_inner
        source = f"{arch}.ssm.conv_kernel/inner_size/state_size/group_count"
    return RecurrentState(kind=kind, is_recurrent=is_recurrent, r_values=r_values, s_values=s_values,
                          source=f"{source}; layers: {layer_source}")


def rs_cells(n_seq: int) -> int:
    """Cells of the recurrent memory: rs_size = max(1, n_seq_max), one per sequence (create_memory)."""
    return max(1, n_seq)


def _aligned(n_bytes: int) -> int:
    return -(-n_bytes // TENSOR_ALIGNMENT) * TENSOR_ALIGNMENT


def predicted_rs_bytes(model: ModelInfo, n_seq: int = 1) -> int:
    """The RS buffer: per recurrent layer an f32 R tensor [n_embd_r, cells] and S tensor [n_embd_s, cells],
    each rounded up to the buffer's alignment; 0 for a model without recurrent state."""
    state = recurrent_state(model)
    if state is None:
        return 0
    cells = rs_cells(n_seq)
    per_layer = _aligned(state.r_values * cells * RS_TYPE_SIZE) + _aligned(state.s_values * cells * RS_TYPE_SIZE)
    return state.n_recurrent * per_layer


def attention_flags(model: ModelInfo) -> tuple[bool, ...]:
    """One flag per layer: True where the layer keeps a KV cache (it is not recurrent)."""
    state = recurrent_state(model)
    if state is None:
        return (True,) * model.n_layer
    return tuple(not flag for flag in state.is_recurrent)


def layer_ranges(layers: tuple[int, ...]) -> str:
    """(0, 1, 2, 4, 6, 7) -> '0-2, 4, 6-7'."""
    parts: list[str] = []
    start = previous = None
    for il in layers:
        if previous is not None and il == previous + 1:
            previous = il
            continue
        if start is not None:
            parts.append(f"{start}-{previous}" if previous != start else f"{start}")
        start = previous = il
    if start is not None:
        parts.append(f"{start}-{previous}" if previous != start else f"{start}")
    return ", ".join(parts) or "none"
