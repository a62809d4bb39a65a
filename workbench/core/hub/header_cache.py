"""Previewed GGUF headers kept on disk (the raw bytes fetched), so a fit preview works offline later."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from workbench.core import paths
from workbench.core.files.safe_paths import UnsafePathError, path_inside
from workbench.core.hub.cache_layout import repo_folder_name
from workbench.core.hub.names import file_name_problem, sha256_problem, size_problem
from workbench.core.hub.range_stream import SeekableReader
from workbench.core.units import MIB


class HeaderCacheMiss(OSError):
    """The stored bytes do not cover a read (the reader asked for bytes the preview never fetched)."""


@dataclass(frozen=True)
class StoredHeader:
    repo: str
    path: str
    size: int  # the whole file's size, so the reader sees the real file length
    sha256: str | None
    segments: tuple[tuple[int, bytes], ...]

    @property
    def stored_bytes(self) -> int:
        return sum(len(data) for _, data in self.segments)

    def stream(self) -> SegmentStream:
        return SegmentStream(self.segments, self.size, name=f"{self.repo}/{self.path}")


def header_cache_dir() -> Path:
    return paths.cache_dir() / "headers"


def _files(repo: str, path: str) -> tuple[Path, Path]:
    """The two files of one stored header; UnsafePathError when `repo` or `path` would lead out of the header cache."""
    root = header_cache_dir()
    folder = repo_folder_name(repo)
    return path_inside(root, folder, path + ".head.json"), path_inside(root, folder, path + ".head.bin")


# The offline copy is a convenience, so what a mirror can make us keep is bounded: real headers
# (the largest vocabularies) take under 10 MB, and a hostile repository listing thousands of
# files, each answered with a 64 MB header, must not fill the disk through `files --preview`.
MAX_STORED_HEADER_BYTES = 16 * MIB
MAX_HEADER_CACHE_BYTES = 512 * MIB


def save_header(repo: str, path: str, size: int, sha256: str | None, segments: tuple[tuple[int, bytes], ...]) -> Path | None:
    """Store the fetched byte ranges of one file's header; the JSON is written last so a torn write is a miss.

    None (nothing stored) when the header is over MAX_STORED_HEADER_BYTES or the folder would pass
    MAX_HEADER_CACHE_BYTES: the preview is complete without it, only its offline copy is skipped.
    """
    stored_bytes = sum(len(data) for _, data in segments)
    if stored_bytes > MAX_STORED_HEADER_BYTES or _folder_bytes(header_cache_dir()) + stored_bytes > MAX_HEADER_CACHE_BYTES:
        return None
    meta_file, data_file = _files(repo, path)
    meta_file.parent.mkdir(parents=True, exist_ok=True)
    meta_file, data_file = _files(repo, path)  # again, now the folders exist
    data_file.write_bytes(b"".join(data for _, data in segments))
    meta = {"repo": repo, "path": path, "size": size, "sha256": sha256, "segments": [[offset, len(data)] for offset, data in segments]}
    temporary = path_inside(header_cache_dir(), repo_folder_name(repo), path + ".head.json.tmp")
    temporary.write_text(json.dumps(meta))
    os.replace(temporary, meta_file)
    return meta_file


def _folder_bytes(folder: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


def stored_header_files(repo: str) -> tuple[tuple[str, int, str | None], ...]:
    """(path, file size, sha256) of every header stored for `repo`: what an offline preview can show."""
    try:
        folder = path_inside(header_cache_dir(), repo_folder_name(repo))
    except UnsafePathError:
        return ()
    found = []
    for meta_file in sorted(folder.rglob("*.head.json")) if folder.is_dir() else ():
        try:
            meta = json.loads(meta_file.read_text())
            entry = (meta["path"], meta["size"], meta.get("sha256"))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # damaged: load_header would miss it too
        # The files are ours, but a name read back from disk is still checked before it is used.
        if file_name_problem(entry[0]) or size_problem(entry[1]) or (entry[2] is not None and sha256_problem(entry[2])):
            continue
        found.append(entry)
    return tuple(found)


def load_header(repo: str, path: str, *, sha256: str | None = None) -> StoredHeader | None:
    """The stored header of `repo/path`; None when there is none, it is damaged, or its sha256 differs."""
    try:
        meta_file, data_file = _files(repo, path)
        meta = json.loads(meta_file.read_text())
        blob = data_file.read_bytes()
        segments = []
        cursor = 0
        for offset, length in meta["segments"]:
            segments.append((int(offset), blob[cursor : cursor + int(length)]))
            cursor += int(length)
        if cursor != len(blob):
            return None
        stored = StoredHeader(repo=meta["repo"], path=meta["path"], size=int(meta["size"]), sha256=meta.get("sha256"), segments=tuple(segments))
    except (OSError, ValueError, KeyError, TypeError, UnsafePathError):
        return None
    if sha256 and stored.sha256 and stored.sha256 != sha256:
        return None  # the hub has a new file under this name: preview it afresh
    return stored


class SegmentStream(SeekableReader):
    """A seekable stream over stored (offset, bytes) segments that reports the whole file's size."""

    def __init__(self, segments: tuple[tuple[int, bytes], ...], size: int, *, name: str = "") -> None:
        super().__init__(size, name)
        self._segments = segments

    def read(self, size: int = -1) -> bytes:
        if self._position >= self.size:
            return b""
        for start, data in self._segments:
            if start <= self._position < start + len(data):
                end = len(data) if size is None or size < 0 else self._position - start + size
                piece = data[self._position - start : end]
                self._position += len(piece)
                return piece
        raise HeaderCacheMiss(f"the stored header has no bytes at offset {self._position}")
