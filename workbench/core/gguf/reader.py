"""Read a GGUF file's header, metadata and tensor table (never its tensor data) into a ModelInfo."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from workbench.core.errors import GGUFError
from workbench.core.files.model_ref import open_model_file
from workbench.core.files.safe_paths import is_control_character, printable_text
from workbench.core.gguf import checks as gguf_checks
from workbench.core.gguf.ggml_types import GGML_TYPES
from workbench.core.gguf.header_stream import REDOWNLOAD, HeaderStream
from workbench.core.gguf.hyperparameters import (
    is_count,
    model_info_from_header,
    must_be_count,
)
from workbench.core.gguf.model_info import LongArray, LongString, ModelInfo, TensorInfo
from workbench.core.units import MIB, sizes_that_differ

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_KEY_BYTES = 65535  # metadata keys are short dotted names; anything near this is garbage
MAX_TENSOR_NAME_BYTES = 63  # GGML_MAX_NAME is 64 with the terminating NUL: gguf.cpp refuses longer names
# Longer arrays (the vocabulary) are summarised in `metadata`; per-layer arrays (at most
# LLAMA_MAX_LAYERS = 512 entries) are kept whole.
ARRAYS_KEPT_WHOLE = 512
PLAUSIBLE_COUNT = 4_000_000  # a count under this in a file cut short is called truncated, not absurd

# Parsing costs ~20 us a key or a tensor entry on an idle x86 core (several times that on a
# loaded edge board): 16,384 of them stay around a second at worst.
MAX_METADATA_KEYS = 16_384  # real models carry under 100 keys
MAX_TENSORS = 16_384  # the largest models llama.cpp runs (400B dense, 671B MoE) hold under 2,000 tensors
MAX_ARRAY_STRINGS = 2_000_000  # tokens and merges together: about 700k in the largest vocabularies
MAX_KEPT_STRING_BYTES = MIB  # a longer string value (chat templates take ~10 kB) is skipped, not held
# Over the whole header, what is decoded and held: real models keep a few per-layer arrays (<= 512
# entries each) and a few kB of strings. Past these, arrays stand as LongArray and strings as
# LongString: 15,500 arrays of 512 u64 (a 64 MB header) held 460 MB, and 2M short strings in
# 512-entry arrays took 6 s to decode.
MAX_KEPT_ARRAY_ITEMS = 65_536
MAX_KEPT_STRINGS_BYTES = 16 * MIB

# GGUF value types: id -> (name, struct code or None for string/array, fixed size).
_VALUE_TYPES: dict[int, tuple[str, str | None, int]] = {
    0: ("UINT8", "B", 1),
    1: ("INT8", "b", 1),
    2: ("UINT16", "H", 2),
    3: ("INT16", "h", 2),
    4: ("UINT32", "I", 4),
    5: ("INT32", "i", 4),
    6: ("FLOAT32", "f", 4),
    7: ("BOOL", "?", 1),
    8: ("STRING", None, 8),  # 8 = the smallest a string can take (its length field)
    9: ("ARRAY", None, 12),
    10: ("UINT64", "Q", 8),
    11: ("INT64", "q", 8),
    12: ("FLOAT64", "d", 8),
}
_STRING, _ARRAY = 8, 9





def read_gguf(source: str | os.PathLike[str] | BinaryIO, *, label: str | None = None) -> ModelInfo:
    """Parse the GGUF header of a path or a seekable binary stream into a ModelInfo.

    Only the header is read (buffered, front to back), so a stream that serves HTTP
    ranges costs `header_bytes` of transfer. Every problem raises one GGUFError that
    names the file, the field, its byte offset and what to do.
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        name = label or str(path)
        try:
            with open_model_file(path, name) as stream:  # a FIFO or a device is refused, never waited on
                return _parse(stream, name)
        except FileNotFoundError:
            raise GGUFError("no such file", where=name, fix="Check the path, or run `workbench models` to list known models") from None
        except PermissionError:
            raise GGUFError("permission denied", where=name, fix="Make the file readable for this user") from None
    name = label or str(getattr(source, "name", "") or "<stream>")
    return _parse(source, name)



