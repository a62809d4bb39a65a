"""Download a GGUF model into the Hugging Face cache: progress, cancel, resume across runs, sha256 check.

huggingface_hub's own `hf_hub_download` (2.x) writes to a per-process temporary file and
deletes it on failure, so a killed download starts from zero next time, and it never checks
the sha256. This writer keeps `blobs/<etag>.incomplete` across runs, continues it with an
HTTP Range request, hashes while it writes, and only moves a verified file into
`blobs/<etag>` with the `snapshots/<commit>/<file>` symlink and `refs/<revision>` that
huggingface_hub and llama.cpp expect. A partial or corrupt file is never in `snapshots/`.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import filelock

from workbench.core.errors import HubError
from workbench.core.hub.cache_layout import (
    CachedFilePaths,
    cached_file_paths,
    hub_cache_dir,
    link_pointer,
    write_ref,
)
from workbench.core.hub.client import HubConnection, hub_connection
from workbench.core.hub.download_events import (
    DiskFull,
    DownloadFinished,
    DownloadVerified,
    EventSink,
)
from workbench.core.hub.download_progress import DownloadProgress
from workbench.core.hub.files import (
    GGUFFile,
    RemoteFile,
    list_gguf_files,
    missing_parts,
)
from workbench.core.hub.metadata import FileMetadata, file_metadata
from workbench.core.hub.names import TRUSTED_FIX, HubAnswerRefused, refused
from workbench.core.hub.partial_file import DISK_FULL_ERRNOS
from workbench.core.hub.resumable_fetch import PartFetch, fetch_with_resume
from workbench.core.units import MIB

DISK_MARGIN_BYTES = 64 * MIB  # leave the filesystem some room after the model
MAX_ATTEMPTS = 4  # one try and three resumes within a run; beyond that the user decides


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
    progress = DownloadProgress(plan.repo, plan.model.name, plan.total_bytes, emit)
    try:
        results = [
            _download_part(plan, part, index, conn, progress, stop, emit, max_attempts)
            for index, part in enumerate(plan.model.parts, start=1)
        ]
    except OSError as error:
        if error.errno not in DISK_FULL_ERRNOS:
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
    progress: DownloadProgress,
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
        fetch = PartFetch(repo=plan.repo, filename=part.path, part=index, parts=len(plan.model.parts), size=size,
                          location=meta.location, head=head, paths=paths, max_attempts=max_attempts)
        fetched, digest = fetch_with_resume(fetch, conn, progress, stop, emit)
        _verify_and_store(plan, part, size, digest, paths, emit)
    finally:
        lock.release()
    link_pointer(paths)
    write_ref(paths.storage, plan.revision, commit)
    return paths.pointer, fetched, False


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
