"""What a GGUF file says about its model: the frozen result of reading its header."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor table; `offset` is absolute in the file."""

    name: str
    ggml_type: str  # llama.cpp type name: "F32", "F16", "Q4_K", ...
    shape: tuple[int, ...]
    offset: int
    n_bytes: int

    @property
    def n_elements(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count


@dataclass(frozen=True)
class ModelInfo:
    """Header, metadata and tensor table of one GGUF file (no tensor data read)."""

    source: str  # path or URL it was read from
    file_size: int
    version: int
    architecture: str
    name: str
    file_type: str | None  # "Q4_K_M", "Q8_0", ... from general.file_type, None if absent
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int  # the largest over layers when the file gives a per-layer array
    head_dim_k: int
    head_dim_v: int
    n_vocab: int
    n_ctx_train: int
    has_chat_template: bool
    tensors: tuple[TensorInfo, ...]
    n_head_kv_per_layer: tuple[int, ...] = ()  # one per layer; empty means n_head_kv everywhere
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    header_bytes: int = 0  # bytes read to get all of this (what a remote preview costs)

    @property
    def n_params(self) -> int:
        return sum(t.n_elements for t in self.tensors)

    @property
    def weights_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)

    @property
    def bits_per_weight(self) -> float:
        params = self.n_params
        return self.weights_bytes * 8 / params if params else 0.0

    @property
    def type_mix(self) -> tuple[tuple[str, float], ...]:
        """Share of weight bytes by tensor type, largest first, e.g. (("Q4_K", 0.62), ...)."""
        by_type: Counter[str] = Counter()
        for tensor in self.tensors:
            by_type[tensor.ggml_type] += tensor.n_bytes
        total = sum(by_type.values()) or 1
        return tuple((name, n / total) for name, n in by_type.most_common())

    def kv_heads(self, layer: int) -> int:
        return self.n_head_kv_per_layer[layer] if self.n_head_kv_per_layer else self.n_head_kv


@dataclass(frozen=True)
class LongArray:
    """Stands in `ModelInfo.metadata` for an array too long to keep (e.g. the 49k-token vocabulary)."""

    item_type: str
    length: int

    def __len__(self) -> int:
        return self.length


@dataclass(frozen=True)
class LongString:
    """Stands in `ModelInfo.metadata` for a string value longer than MAX_KEPT_STRING_BYTES (skipped, not read)."""

    length: int
