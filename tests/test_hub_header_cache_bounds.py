"""What a mirror can make the header cache keep is bounded: per header, and for the whole folder."""

from __future__ import annotations

import struct

from gguf_factory import gguf_string, packed_gguf, write_tiny_gguf
from hubserver import hub  # noqa: F401 - a fixture
from workbench.core.hub import header_cache
from workbench.core.hub.preview import read_remote_header

REPO = "mallory/Fat-GGUF"
MIB = 1024 * 1024


def test_a_header_larger_than_any_real_one_is_read_but_not_kept(hub, tmp_path):
    # A vocabulary of 1,000,000 twelve-byte tokens (20 MB; the largest real vocabularies take
    # under 10 MB), each length walked so it is fetched: before, all of it went into the header
    # cache, so a repository listing thousands of such files filled the disk through
    # `files --preview` alone (each file up to the reader's 64 MiB header limit).
    tokens = b"".join(gguf_string(b"tok-%08d" % index) for index in range(1_000_000))
    body = (gguf_string(b"general.architecture") + struct.pack("<I", 8) + gguf_string(b"llama")
            + gguf_string(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 1_000_000) + tokens)
    hub.add_repo(REPO, {"fat-Q4_K_M.gguf": packed_gguf(tmp_path / "fat.gguf", 0, 2, body)})
    header = read_remote_header(REPO, "fat-Q4_K_M.gguf")
    assert header.bytes_fetched > 19 * MIB  # fetched: the preview itself is complete
    assert header_cache._folder_bytes(header_cache.header_cache_dir()) < MIB


def test_the_header_cache_stops_growing_at_its_bound(hub, tmp_path, monkeypatch):
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf")
    hub.add_repo(REPO, {f"m{index}-Q4_K_M.gguf": tiny for index in range(3)})
    first = read_remote_header(REPO, "m0-Q4_K_M.gguf")
    one = header_cache._folder_bytes(header_cache.header_cache_dir())
    assert first.bytes_fetched > 0 and one > 0
    monkeypatch.setattr(header_cache, "MAX_HEADER_CACHE_BYTES", 2 * one + one // 2)  # room for two headers, not three
    for index in (1, 2):
        assert read_remote_header(REPO, f"m{index}-Q4_K_M.gguf").bytes_fetched > 0
    assert one < header_cache._folder_bytes(header_cache.header_cache_dir()) <= 2 * one + one // 2
