"""The ggml/llama type tables agree with the gguf package, generated from llama.cpp's own headers."""

from __future__ import annotations

from fractions import Fraction

import gguf
import pytest

from workbench.core.gguf.ggml_types import (
    CACHE_TYPES,
    FILE_TYPE_DEFAULT_TENSOR_TYPE,
    FILE_TYPES,
    GGML_TYPES,
    QUANT_TYPES,
    block_size,
    cache_type,
    canonical_quant_type,
    tensor_bytes,
    type_size,
)


def test_every_gguf_package_type_is_known_with_the_same_sizes():
    for qtype, (block, size) in gguf.GGML_QUANT_SIZES.items():
        mine = GGML_TYPES[int(qtype)]
        assert (mine.name, mine.block_size, mine.type_size) == (qtype.name, block, size)


def test_file_types_match_llama_file_type():
    for ftype in gguf.LlamaFileType:
        expected = ftype.name.removeprefix("MOSTLY_").removeprefix("ALL_")
        assert FILE_TYPES[int(ftype)] == expected


def test_quant_types_are_file_types_with_a_default_tensor_type():
    for name, ftype_id in QUANT_TYPES.items():
        canonical = canonical_quant_type(name)
        assert FILE_TYPES[ftype_id] == canonical
        assert FILE_TYPE_DEFAULT_TENSOR_TYPE[canonical] in {t.name for t in GGML_TYPES.values()}
    assert canonical_quant_type("q4_k") == "Q4_K_M"
    assert {"Q4_K_M", "Q8_0", "F16", "BF16"} <= set(QUANT_TYPES)
    assert "COPY" not in QUANT_TYPES


def test_cache_types_bytes_per_element():
    expected = {"f32": 4, "f16": 2, "bf16": 2, "q8_0": Fraction(34, 32), "q4_0": Fraction(18, 32),
                "q4_1": Fraction(20, 32), "q5_0": Fraction(22, 32), "q5_1": Fraction(24, 32),
                "iq4_nl": Fraction(18, 32)}
    assert {name: t.bytes_per_element for name, t in CACHE_TYPES.items()} == expected
    for name, kind in CACHE_TYPES.items():
        ggml = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name.upper()]]
        assert (kind.block_size, kind.type_size) == ggml
    assert cache_type("Q8_0").quantized and not cache_type("f16").quantized


def test_sizes_and_tensor_bytes():
    assert (type_size("q4_k"), block_size("Q4_K")) == (144, 256)
    assert tensor_bytes("Q8_0", (64, 10)) == 2 * 34 * 10
    assert tensor_bytes("F32", (7,)) == 28
    with pytest.raises(ValueError):
        tensor_bytes("Q4_K", (100, 3))
    with pytest.raises(KeyError):
        type_size("Q9_9")