class _Parser:
    def __init__(self, reader: HeaderStream, endian: str) -> None:
        self.reader = reader
        self.endian = endian
        self.strings_left = MAX_ARRAY_STRINGS  # in string arrays, over the whole header
        self.items_kept_left = MAX_KEPT_ARRAY_ITEMS  # array entries decoded and held, over the whole header
        self.string_bytes_kept_left = MAX_KEPT_STRINGS_BYTES  # string bytes decoded and held, over the whole header

    def unpack(self, code: str, size: int, field: str) -> Any:
        return struct.unpack(self.endian + code, self.reader.read(size, field))[0]

    def u32(self, field: str) -> int:
        return self.unpack("I", 4, field)

    def u64(self, field: str) -> int:
        return self.unpack("Q", 8, field)

    def count(self, field: str, smallest_item: int, limit: int | None = None, what: str = "") -> int:
        """A u64 count of things that each take at least `smallest_item` bytes.

        Checked against the bytes left in the file, then against `limit` (what the reader
        accepts at most, with `what` saying why), then against the header size limit.
        """
        offset = self.reader.offset
        value = self.u64(field)
        if value * smallest_item > self.reader.remaining:
            if value < PLAUSIBLE_COUNT:  # a sane count in a file cut short: say it is truncated
                self.reader.fail_truncated(f"{field} {value}", self.reader.offset + value * smallest_item)
            self.reader.fail(
                f"{field} is {value}, more than the {self.reader.remaining} bytes left in the file could hold",
                offset,
            )
        if limit is not None and value > limit:
            self.reader.fail(f"{field} is {value:,}; the workbench reads at most {limit:,} ({what})", offset,
                             "This is not a model file llama.cpp's tools write: get the model from another source")
        self.reader.check_limit(field, self.reader.offset + value * smallest_item)
        return value

    def string_length(self, field: str, limit: int | None = None) -> int:
        offset = self.reader.offset
        length = self.u64(f"{field} length")
        if length > self.reader.remaining:
            self.reader.fail(
                f"{field} length is {length} bytes, past the end of the file ({self.reader.remaining} bytes left)",
                offset,
            )
        if limit is not None and length > limit:
            self.reader.fail(f"{field} length is {length} bytes, longer than {limit} bytes", offset)
        return length

    def string(self, field: str, limit: int | None = None) -> str:
        """A metadata key or a tensor name: printed and matched, so a control character (ESC) is refused."""
        length = self.string_length(field, limit)
        offset = self.reader.offset
        text = self.reader.read(length, field).decode("utf-8", errors="replace")
        if any(map(is_control_character, text)):
            self.reader.fail(f"{field} {printable_text(text)[:80]!r} contains a control character", offset)
        return text

    def string_value(self, field: str) -> str | LongString:
        """A metadata string: read when short, skipped (and stood for by its length) when long."""
        length = self.string_length(field)
        if length > MAX_KEPT_STRING_BYTES or length > self.string_bytes_kept_left:
            self.reader.skip(length, field)
            return LongString(length)
        self.string_bytes_kept_left -= length
        return self.reader.read(length, field).decode("utf-8", errors="replace")

    def skip_string(self, field: str) -> None:
        self.reader.skip(self.string_length(field), field)

    def skip_strings(self, count: int, field: str) -> None:
        """Skip `count` strings walking the buffer directly: a vocabulary holds 100k+ of them."""
        length_at = struct.Struct(self.endian + "Q").unpack_from
        left = count
        while left:
            buffer, position = self.reader.buffered()
            start, end = position, len(buffer)
            while left and position + 8 <= end:
                length = length_at(buffer, position)[0]
                if position + 8 + length > end:
                    break
                position += 8 + length
                left -= 1
            self.reader.advance(position - start)
            self.reader.check_limit(field, self.reader.offset)
            if left:  # a string across the buffer's end: the checked path refills or reports it
                self.skip_string(field)
                left -= 1

    def value_type(self, field: str) -> int:
        offset = self.reader.offset
        type_id = self.u32(field)
        if type_id not in _VALUE_TYPES:
            self.reader.fail(f"{field} has unknown value type {type_id} (GGUF knows 0-12)", offset)
        return type_id

    def value(self, type_id: int, field: str) -> Any:
        name, code, size = _VALUE_TYPES[type_id]
        if code is not None:
            return self.unpack(code, size, field)
        if type_id == _STRING:
            return self.string_value(field)
        item_type = self.value_type(f"{field} item type")
        if item_type == _ARRAY:
            # llama.cpp's gguf reader refuses nested arrays too
            self.reader.fail(f"{field} is an array of arrays, which GGUF does not allow", self.reader.offset - 4)
        item_name, item_code, item_size = _VALUE_TYPES[item_type]
        length = self.count(f"{field} length", item_size)
        if item_type == _STRING:
            self.strings_left -= length
            if self.strings_left < 0:
                self.reader.fail(
                    f"{field} takes the header past {MAX_ARRAY_STRINGS:,} strings in arrays; the largest "
                    "vocabularies hold under a million tokens and merges together",
                    self.reader.offset - 8,
                    "This is not a model file llama.cpp's tools write: get the model from another source",
                )
        kept = length <= ARRAYS_KEPT_WHOLE and length <= self.items_kept_left
        if kept:
            self.items_kept_left -= length
        if item_code is not None:
            if not kept:
                self.reader.skip(length * item_size, field)
                return LongArray(item_name, length)
            raw = self.reader.read(length * item_size, field)
            return tuple(struct.unpack(f"{self.endian}{length}{item_code}", raw))
        if not kept:
            self.skip_strings(length, field)
            return LongArray(item_name, length)
        return tuple(self.string_value(field) for _ in range(length))


