"""A resumable fetch of one file into its cache blob's partial: HTTP Range resumes, retries, a hash kept in step."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx2

from workbench.core.errors import HubError
from workbench.core.hub.cache_layout import CachedFilePaths
from workbench.core.hub.client import HubConnection, HubServerFailed, hub_errors, raise_for_status_bounded
from workbench.core.hub.download_events import DiskFull, DownloadCancelled, DownloadRetried, DownloadStarted, EventSink
from workbench.core.hub.download_progress import DownloadProgress
from workbench.core.hub.partial_file import DISK_FULL_ERRNOS, HashedFile, open_partial

_RETRY_PAUSE_S = (0.5, 1.0, 2.0)


@dataclass(frozen=True)
class PartFetch:
    """One file to fetch: which it is, where its bytes come from and go, and how often to try."""

    repo: str
    filename: str  # its path in the repo
    part: int  # 1-based, of `parts` (a split model's files)
    parts: int
    size: int  # the bytes the file has; nothing is written past them
    location: str  # where the bytes are first asked for
    head: Callable[[], object]  # asks the hub again: a fresh location after a failure
    paths: CachedFilePaths
    max_attempts: int


def fetch_with_resume(
    fetch: PartFetch, conn: HubConnection, progress: DownloadProgress, stop: threading.Event, emit: EventSink,
) -> tuple[int, str]:
    """Bring `blobs/<etag>.incomplete` to `fetch.size` bytes: (bytes transferred, sha256 hex)."""
    size, filename, location = fetch.size, fetch.filename, fetch.location
    partial = fetch.paths.incomplete
    if partial.exists() and partial.stat().st_size > size:
        partial.unlink()  # longer than the file: not ours to continue
    open_partial(partial, "ab").close()  # exists from here on, even for a file of 0 bytes
    hashed = HashedFile(partial)
    hashed.catch_up(stop, filename, size)
    offset = hashed.n_bytes
    emit(DownloadStarted(fetch.repo, filename, size, offset, fetch.part, fetch.parts))
    progress.add_done(offset, force=True)
    fetched = 0
    attempt = 1
    while offset < size:
        try:
            fetched += _fetch_range(fetch, location, offset, hashed, conn, progress, stop)
            offset = hashed.n_bytes
            if offset < size:
                raise httpx2.RemoteProtocolError(f"the server closed the transfer at byte {offset} of {size}")
        except (DownloadCancelled, ServerSentTooMuch):
            raise
        except (httpx2.TransportError, HubError) as error:
            hashed.catch_up(stop, filename, size)  # normally nothing to do: every byte hashed was written
            offset = hashed.n_bytes
            retryable = isinstance(error, (httpx2.TransportError, HubServerFailed))
            if stop.is_set():
                raise DownloadCancelled(filename, progress.done, progress.total) from None
            if not retryable or attempt >= fetch.max_attempts:
                raise _stopped(fetch, offset, error) from None
            emit(DownloadRetried(fetch.repo, filename, attempt, fetch.max_attempts, _reason(error), offset))
            if stop.wait(_RETRY_PAUSE_S[min(attempt - 1, len(_RETRY_PAUSE_S) - 1)]):
                raise DownloadCancelled(filename, progress.done, progress.total) from None
            attempt += 1
            location = _refreshed(location, fetch.head)
    return fetched, hashed.hexdigest()


class ServerSentTooMuch(HubError):
    """The server sent more bytes than the hub announced for the file: a server error, never written past the size."""


def _fetch_range(
    fetch: PartFetch,
    location: str,
    offset: int,
    hashed: HashedFile,
    conn: HubConnection,
    progress: DownloadProgress,
    stop: threading.Event,
) -> int:
    """One GET from `offset` to the end, appended to the partial file, never past `fetch.size`: bytes received.

    A server that ignores Range answers 200 with the whole file: the partial starts again
    from byte 0. A body longer than the announced size (or one that never ends) is cut at
    the size and reported as the server's error; a full disk becomes DiskFull, the partial kept.
    """
    size, filename = fetch.size, fetch.filename
    headers = conn.headers(location)
    headers["Accept-Encoding"] = "identity"  # byte offsets must be file offsets
    if offset:
        headers["Range"] = f"bytes={offset}-"
    received = 0
    with conn.session().stream("GET", location, headers=headers, timeout=conn.timeout()) as response:
        if response.status_code == 416 and offset >= size:
            return 0
        if response.status_code >= 400:
            with hub_errors(conn, filename=filename):
                raise_for_status_bounded(response, where=filename)
        mode = "ab"
        if offset and response.status_code == 200:
            mode = "wb"
            hashed.reset()
            progress.add_done(-offset, force=True)  # those bytes are written again: the bar must not pass 100%
        elif offset and not response.headers.get("Content-Range", "").startswith(f"bytes {offset}-"):
            raise HubError(f"the server answered a resume at byte {offset} with {response.headers.get('Content-Range')!r:.80}", where=filename, fix="Try again; if it repeats, delete the partial file in the cache")
        body_start = hashed.n_bytes if mode == "ab" else 0
        declared = _declared_length(response)
        # Unbuffered: every byte received is on disk at once, so a killed process resumes from all of it.
        try:
            with open_partial(hashed.path, mode) as out:
                for chunk in response.iter_bytes():
                    if stop.is_set():
                        raise DownloadCancelled(filename, progress.done, progress.total)
                    room = size - hashed.n_bytes
                    if len(chunk) > room:
                        hashed.append(out, chunk[:room])
                        progress.add_done(room)
                        raise _sent_too_much(location, size, filename)
                    hashed.append(out, chunk)
                    received += len(chunk)
                    progress.add_done(len(chunk))
                    if hashed.n_bytes == size and declared is not None and declared > size - body_start:
                        raise _sent_too_much(location, size, filename)  # it says more is coming: do not wait for it
        except OSError as error:
            if error.errno in DISK_FULL_ERRNOS:
                raise DiskFull(hashed.path, hashed.n_bytes) from None
            raise
    return received


def _declared_length(response) -> int | None:
    text = response.headers.get("Content-Length", "")
    return int(text) if text.isdigit() and len(text) < 20 else None


def _sent_too_much(location: str, size: int, filename: str) -> ServerSentTooMuch:
    parts = urlsplit(location)
    return ServerSentTooMuch(
        f"the server at {parts.scheme}://{parts.netloc} sent more than the {size:,} bytes announced; stopped at {size:,}",
        where=filename,
        fix="The first bytes are kept: run the same command again to check them, or use another mirror (HF_ENDPOINT)",
    )


def _refreshed(location: str, head: Callable[[], object]) -> str:
    """Ask the hub again where the bytes are: a CDN's signed URL expires during a long download."""
    try:
        return getattr(head(), "location", None) or location
    except Exception:  # noqa: BLE001 - the next attempt reports the real failure
        return location


def _stopped(fetch: PartFetch, offset: int, error: BaseException) -> HubError:
    size = fetch.size
    share = f"{offset / size:.0%}" if size else "0%"
    kept = "the partial file is kept: run the same download again to resume" if offset else "run it again when the link is back"
    return HubError(
        f"download stopped at {share} ({offset / 1e6:.1f} of {size / 1e6:.1f} MB): {_reason(error)}",
        where=f"{fetch.repo}/{fetch.filename}",
        fix=kept[0].upper() + kept[1:],
    )


def _reason(error: BaseException) -> str:
    if isinstance(error, HubError):
        return error.what
    text = str(error).strip()
    name = type(error).__name__
    if "timeout" in name.lower() or "timed out" in text.lower():
        return f"the link stalled ({name})"
    return f"{text or name}"
