"""Tiny but real GGUF files written with the `gguf` package, for reader and ledger tests."""

from __future__ import annotations

import functools
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np

from workbench.core.bench.probe_models import set_block_scales

# Per-layer tensor types of the default tiny model: a Q4_K_M-like mix.
DEFAULT_LAYER_TYPES = {
    "attn_norm": "F32",
    "attn_q": "Q4_K",
    "attn_k": "Q4_K",
    "attn_v": "Q6_K",
    "attn_output": "Q4_K",
    "ffn_norm": "F32",
    "ffn_gate": "Q4_K",
    "ffn_up": "Q4_K",
    "ffn_down": "Q6_K",
}


@dataclass(frozen=True)
class TinyModel:
    """What to write: a fake llama with a few layers and tensors of several types."""

    arch: str = "llama"
    name: str = "tiny-test-llama"
    n_layer: int = 2
    n_embd: int = 256
    n_head: int = 4
    n_head_kv: int | tuple[int, ...] = 2
    n_ff: int = 512
    n_vocab: int = 96
    n_ctx_train: int = 1024
    file_type: int | None = 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    chat_template: str | None = "{% for m in messages %}{{ m.content }}{% endfor %}"
    key_length: int | None = None
    value_length: int | None = None
    alignment: int | None = None
    token_embd_type: str = "Q8_0"
    output_type: str | None = "F16"  # None: tied embeddings (no output.weight)
    layer_types: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_LAYER_TYPES))
    vocab_in_tokenizer: bool = True


def _tensor_shape(model: TinyModel, role: str, layer: int = 0) -> tuple[int, ...]:
    """ggml shape (ne0 first) of a layer tensor (K and V follow the layer's own KV head count)."""
    n_head_kv = model.n_head_kv[layer] if isinstance(model.n_head_kv, tuple) else model.n_head_kv
    head_k = model.key_length or model.n_embd // model.n_head
    head_v = model.value_length or model.n_embd // model.n_head
    return {
        "attn_norm": (model.n_embd,),
        "ffn_norm": (model.n_embd,),
        "attn_q": (model.n_embd, model.n_head * head_k),
        "attn_k": (model.n_embd, n_head_kv * head_k),
        "attn_v": (model.n_embd, n_head_kv * head_v),
        "attn_output": (model.n_head * head_v, model.n_embd),
        "ffn_gate": (model.n_embd, model.n_ff),
        "ffn_up": (model.n_embd, model.n_ff),
        "ffn_down": (model.n_ff, model.n_embd),
    }[role]


