"""Download a GGUF model into the Hugging Face cache: progress, cancel, resume across runs, sha256 check.

huggingface_hub's own `hf_hub_download` (2.x) writes to a per-process temporary file and
deletes it on failure, so a killed download starts from zero next time, and it never checks
the sha256. This writer keeps `blobs/<etag>.incomplete` across runs, continues it with an
HTTP Range request, hashes while it writes, and only moves a verified file into
`blobs/<etag>` with the `snapshots/<commit>/<file>` symlink and `refs/<revision>` that
huggingface_hub and llama.cpp expect. A partial or corrupt file is never in `snapshots/`.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import filelock
import httpx2

from workbench.core.errors import HubError
from workbench.core.files.safe_paths import UnsafePathError
from workbench.core.hub.cache_layout import CachedFilePaths, cached_file_paths, hub_cache_dir, link_pointer, write_ref
from workbench.core.hub.client import (
    HubConnection,
    HubServerFailed,
    hub_connection,
    hub_errors,
    raise_for_status_bounded,
)
from workbench.core.hub.download_events import (
    DiskFull,
    DownloadCancelled,
    DownloadEvent,
    DownloadFinished,
    DownloadProgressed,
    DownloadRetried,
    DownloadStarted,
    DownloadVerified,
)
from workbench.core.hub.files import GGUFFile, RemoteFile, list_gguf_files, missing_parts
from workbench.core.hub.metadata import FileMetadata, file_metadata
from workbench.core.hub.names import TRUSTED_FIX, HubAnswerRefused, refused

DISK_MARGIN_BYTES = 64 * 1024 * 1024  # leave the filesystem some room after the model
PROGRESS_INTERVAL_S = 0.2
RATE_WINDOW_S = 5.0
HASH_CHUNK = 1024 * 1024
MAX_ATTEMPTS = 4  # one try and three resumes within a run; beyond that the user decides
_RETRY_PAUSE_S = (0.5, 1.0, 2.0)
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)

EventSink = Callable[[DownloadEvent], None]


@dataclass(frozen=True)
class DownloadPlan:
    """What a download needs: the files, what is already on disk, and the disk it goes to."""

    repo: str
    revision: str
    commit: str
    model: GGUFFile
    total_bytes: int
    on_disk_bytes: int  # complete blobs plus partial downloads already in the cache
    free_bytes: int
    cache: Path

    @property
    def needed_bytes(self) -> int:
        return max(self.total_bytes - self.on_disk_bytes, 0)


def plan_download(repo: str, filename: str, *, revision: str = "main", connection: HubConnection | None = None, cache: Path | None = None) -> DownloadPlan:
    """Look the file up on the hub and check the disk, without transferring any model bytes."""
    conn = connection or hub_connection()
    listing = list_gguf_files(repo, revision=revision, connection=conn)
    model = listing.find(filename)
    gaps = missing_parts(model)
    if gaps:
        raise HubError(f"{model.name} is split but the hub lacks part(s) {', '.join(map(str, gaps))}", where=repo, fix="Pick another file; this one cannot be loaded")
    if model.size_bytes is None:
        raise HubError(f"the hub gives no size for {model.name}", where=repo, fix="Try again later or use another mirror")
    if not listing.commit:
        raise HubAnswerRefused(f"the hub at {conn.endpoint} named no commit for {listing.repo}", fix=TRUSTED_FIX)
    root = cache or hub_cache_dir()
    on_disk = 0
    for part in model.parts:
        if part.sha256 is None:  # its blob is named by the ETag, known only after asking for the file
            continue
        paths = cached_file_paths(listing.repo, listing.commit, part.path, part.sha256, cache=root, source=f"the hub at {conn.endpoint}")
        if paths.blob.is_file():
            on_disk += paths.blob.stat().st_size
        elif paths.incomplete.is_file():
            on_disk += min(paths.incomplete.stat().st_size, part.size_bytes or 0)
    return DownloadPlan(
        repo=listing.repo,
        revision=revision,
        commit=listing.commit,
        model=model,
        total_bytes=model.size_bytes,
        on_disk_bytes=on_disk,
        free_bytes=_free_bytes(root),
        cache=root,
    )


def check_disk_space(plan: DownloadPlan) -> None:
    if plan.needed_bytes + DISK_MARGIN_BYTES > plan.free_bytes:
        raise HubError(
            f"not enough disk space: {plan.model.name} needs {_gb(plan.needed_bytes)} more and {_gb(DISK_MARGIN_BYTES)} "
            f"left free after it, only {_gb(plan.free_bytes)} free",
            where=str(plan.cache),
            fix="Free some space, or set HF_HUB_CACHE to a folder on a bigger disk",
        )


def download_model(
    repo: str,
    filename: str,
    *,
    revision: str = "main",
    on_event: EventSink | None = None,
    cancel: threading.Event | None = None,
    connection: HubConnection | None = None,
    cache: Path | None = None,
    max_attempts: int = MAX_ATTEMPTS,
) -> DownloadFinished:
    """Fetch every part of a GGUF model into the HF cache; return where the verified model is.

    Raises DownloadCancelled when `cancel` is set (partial kept), HubError for everything
    else (with a resumable partial kept when the link failed, deleted when the bytes were bad).
    """
    conn = connection or hub_connection()
    emit = on_event or (lambda event: None)
    stop = cancel or threading.Event()
    started = time.monotonic()
    plan = plan_download(repo, filename, revision=revision, connection=conn, cache=cache)
    check_disk_space(plan)
    progress = _Progress(plan.repo, plan.model.name, plan.total_bytes, emit)
    try:
        results = [
            _download_part(plan, part, index, conn, progress, stop, emit, max_attempts)
            for index, part in enumerate(plan.model.parts, start=1)
        ]
    except OSError as error:
        if error.errno not in _DISK_FULL:
            raise
        raise DiskFull(error.filename or plan.cache, progress.done) from None
    fetched = sum(part_fetched for _, part_fetched, _ in results)
    already_cached = all(was_cached for _, _, was_cached in results)
    first_path = results[0][0]
    finished = DownloadFinished(
        repo=plan.repo,
        filename=plan.model.name,
        path=first_path,
        size_bytes=plan.total_bytes,
        fetched_bytes=fetched,
        seconds=time.monotonic() - started,
        already_cached=already_cached,
    )
    emit(finished)
    return finished


def _download_part(
    plan: DownloadPlan,
    part: RemoteFile,
    index: int,
    conn: HubConnection,
    progress: _Progress,
    stop: threading.Event,
    emit: EventSink,
    max_attempts: int,
) -> tuple[Path, int, bool]:
    """One file into the cache: (pointer path, bytes transferred by this run, was already cached)."""
    source = f"the hub at {conn.endpoint}"

    def head() -> FileMetadata:
        return file_metadata(conn, plan.repo, part.path, plan.commit, need_etag=True)

    meta = head()
    size = _expected_size(part, meta, conn)
    if part.sha256 and len(meta.blob or "") == 64 and meta.blob != part.sha256:
        raise refused(f"the ETag of {part.path}", meta.blob, f"differs from the sha256 {part.sha256[:12]}… its listing gives", server=conn.endpoint)
    commit = plan.commit
    paths = cached_file_paths(plan.repo, commit, part.path, meta.blob, cache=plan.cache, source=source)  # type: ignore[arg-type]
    if paths.blob.is_file() and paths.blob.stat().st_size == size:
        link_pointer(paths)
        write_ref(paths.storage, plan.revision, commit)
        progress.add_done(size, force=True)
        return paths.pointer, 0, True
    paths.blob.parent.mkdir(parents=True, exist_ok=True)
    paths.lock.parent.mkdir(parents=True, exist_ok=True)
    # Checked again now the folders exist: nothing planted meanwhile may lead the writes out of the cache.
    paths = cached_file_paths(plan.repo, commit, part.path, meta.blob, cache=plan.cache, source=source)  # type: ignore[arg-type]
    lock = filelock.FileLock(str(paths.lock))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        raise HubError(f"another download of {part.path} is running", where=plan.repo, fix="Wait for it to finish, or stop it and try again") from None
    try:
        fetched, digest = _fetch_with_resume(plan, part, index, size, meta.location, head, paths, conn, progress, stop, emit, max_attempts)
        _verify_and_store(plan, part, size, digest, paths, emit)
    finally:
        lock.release()
    link_pointer(paths)
    write_ref(paths.storage, plan.revision, commit)
    return paths.pointer, fetched, False


def _fetch_with_resume(
    plan: DownloadPlan,
    part: RemoteFile,
    index: int,
    size: int,
    location: str,
    head: Callable[[], object],
    paths: CachedFilePaths,
    conn: HubConnection,
    progress: _Progress,
    stop: threading.Event,
    emit: EventSink,
    max_attempts: int,
) -> tuple[int, str]:
    """Bring `blobs/<etag>.incomplete` to `size` bytes: (bytes transferred, sha256 hex)."""
    partial = paths.incomplete
    if partial.exists() and partial.stat().st_size > size:
        partial.unlink()  # longer than the file: not ours to continue
    _open_partial(partial, "ab").close()  # exists from here on, even for a file of 0 bytes
    hashed = _HashedFile(partial)
    hashed.catch_up(stop, part.path, size)
    offset = hashed.n_bytes
    emit(DownloadStarted(plan.repo, part.path, size, offset, index, len(plan.model.parts)))
    progress.add_done(offset, force=True)
    fetched = 0
    attempt = 1
    while offset < size:
        try:
            fetched += _fetch_range(location, offset, size, hashed, conn, progress, stop, part.path)
            offset = hashed.n_bytes
            if offset < size:
                raise httpx2.RemoteProtocolError(f"the server closed the transfer at byte {offset} of {size}")
        except (DownloadCancelled, ServerSentTooMuch):
            raise
        except (httpx2.TransportError, HubError) as error:
            hashed.catch_up(stop, part.path, size)  # normally nothing to do: every byte hashed was written
            offset = hashed.n_bytes
            retryable = isinstance(error, (httpx2.TransportError, HubServerFailed))
            if stop.is_set():
                raise DownloadCancelled(part.path, progress.done, progress.total) from None
            if not retryable or attempt >= max_attempts:
                raise _stopped(plan, part, offset, size, error, conn) from None
            emit(DownloadRetried(plan.repo, part.path, attempt, max_attempts, _reason(error), offset))
            if stop.wait(_RETRY_PAUSE_S[min(attempt - 1, len(_RETRY_PAUSE_S) - 1)]):
                raise DownloadCancelled(part.path, progress.done, progress.total) from None
            attempt += 1
            location = _refreshed(location, head)
    return fetched, hashed.hexdigest()


class _HashedFile:
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


class ServerSentTooMuch(HubError):
    """The server sent more bytes than the hub announced for the file: a server error, never written past the size."""


def _fetch_range(
    location: str,
    offset: int,
    size: int,
    hashed: _HashedFile,
    conn: HubConnection,
    progress: _Progress,
    stop: threading.Event,
    filename: str,
) -> int:
    """One GET from `offset` to the end, appended to the partial file, never past `size`: bytes received.

    A server that ignores Range answers 200 with the whole file: the partial starts again
    from byte 0. A body longer than the announced size (or one that never ends) is cut at
    the size and reported as the server's error; a full disk becomes DiskFull, the partial kept.
    """
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
            with _open_partial(hashed.path, mode) as out:
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
            if error.errno in _DISK_FULL:
                raise DiskFull(hashed.path, hashed.n_bytes) from None
            raise
    return received


def _open_partial(path: Path, mode: str):
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


def _verify_and_store(plan: DownloadPlan, part: RemoteFile, size: int, digest: str, paths: CachedFilePaths, emit: EventSink) -> None:
    """Move the partial into blobs/ only when its size and sha256 are right; delete it when they are not."""
    actual_size = paths.incomplete.stat().st_size
    if actual_size != size:
        paths.incomplete.unlink()
        raise HubError(f"downloaded {actual_size} bytes but the hub says {size}; the bad file was deleted", where=f"{plan.repo}/{part.path}", fix="Run the download again")
    if part.sha256:
        if digest != part.sha256.lower():
            paths.incomplete.unlink()
            raise HubError(
                f"sha256 mismatch: got {digest[:12]}…, the hub's LFS hash is {part.sha256[:12]}…; the corrupt file was deleted",
                where=f"{plan.repo}/{part.path}",
                fix="Run the download again; if it repeats, the mirror at HF_ENDPOINT serves a different file",
            )
        checked = "LFS sha256"
    else:
        checked = "size only (the hub publishes no sha256 for this file)"
    os.replace(paths.incomplete, paths.blob)
    os.chmod(paths.blob, 0o644)
    emit(DownloadVerified(plan.repo, part.path, digest, checked))


class _Progress:
    """Bytes done over all parts, a rate over the last few seconds, throttled events."""

    def __init__(self, repo: str, filename: str, total: int, emit: EventSink) -> None:
        self.repo, self.filename, self.total, self._emit = repo, filename, total, emit
        self.done = 0
        self._samples: deque[tuple[float, int]] = deque()
        self._last_emit = 0.0
        self._transferred = 0

    def add_done(self, n_bytes: int, *, force: bool = False) -> None:
        self.done += n_bytes
        now = time.monotonic()
        if not force:
            self._transferred += n_bytes
            self._samples.append((now, self._transferred))
            while self._samples and now - self._samples[0][0] > RATE_WINDOW_S:
                self._samples.popleft()
        if force or now - self._last_emit >= PROGRESS_INTERVAL_S or self.done >= self.total:
            self._last_emit = now
            rate = self._rate(now)
            eta = max(self.total - self.done, 0) / rate if rate else None
            self._emit(DownloadProgressed(self.repo, self.filename, self.done, self.total, rate, eta))

    def _rate(self, now: float) -> float | None:
        if len(self._samples) < 2:
            return None
        (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
        span = max(now - t0, t1 - t0)
        return (b1 - b0) / span if span >= 0.2 else None


def _refreshed(location: str, head: Callable[[], object]) -> str:
    """Ask the hub again where the bytes are: a CDN's signed URL expires during a long download."""
    try:
        return getattr(head(), "location", None) or location
    except Exception:  # noqa: BLE001 - the next attempt reports the real failure
        return location