def _fail_empty(stream: BinaryIO, name: str) -> NoReturn:
    """A size of 0 is an empty file, or one the kernel writes as it is read (/proc, /sys): say which."""
    try:
        stream.seek(0)
        generated = bool(stream.read(1))
    except OSError:
        generated = False
    if generated:
        raise GGUFError("is a special file of the kernel (its size reads 0 and its text is made as it is read, "
                        "like the files under /proc and /sys), not a model", where=name,
                        fix="Give the path of a .gguf model file")
    raise GGUFError("the file is empty (0 bytes)", where=name, fix="The download failed: fetch it again")


def _parse(stream: BinaryIO, name: str) -> ModelInfo:
    reader = HeaderStream(stream, name)
    if reader.file_size == 0:
        _fail_empty(stream, name)
    head = reader.read(min(8, reader.file_size), "magic")
    if head[:4] != GGUF_MAGIC:
        _fail_magic(reader, head)
    raw_version = head[4:8]
    if len(raw_version) < 4:
        reader.fail_truncated("version", 8)
    endian = "<"
    version = struct.unpack("<I", raw_version)[0]
    if version not in SUPPORTED_VERSIONS and struct.unpack(">I", raw_version)[0] in SUPPORTED_VERSIONS:
        endian, version = ">", struct.unpack(">I", raw_version)[0]  # a big-endian GGUF (s390x builds)
    if version not in SUPPORTED_VERSIONS:
        hint = "GGUF v1 is from 2023 and no longer loads: get a newer conversion" if version == 1 else REDOWNLOAD
        reader.fail(f"version is {version}; llama.cpp reads GGUF versions 2 and 3", 4, hint)
    parser = _Parser(reader, endian)
    # smallest tensor info: name length 8 + n_dims 4 + one dim 8 + type 4 + offset 8
    n_tensors = parser.count("tensor count", 32, MAX_TENSORS, "the largest models have a few thousand tensors")
    # smallest key/value: key length 8 + value type 4 + a one-byte value
    n_kv = parser.count("metadata key/value count", 13, MAX_METADATA_KEYS, "real models carry under 100 keys")

    metadata = _read_metadata(parser, n_kv)
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (alignment - 1):
        reader.fail(f"general.alignment is {alignment!r}; it must be a power of two", 0)
    raw_tensors = _read_tensor_table(parser, n_tensors, alignment)
    return model_info_from_header(name, reader, version, metadata, _place_tensors(reader, raw_tensors, alignment))


def _read_metadata(parser: _Parser, n_kv: int) -> dict[str, Any]:
    reader = parser.reader
    metadata: dict[str, Any] = {}
    for index in range(n_kv):
        key_offset = reader.offset
        key = parser.string(f"metadata key #{index}", limit=MAX_KEY_BYTES)
        if key in metadata:
            reader.fail(f"metadata key {key!r} appears twice", key_offset)
        type_id = parser.value_type(f"metadata {key!r} type")
        metadata[key] = parser.value(type_id, f"metadata {key!r}")
        if must_be_count(key):
            if not is_count(metadata[key]):
                reader.fail(f"metadata {key!r} should be a non-negative integer, found {metadata[key]!r}", key_offset)
            if metadata[key] > gguf_checks.MAX_U32:
                reader.fail(f"metadata {key!r} is {metadata[key]:,}, beyond the 32-bit range llama.cpp reads it into",
                            key_offset)
    return metadata


