"""ggml tensor types, llama.cpp file types, quantizer targets and KV-cache types, as plain tables."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class GGMLType:
    """One ggml tensor type: `block_size` elements are stored in `type_size` bytes."""

    type_id: int
    name: str
    block_size: int
    type_size: int

    @property
    def bits_per_weight(self) -> float:
        return self.type_size * 8 / self.block_size


# ggml.h `enum ggml_type` and the block structs of ggml-common.h (llama.cpp, Oct 2026).
# Ids 4, 5 and 31-33, 36-38 belonged to removed types; a file using them is rejected.
# tests/test_gguf_ggml_types.py checks this table against the `gguf` package's
# GGML_QUANT_SIZES, which is generated from the same structs.
_TYPE_ROWS = (
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 18),
    (3, "Q4_1", 32, 20),
    (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24),
    (8, "Q8_0", 32, 34),
    (9, "Q8_1", 32, 40),
    (10, "Q2_K", 256, 84),
    (11, "Q3_K", 256, 110),
    (12, "Q4_K", 256, 144),
    (13, "Q5_K", 256, 176),
    (14, "Q6_K", 256, 210),
    (15, "Q8_K", 256, 292),
    (16, "IQ2_XXS", 256, 66),
    (17, "IQ2_XS", 256, 74),
    (18, "IQ3_XXS", 256, 98),
    (19, "IQ1_S", 256, 50),
    (20, "IQ4_NL", 32, 18),
    (21, "IQ3_S", 256, 110),
    (22, "IQ2_S", 256, 82),
    (23, "IQ4_XS", 256, 136),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", 256, 56),
    (30, "BF16", 1, 2),
    (34, "TQ1_0", 256, 54),
    (35, "TQ2_0", 256, 66),
    (39, "MXFP4", 32, 17),
    (40, "NVFP4", 64, 36),
    (41, "Q1_0", 128, 18),
    (42, "Q2_0", 64, 18),
)

GGML_TYPES: dict[int, GGMLType] = {row[0]: GGMLType(*row) for row in _TYPE_ROWS}
GGML_TYPES_BY_NAME: dict[str, GGMLType] = {t.name: t for t in GGML_TYPES.values()}


def ggml_type(name: str) -> GGMLType:
    """The type called `name` ("Q4_K", "q8_0", ...); KeyError if llama.cpp has no such type."""
    return GGML_TYPES_BY_NAME[name.upper()]


def type_size(name: str) -> int:
    """Bytes of one block of type `name`."""
    return ggml_type(name).type_size


def block_size(name: str) -> int:
    """Elements in one block of type `name`."""
    return ggml_type(name).block_size


def tensor_bytes(name: str, shape: tuple[int, ...]) -> int:
    """Bytes of a contiguous tensor, as ggml_nbytes computes them (rows of whole blocks).

    Raises ValueError when the first dimension is not a whole number of blocks, which
    ggml cannot store.
    """
    kind = ggml_type(name)
    if not shape:
        return kind.type_size if kind.block_size == 1 else 0
    row_elements = shape[0]
    if row_elements % kind.block_size:
        raise ValueError(f"{row_elements} elements per row is not a multiple of {kind.name}'s block of {kind.block_size}")
    rows = 1
    for dim in shape[1:]:
        rows *= dim
    return row_elements // kind.block_size * kind.type_size * rows


# llama.h `enum llama_ftype`: what `general.file_type` says the file mostly holds.
FILE_TYPES: dict[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
    41: "Q2_0",
    1024: "GUESSED",
}

# The weight types llama.cpp's quantizer accepts (tools/quantize QUANT_OPTIONS), name ->
# llama_ftype id. "COPY" and F32 are left out: they are not a size reduction anyone
# picks as a preset. Aliases Q3_K/Q4_K/Q5_K mean the _M mixes, as in llama-quantize.
QUANT_TYPES: dict[str, int] = {
    "Q1_0": 40,
    "Q2_0": 41,
    "Q4_0": 2,
    "Q4_1": 3,
    "MXFP4_MOE": 38,
    "Q5_0": 8,
    "Q5_1": 9,
    "IQ2_XXS": 19,
    "IQ2_XS": 20,
    "IQ2_S": 28,
    "IQ2_M": 29,
    "IQ1_S": 24,
    "IQ1_M": 31,
    "TQ1_0": 36,
    "TQ2_0": 37,
    "Q2_K": 10,
    "Q2_K_S": 21,
    "IQ3_XXS": 23,
    "IQ3_S": 26,
    "IQ3_M": 27,
    "Q3_K": 12,
    "IQ3_XS": 22,
    "Q3_K_S": 11,
    "Q3_K_M": 12,
    "Q3_K_L": 13,
    "IQ4_NL": 25,
    "IQ4_XS": 30,
    "Q4_K": 15,
    "Q4_K_S": 14,
    "Q4_K_M": 15,
    "Q5_K": 17,
    "Q5_K_S": 16,
    "Q5_K_M": 17,
    "Q6_K": 18,
    "Q8_0": 7,
    "F16": 1,
    "BF16": 32,
}

# llama-quant.cpp `llama_ftype_get_default_type`: the tensor type most weights of a file
# type get before the per-tensor rules bump some of them up.
FILE_TYPE_DEFAULT_TENSOR_TYPE: dict[str, str] = {
    "F32": "F32",
    "F16": "F16",
    "BF16": "BF16",
    "Q4_0": "Q4_0",
    "Q4_1": "Q4_1",
    "Q5_0": "Q5_0",
    "Q5_1": "Q5_1",
    "Q8_0": "Q8_0",
    "Q1_0": "Q1_0",
    "Q2_0": "Q2_0",
    "MXFP4_MOE": "MXFP4",
    "Q2_K": "Q2_K",
    "Q2_K_S": "Q2_K",
    "IQ3_XS": "IQ3_S",
    "Q3_K_S": "Q3_K",
    "Q3_K_M": "Q3_K",
    "Q3_K_L": "Q3_K",
    "Q4_K_S": "Q4_K",
    "Q4_K_M": "Q4_K",
    "Q5_K_S": "Q5_K",
    "Q5_K_M": "Q5_K",
    "Q6_K": "Q6_K",
    "TQ1_0": "TQ1_0",
    "TQ2_0": "TQ2_0",
    "IQ2_XXS": "IQ2_XXS",
    "IQ2_XS": "IQ2_XS",
    "IQ2_S": "IQ2_XS",
    "IQ2_M": "IQ2_S",
    "IQ3_XXS": "IQ3_XXS",
    "IQ1_S": "IQ1_S",
    "IQ1_M": "IQ1_M",
    "IQ4_NL": "IQ4_NL",
    "IQ4_XS": "IQ4_XS",
    "IQ3_S": "IQ3_S",
    "IQ3_M": "IQ3_S",
}


def canonical_quant_type(name: str) -> str:
    """The file-type name a quantizer target means: "q4_k" -> "Q4_K_M"; KeyError if unknown."""
    upper = name.upper()
    ftype_id = QUANT_TYPES[upper]
    return FILE_TYPES[ftype_id]


@dataclass(frozen=True)
class CacheType:
    """A KV-cache element type (`--cache-type-k/-v`): `type_size` bytes per `block_size` values."""

    name: str
    block_size: int
    type_size: int

    @property
    def bytes_per_element(self) -> Fraction:
        return Fraction(self.type_size, self.block_size)

    @property
    def quantized(self) -> bool:
        return self.block_size > 1


# common/arg.cpp `kv_cache_types`: what llama.cpp accepts for the KV cache.
CACHE_TYPES: dict[str, CacheType] = {
    "f32": CacheType("f32", 1, 4),
    "f16": CacheType("f16", 1, 2),
    "bf16": CacheType("bf16", 1, 2),
    "q8_0": CacheType("q8_0", 32, 34),
    "q4_0": CacheType("q4_0", 32, 18),
    "q4_1": CacheType("q4_1", 32, 20),
    "iq4_nl": CacheType("iq4_nl", 32, 18),
    "q5_0": CacheType("q5_0", 32, 22),
    "q5_1": CacheType("q5_1", 32, 24),
}


def cache_type(name: str) -> CacheType:
    """The KV-cache type called `name` ("q8_0", "F16", ...); KeyError if llama.cpp rejects it."""
    return CACHE_TYPES[name.lower()]
