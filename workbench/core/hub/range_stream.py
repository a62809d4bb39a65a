"""A read-only, seekable binary stream over HTTP Range requests, so a GGUF header is read without the file."""

from __future__ import annotations

import bisect
import io
from typing import Any
from urllib.parse import urlsplit

from workbench.core.errors import HubError
from workbench.core.hub.client import raise_for_status_bounded
from workbench.core.units import MIB

FIRST_BLOCK = 256 * 1024
LARGEST_BLOCK = 8 * MIB
MAX_SKIP_BYTES = 64 * MIB  # how far into a file a server that ignores Range is followed


class SeekableReader(io.RawIOBase):
    """A read-only stream of `size` bytes with a position; subclasses provide `read`."""

    def __init__(self, size: int, name: str) -> None:
        super().__init__()
        self.size = size
        self.name = name
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._position = base + offset
        return self._position

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class RangeStream(SeekableReader):
    """Serves reads from fetched blocks; a miss fetches at least a read-ahead block that doubles.

    A GGUF header is read front to back, so the first 256 KiB answers a small model in one
    request and the growing block covers a 150k-token vocabulary in a handful. Every fetched
    segment is kept (`segments`) so the caller can store them and read the header again offline.
    """

    def __init__(self, url: str, size: int, *, client: Any, headers: dict[str, str] | None = None, timeout: Any = None, name: str = "") -> None:
        super().__init__(size, name or url)
        self.url = url
        self._client = client  # an httpx-style client: client.stream("GET", url, headers=, timeout=)
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._starts: list[int] = []  # sorted segment starts
        self._segments: dict[int, bytes] = {}
        self._block = FIRST_BLOCK
        self.bytes_fetched = 0
        self.requests = 0

    def read(self, size: int = -1) -> bytes:
        if self._position >= self.size:
            return b""
        end = self.size if size is None or size < 0 else min(self._position + size, self.size)
        out = bytearray()
        while self._position < end:
            piece = self._cached(self._position, end)
            if piece is None:
                self._fetch(self._position, end)
                piece = self._cached(self._position, end)
                if not piece:
                    break
            out += piece
            self._position += len(piece)
        return bytes(out)

    # -- what was fetched ------------------------------------------------------------------
    @property
    def segments(self) -> tuple[tuple[int, bytes], ...]:
        """(offset, bytes) of every fetched range, in file order, adjacent ones merged."""
        merged: list[tuple[int, bytearray]] = []
        for start in self._starts:
            data = self._segments[start]
            if merged and merged[-1][0] + len(merged[-1][1]) >= start:
                last_start, last = merged[-1]
                overlap = last_start + len(last) - start
                last += data[overlap:]
            else:
                merged.append((start, bytearray(data)))
        return tuple((start, bytes(data)) for start, data in merged)

    # -- internals -------------------------------------------------------------------------
    def _cached(self, start: int, end: int) -> bytes | None:
        index = bisect.bisect_right(self._starts, start) - 1
        if index < 0:
            return None
        seg_start = self._starts[index]
        data = self._segments[seg_start]
        if start >= seg_start + len(data):
            return None
        return data[start - seg_start : end - seg_start]

    def _fetch(self, start: int, end: int) -> None:
        want_end = min(max(end, start + self._block), self.size)
        next_index = bisect.bisect_right(self._starts, start)
        if next_index < len(self._starts):  # stop where already-fetched bytes begin; read() continues from them
            want_end = min(want_end, self._starts[next_index])
        headers = dict(self._headers)
        headers["Range"] = f"bytes={start}-{want_end - 1}"
        headers["Accept-Encoding"] = "identity"  # offsets must be file offsets
        self.requests += 1
        with self._client.stream("GET", self.url, headers=headers, timeout=self._timeout) as response:
            if response.status_code >= 400:
                _raise_for_status(response, self.name)
            # A server that ignores Range answers 200 from byte 0: skip to `start` without keeping
            # those bytes, read what we need, then hang up. Far into a big file that is a download
            # of its own, so it is refused instead.
            skip = start if response.status_code == 200 else 0
            if skip > MAX_SKIP_BYTES:
                raise _range_error(f"the server ignores range requests (it answered a read at byte {start:,} with the whole file)", self.url, self.name)
            if response.status_code == 206 and not response.headers.get("Content-Range", "").startswith(f"bytes {start}-"):
                raise _range_error(f"the server answered a read at byte {start:,} with Content-Range {response.headers.get('Content-Range')!r:.60}", self.url, self.name)
            wanted = want_end - start
            data = bytearray()
            for chunk in response.iter_bytes():
                self.bytes_fetched += len(chunk)
                if skip:
                    dropped = min(skip, len(chunk))
                    skip -= dropped
                    chunk = chunk[dropped:]
                data += chunk[: wanted - len(data)]  # never more than asked for, whatever the server sends
                if len(data) >= wanted:
                    break
        data = bytes(data)
        self._block = min(self._block * 2, LARGEST_BLOCK)
        if data:
            bisect.insort(self._starts, start)
            self._segments[start] = data


def _raise_for_status(response: Any, name: str) -> None:
    raise_for_status_bounded(response, where=name)


def _range_error(what: str, url: str, name: str) -> Exception:
    parts = urlsplit(url)
    return HubError(f"{what}: {parts.scheme}://{parts.netloc}", where=name, fix="Use another mirror (HF_ENDPOINT), or download the file to preview it locally")
