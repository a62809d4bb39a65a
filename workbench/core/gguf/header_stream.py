"""Sequential buffered reads from the start of a GGUF stream, each failure a GGUFError naming the byte."""

from __future__ import annotations

import os
from typing import BinaryIO, NoReturn

from workbench.core.errors import GGUFError
from workbench.core.units import MIB

REDOWNLOAD = "The file is damaged or incomplete: download it again"
# What the reader reads at most. A header is a few MiB at most (the largest vocabularies,
# 256k tokens with scores and merges, take about 10 MiB; a tensor table a few thousand
# entries), so a bigger one is forged or broken, and refusing it early keeps both the time
# and the memory of reading a hostile header small.
MAX_HEADER_BYTES = 64 * MIB


class HeaderStream:
    """Sequential buffered reads from the start of a stream, counting every byte fetched.

    Reads grow from 64 KiB to 4 MiB so a small header costs one request and a large
    vocabulary a handful; skips inside the buffer cost nothing, longer ones one seek.
    """

    def __init__(self, stream: BinaryIO, name: str) -> None:
        self.name = name
        self._stream = stream
        try:
            stream.seek(0, os.SEEK_END)
            self.file_size = stream.tell()
            stream.seek(0)
        except (OSError, ValueError, AttributeError) as error:
            raise GGUFError(f"cannot seek in the stream ({error})", where=name, fix="Read from a file or a seekable stream") from None
        self._buffer = b""
        self._buffer_start = 0  # file offset of _buffer[0]
        self._cursor = 0  # file offset of the next byte to hand out
        self._stream_pos = 0
        self._chunk = 64 * 1024
        self.bytes_fetched = 0
        self.limit = MAX_HEADER_BYTES  # no read or skip goes past this offset

    @property
    def offset(self) -> int:
        return self._cursor

    @property
    def remaining(self) -> int:
        return self.file_size - self._cursor

    def read(self, size: int, field: str) -> bytes:
        end = self._cursor + size
        if end > self.file_size:
            self.fail_truncated(field, end)
        if end > self.limit:
            self.check_limit(field, end)
        start = self._cursor - self._buffer_start
        if start + size > len(self._buffer):
            self._fill(size)
            start = 0
        self._cursor += size
        return self._buffer[start : start + size]

    def skip(self, size: int, field: str) -> None:
        if size > self.remaining:
            self.fail_truncated(field, self._cursor + size)
        self.check_limit(field, self._cursor + size)
        self._cursor += size

    def buffered(self) -> tuple[bytes, int]:
        """The buffer and the cursor's index in it, refilled first when fewer than 8 bytes are left."""
        if self._cursor + 8 > self._buffer_start + len(self._buffer) and self.remaining > 0:
            self._fill(min(8, self.remaining))
        return self._buffer, self._cursor - self._buffer_start

    def advance(self, size: int) -> None:
        """Move the cursor over bytes already checked inside the buffer."""
        self._cursor += size

    def _fill(self, needed: int) -> None:
        """Make the buffer start at the cursor and hold at least `needed` bytes."""
        keep = self._buffer[self._cursor - self._buffer_start :] if self._cursor < self._buffer_start + len(self._buffer) else b""
        fetch_from = self._cursor + len(keep)
        want = max(needed - len(keep), self._chunk)
        want = min(want, self.file_size - fetch_from)
        if fetch_from != self._stream_pos:
            self._stream.seek(fetch_from)
        data = b""
        while len(data) < want:  # a stream may return short reads
            piece = self._stream.read(want - len(data))
            if not piece:
                break
            data += piece
        self._stream_pos = fetch_from + len(data)
        self.bytes_fetched += len(data)
        self._buffer = keep + data
        self._buffer_start = self._cursor
        self._chunk = min(self._chunk * 2, 4 * MIB)
        if len(self._buffer) < needed:
            self.fail_truncated("data", self._cursor + needed)

    def check_limit(self, field: str, end: int) -> None:
        """Refuse to go past MAX_HEADER_BYTES: no real header is that large."""
        if end > self.limit:
            self.fail(
                f"the header would be larger than {self.limit // MIB} MiB ({field} reaches byte {end:,}); "
                "real GGUF headers take a few MiB, so the workbench reads no further",
                self._cursor,
                "This is not a model file llama.cpp's tools write: get the model from another source",
            )

    def fail(self, what: str, offset: int, fix: str = REDOWNLOAD) -> NoReturn:
        raise GGUFError(what, where=f"{self.name} (byte {offset})", fix=fix)

    def fail_truncated(self, field: str, needed_end: int) -> NoReturn:
        raise GGUFError(
            f"file ends at byte {self.file_size} but {field} needs bytes up to {needed_end}",
            where=f"{self.name} (byte {self._cursor})",
            fix="The download is incomplete, fetch it again",
        )