def _add_tensor(writer: gguf.GGUFWriter, name: str, type_name: str, shape: tuple[int, ...], rng: np.random.Generator) -> None:
    qtype = gguf.GGMLQuantizationType[type_name]
    numpy_shape = tuple(reversed(shape))  # numpy is row-major: outermost dimension first
    if type_name == "F32":
        writer.add_tensor(name, rng.standard_normal(numpy_shape, dtype=np.float32))
    elif type_name == "F16":
        writer.add_tensor(name, rng.standard_normal(numpy_shape).astype(np.float16))
    else:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        byte_shape = numpy_shape[:-1] + (numpy_shape[-1] // block * size,)
        data = rng.integers(0, 256, size=byte_shape, dtype=np.uint8)
        if type_name in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q6_K"):
            # sane fp16 scales, varied as a real file's: llama.cpp's row validation accepts them and its
            # kernels run as on a real file
            blocks = data.reshape(-1, size).copy()
            set_block_scales(blocks, type_name, rng)
            data = blocks.reshape(data.shape)
        writer.add_tensor(name, data, raw_dtype=qtype)


def write_tiny_gguf(path: Path, model: TinyModel = TinyModel(), *, seed: int = 0, big_endian: bool = False) -> Path:
    """Write `model` as a real GGUF v3 file at `path` and return the path."""
    rng = np.random.default_rng(seed)
    endian = gguf.GGUFEndian.BIG if big_endian else gguf.GGUFEndian.LITTLE
    writer = gguf.GGUFWriter(str(path), arch=model.arch, endianess=endian)
    writer.add_name(model.name)
    writer.add_block_count(model.n_layer)
    writer.add_embedding_length(model.n_embd)
    writer.add_feed_forward_length(model.n_ff)
    writer.add_head_count(model.n_head)
    writer.add_head_count_kv(list(model.n_head_kv) if isinstance(model.n_head_kv, tuple) else model.n_head_kv)
    writer.add_context_length(model.n_ctx_train)
    writer.add_layer_norm_rms_eps(1e-5)
    if model.key_length:
        writer.add_key_length(model.key_length)
    if model.value_length:
        writer.add_value_length(model.value_length)
    if model.file_type is not None:
        writer.add_file_type(model.file_type)
    if model.alignment:
        writer.add_custom_alignment(model.alignment)
    writer.add_tokenizer_model("gpt2")
    if model.vocab_in_tokenizer:
        writer.add_token_list([f"tok{i}" for i in range(model.n_vocab)])
    else:
        writer.add_vocab_size(model.n_vocab)
    if model.chat_template:
        writer.add_chat_template(model.chat_template)

    _add_tensor(writer, "token_embd.weight", model.token_embd_type, (model.n_embd, model.n_vocab), rng)
    for layer in range(model.n_layer):
        for role, type_name in model.layer_types.items():
            _add_tensor(writer, f"blk.{layer}.{role}.weight", type_name, _tensor_shape(model, role, layer), rng)
    _add_tensor(writer, "output_norm.weight", "F32", (model.n_embd,), rng)
    if model.output_type:
        _add_tensor(writer, "output.weight", model.output_type, (model.n_embd, model.n_vocab), rng)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# A very small model for the fuzz test: a few kB, mostly header.
FUZZ_MODEL = TinyModel(
    n_layer=1,
    n_embd=32,
    n_head=2,
    n_head_kv=1,
    n_ff=64,
    n_vocab=12,
    file_type=7,
    token_embd_type="Q8_0",
    output_type=None,
    layer_types={"attn_norm": "F32", "attn_q": "Q8_0", "attn_k": "F16", "attn_v": "Q4_0", "ffn_down": "Q8_0"},
)


# -- hostile files, packed by hand where the gguf writer would refuse or be slow -------------

def package_reader(path: Path) -> gguf.GGUFReader:
    """The gguf package's reader of `path`, parsed once per test process while the file is unchanged.

    It takes seconds on the bundled model (a 49,152-token vocabulary, field by field in Python),
    and several tests only look things up in it. Callers must not write through it.
    """
    stat = Path(path).stat()
    return _package_reader(Path(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _package_reader(path: Path, mtime_ns: int, size: int) -> gguf.GGUFReader:
    return gguf.GGUFReader(path)


def field_offset(path: Path, key: str, part: int) -> int:
    """Byte offset of part `part` of metadata field `key` (0 key length, 1 key, 2 type, 3 value...),
    found by the gguf package's own reader."""
    found = package_reader(path).fields[key]
    return found.offset + sum(p.nbytes for p in found.parts[:part])


def copy_with_u32_field(path: Path, key: str, value: int, out: Path) -> Path:
    """A copy of `path` at `out` with the UINT32 metadata `key` set to `value` (e.g. a contradicting shape)."""
    assert package_reader(path).fields[key].types == [gguf.GGUFValueType.UINT32], f"{key} is not a UINT32"
    shutil.copyfile(path, out)
    with open(out, "r+b") as stream:
        stream.seek(field_offset(path, key, 3))
        stream.write(struct.pack("<I", value))
    return out


def patched_copy(path: Path, offset: int, data: bytes, name: str) -> Path:
    """A copy of `path` named `name` beside it, with `data` written over the bytes at `offset`."""
    raw = bytearray(path.read_bytes())
    raw[offset : offset + len(data)] = data
    out = path.with_name(name)
    out.write_bytes(bytes(raw))
    return out


def with_u32_field(path: Path, key: str, value: int, name: str) -> Path:
    """A copy of a tiny GGUF with the UINT32 metadata `key` set to `value` (e.g. block_count = 2**32 - 1)."""
    return patched_copy(path, field_offset(path, key, 3), struct.pack("<I", value), name)


def gguf_string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def packed_gguf(path: Path, n_tensors: int, n_kv: int, body: bytes = b"", *, size: int | None = None) -> Path:
    """A GGUF v3 header claiming `n_tensors` and `n_kv`, then `body`; `size` makes the file that
    long (sparse: no disk is used) so the counts pass the file-size check and hit the limits."""
    with open(path, "wb") as stream:
        stream.write(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + body)
        if size is not None:
            stream.truncate(size)
    return path


def string_array_kv(key: bytes, items: list[bytes]) -> bytes:
    """One metadata pair holding an array of strings (GGUF type 9 of type 8)."""
    return gguf_string(key) + struct.pack("<IIQ", 9, 8, len(items)) + b"".join(gguf_string(item) for item in items)


def with_f32_tensor_filled(path: Path, tensor_name: str, value: float, out: Path) -> Path:
    """A copy of a real GGUF (e.g. the bundled model) with every value of an F32 tensor set to
    `value`: NaN weights that llama.cpp still loads, or zeros that flatten the logits."""
    tensor = next(t for t in package_reader(path).tensors if t.name == tensor_name)
    assert tensor.tensor_type == gguf.GGMLQuantizationType.F32, f"{tensor_name} is {tensor.tensor_type.name}"
    shutil.copyfile(path, out)
    with open(out, "r+b") as stream:
        stream.seek(tensor.data_offset)
        stream.write(np.full(int(tensor.n_elements), value, dtype="<f4").tobytes())
    return out
