"""The partial download on disk: opened never through a link, and hashed in step with the bytes it holds."""

from __future__ import annotations

import errno
import hashlib
import os
import threading
from pathlib import Path

from workbench.core.files.safe_paths import UnsafePathError
from workbench.core.hub.download_events import DownloadCancelled
from workbench.core.units import MIB

HASH_CHUNK = MIB
# A write to a full disk, or past the user's quota, fails with one of these.
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class HashedFile:
    """The partial file and the sha256 of exactly the bytes it holds, kept in step while appending."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._hasher = hashlib.sha256()
        self.n_bytes = 0

    def catch_up(self, stop: threading.Event, filename: str, size: int) -> None:
        """Hash what is on disk beyond what was hashed (a resumed partial; rarely a torn append)."""
        on_disk = self.path.stat().st_size if self.path.exists() else 0
        if on_disk == self.n_bytes:
            return
        if on_disk < self.n_bytes:
            self.reset()
        with open(self.path, "rb") as existing:
            existing.seek(self.n_bytes)
            while chunk := existing.read(HASH_CHUNK):
                if stop.is_set():
                    raise DownloadCancelled(filename, self.n_bytes, size)
                self._hasher.update(chunk)
                self.n_bytes += len(chunk)

    def reset(self) -> None:
        self._hasher = hashlib.sha256()
        self.n_bytes = 0

    def append(self, out, chunk: bytes) -> None:
        """Write all of `chunk`, hashing exactly what reached the file: a nearly full disk
        takes part of a write before it refuses the rest, and the hash must match the file."""
        view = memoryview(chunk)
        while view:
            written = out.write(view)
            self._hasher.update(view[:written])
            self.n_bytes += written
            view = view[written:]

    def hexdigest(self) -> str:
        return self._hasher.hexdigest()


def open_partial(path: Path, mode: str):
    """The partial file, unbuffered, never through a symlink: path_inside checked the path, and
    O_NOFOLLOW keeps a link planted after that check from redirecting the writes."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "ab" else os.O_TRUNC) | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(path, flags, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UnsafePathError(f"refused to write through the symbolic link {path}", fix="Remove the link from the cache") from None
        raise
    return open(descriptor, mode, buffering=0)
