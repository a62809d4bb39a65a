"""GGUF headers made of many short arrays (each under the 512 entries kept whole): what is held stays bounded."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from gguf_factory import gguf_string, packed_gguf
from test_gguf_reader import _peak_bytes_while
from workbench.core.gguf.model_info import LongArray, LongString
from workbench.core.gguf.reader import MAX_KEPT_ARRAY_ITEMS, read_gguf

MIB = 1024 * 1024


def _architecture() -> bytes:
    return gguf_string(b"general.architecture") + struct.pack("<I", 8) + gguf_string(b"llama")


def _read_held(path: Path):
    """The metadata and the peak Python memory of reading `path`, and how many array entries it holds."""
    infos = []
    peak = _peak_bytes_while(lambda: infos.append(read_gguf(path)))
    metadata = infos[0].metadata
    held = sum(len(value) for key, value in metadata.items() if key.startswith("junk.") and isinstance(value, tuple))
    return metadata, peak, held


def test_thousands_of_512_entry_number_arrays_are_not_all_held(tmp_path: Path):
    # 1,024 arrays of 512 distinct u64 (a 4 MiB header). Each array is under the 512 kept
    # whole, so all 524,288 numbers were held as Python ints: 40 bytes each with the tuple
    # slot, ~21 MB here (a 64 MB header of them took 460 MB of RSS in `workbench inspect`).
    rnd = random.Random(7)
    values = struct.pack("<512Q", *[(1 << 62) | rnd.getrandbits(62) for _ in range(512)])
    arrays = b"".join(gguf_string(b"junk.%05d" % index) + struct.pack("<IIQ", 9, 10, 512) + values for index in range(1024))
    path = packed_gguf(tmp_path / "number-arrays.gguf", 0, 1025, _architecture() + arrays)
    metadata, peak, held = _read_held(path)
    assert held <= MAX_KEPT_ARRAY_ITEMS
    assert metadata["junk.01023"] == LongArray("UINT64", 512)  # still there, by type and length
    # 65,536 kept numbers cost ~2.6 MB; the 1,024 keys and the read buffer a little more.
    assert peak < 10 * MIB, f"reading held {peak / MIB:.1f} MiB"


def test_many_strings_in_short_arrays_are_not_all_decoded(tmp_path: Path):
    # 400 arrays of 512 distinct 12-byte strings (204,800 strings): each array is kept whole,
    # so every string was decoded and held, ~81 bytes each with its slot: ~16.6 MB here (2M of
    # them took 200 MB and 6 s in `workbench inspect` on a loaded 2-core box).
    arrays = b"".join(gguf_string(b"junk.%05d" % index) + struct.pack("<IIQ", 9, 8, 512)
                      + b"".join(gguf_string(b"s%05d-%05d" % (index, item)) for item in range(512))
                      for index in range(400))
    path = packed_gguf(tmp_path / "string-arrays.gguf", 0, 401, _architecture() + arrays)
    metadata, peak, held = _read_held(path)
    assert held <= MAX_KEPT_ARRAY_ITEMS
    assert metadata["junk.00000"][511] == "s00000-00511"  # the first ones are read as before
    assert metadata["junk.00399"] == LongArray("STRING", 512)
    assert peak < 10 * MIB, f"reading held {peak / MIB:.1f} MiB"


def test_thousands_of_medium_strings_are_not_all_held(tmp_path: Path):
    # 40 strings of 1 MiB (each just under the 1 MiB skipped alone): 40 MiB decoded and held.
    # Past 16 MiB held in all, a string stands as LongString(length).
    text = b"t" * (MIB - 16)
    pairs = b"".join(gguf_string(b"text.%02d" % index) + struct.pack("<I", 8) + gguf_string(text) for index in range(40))
    path = packed_gguf(tmp_path / "medium-strings.gguf", 0, 41, _architecture() + pairs)
    infos = []
    peak = _peak_bytes_while(lambda: infos.append(read_gguf(path)))
    metadata = infos[0].metadata
    assert metadata["text.00"] == text.decode()
    assert metadata["text.39"] == LongString(len(text))
    assert peak < 28 * MIB, f"reading held {peak / MIB:.1f} MiB"