def _stopped(plan: DownloadPlan, part: RemoteFile, offset: int, size: int, error: BaseException, conn: HubConnection) -> HubError:
    share = f"{offset / size:.0%}" if size else "0%"
    kept = "the partial file is kept: run the same download again to resume" if offset else "run it again when the link is back"
    return HubError(
        f"download stopped at {share} ({offset / 1e6:.1f} of {size / 1e6:.1f} MB): {_reason(error)}",
        where=f"{plan.repo}/{part.path}",
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


def _expected_size(part: RemoteFile, meta: FileMetadata, conn: HubConnection) -> int:
    """The bytes the file has: the listing's size, which the file's own metadata must not contradict."""
    if part.size_bytes is not None and meta.size is not None and part.size_bytes != meta.size:
        raise HubAnswerRefused(
            f"the hub at {conn.endpoint} lists {part.path} with {part.size_bytes:,} bytes but announces {meta.size:,} for the download",
            fix=TRUSTED_FIX,
        )
    size = part.size_bytes if part.size_bytes is not None else meta.size
    if size is None:
        raise HubAnswerRefused(f"the hub at {conn.endpoint} gives no size for {part.path}", fix=TRUSTED_FIX)
    return size


def _free_bytes(root: Path) -> int:
    for candidate in (root, *root.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return 0


def _gb(n_bytes: int) -> str:
    return f"{n_bytes / 1e9:.2f} GB" if n_bytes >= 1e8 else f"{n_bytes / 1e6:.1f} MB"