_RawTensor = tuple[str, str, tuple[int, ...], int, int]  # name, type, shape, offset in data, bytes


def _read_tensor_table(parser: _Parser, n_tensors: int, alignment: int) -> list[_RawTensor]:
    reader = parser.reader
    raw_tensors = []
    seen: set[str] = set()
    for index in range(n_tensors):
        entry_offset = reader.offset
        tensor_name = parser.string(f"tensor #{index} name", limit=MAX_TENSOR_NAME_BYTES)
        if tensor_name in seen:
            reader.fail(f"tensor {tensor_name!r} appears twice in the tensor table", entry_offset)
        seen.add(tensor_name)
        n_dims = parser.u32(f"tensor {tensor_name!r} dimension count")
        if not 1 <= n_dims <= MAX_DIMS:
            reader.fail(f"tensor {tensor_name!r} has {n_dims} dimensions; ggml allows 1 to {MAX_DIMS}", reader.offset - 4)
        dims_offset = reader.offset
        shape = tuple(parser.u64(f"tensor {tensor_name!r} shape") for _ in range(n_dims))
        n_elements = 1
        for dim in shape:
            n_elements *= dim
        if n_elements == 0 or n_elements >= 1 << 62:
            reader.fail(f"tensor {tensor_name!r} has an absurd shape {list(shape)}", dims_offset)
        type_offset = reader.offset
        type_id = parser.u32(f"tensor {tensor_name!r} type")
        kind = GGML_TYPES.get(type_id)
        if kind is None:
            reader.fail(
                f"tensor {tensor_name!r} has unknown ggml type {type_id}",
                type_offset,
                "The file needs a newer llama.cpp than this workbench knows, or it is damaged",
            )
        if shape[0] % kind.block_size:
            reader.fail(
                f"tensor {tensor_name!r} rows of {shape[0]} values are not whole {kind.name} blocks of {kind.block_size}",
                dims_offset,
            )
        relative = parser.u64(f"tensor {tensor_name!r} data offset")
        if relative % alignment:
            reader.fail(f"tensor {tensor_name!r} data offset {relative} is not a multiple of the alignment {alignment}", reader.offset - 8)
        n_bytes = n_elements // kind.block_size * kind.type_size  # rows are whole blocks (checked above)
        raw_tensors.append((tensor_name, kind.name, shape, relative, n_bytes))
    return raw_tensors


def _place_tensors(reader: HeaderStream, raw_tensors: list[_RawTensor], alignment: int) -> tuple[TensorInfo, ...]:
    """Absolute offsets (data starts at the next alignment after the header), checked against the file's end."""
    data_start = -(-reader.offset // alignment) * alignment
    tensors = []
    for tensor_name, type_name, shape, relative, n_bytes in raw_tensors:
        start = data_start + relative
        if start + n_bytes > reader.file_size:
            ends, needed = sizes_that_differ(reader.file_size, start + n_bytes)
            raise GGUFError(
                f"file ends at {ends} but tensor {tensor_name.removesuffix('.weight')} needs bytes up to {needed}",
                where=f"{reader.name} (tensor table, data offset {start})",
                fix="The download is incomplete, fetch it again",
            )
        tensors.append(TensorInfo(tensor_name, type_name, shape, start, n_bytes))
    return tuple(tensors)



def _fail_magic(reader: HeaderStream, head: bytes) -> NoReturn:
    sample = head + reader.read(min(reader.remaining, 504), "magic")
    text = sample.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<?xml", b"<body")) or b"<html" in text:
        what = "starts with HTML: this is an HTML page, not a GGUF — probably an error page saved by a failed download"
    elif text.startswith((b"{", b"[")):
        what = "starts with JSON: this is a JSON document, not a GGUF — probably an error reply saved by a failed download"
    elif text.startswith(b"version https://git-lfs"):
        what = "is a Git LFS pointer file, not the model itself"
    else:
        what = f"does not start with the GGUF magic (found {head[:4]!r})"
    reader.fail(what, 0, "Download the .gguf file again from its source")


