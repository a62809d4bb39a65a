"""Disk use per model, and deleting one: the HF cache through huggingface_hub's own cache API, local files by hand.

The HF cache is read with `scan_cache_dir` and a repository or revision is deleted with its
`delete_revisions` strategy, which keeps every blob another revision still links. The
strategy is checked before it runs: a blob it would remove must lie in the deleted
repository's own `blobs/` folder, so a snapshot link planted (or made by a deduplicating
tool) to lead into another repository or out of the cache never takes that file with it.
Local files are deleted only inside the workbench's own model folder (`paths.quantized_dir`):
regular `.gguf` files, never a link, never a folder.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import WorkbenchError
from workbench.core.files.safe_paths import UnsafePathError, path_inside
from workbench.core.hub.cache_layout import hub_cache_dir, repo_folder_name
from workbench.core.hub.names import user_repo_id
from workbench.core.paths import quantized_dir

MAX_LOCAL_FILES = 10_000  # .gguf files looked at per folder
MAX_SCAN_PROBLEMS = 20


@dataclass(frozen=True)
class CachedRepoUse:
    """One repository in the HF cache: the bytes of its blobs (each once), from huggingface_hub's scan."""

    repo: str
    path: Path
    size_bytes: int  # blobs inside the cache, each counted once
    blobs: int
    revisions: tuple[str, ...]  # commit hashes, newest first
    refs: tuple[str, ...]  # branch names pointing at them
    gguf_files: tuple[str, ...]  # names in the snapshots


@dataclass(frozen=True)
class LocalFileUse:
    path: Path
    size_bytes: int
    deletable: bool  # inside the workbench's own model folder


@dataclass(frozen=True)
class DiskUse:
    cache: Path
    repos: tuple[CachedRepoUse, ...]
    local: tuple[LocalFileUse, ...]
    problems: tuple[str, ...] = ()  # what the scan could not read, one line each

    @property
    def cache_bytes(self) -> int:
        return sum(repo.size_bytes for repo in self.repos)


@dataclass(frozen=True)
class Deleted:
    """What a delete removed: measured as the disk use before minus after."""

    what: str  # repository, revision or file
    freed_bytes: int
    kept: tuple[Path, ...] = ()  # blobs the strategy named that belong to another repository (left alone)


def disk_use(local_dirs: tuple[str | os.PathLike[str], ...] = (), *, cache: Path | None = None) -> DiskUse:
    """Model repositories in the HF cache, then .gguf files in the workbench's folder and each of `local_dirs`."""
    root = cache or hub_cache_dir()
    repos, problems = _scan(root)
    own = quantized_dir()
    local: list[LocalFileUse] = []
    seen: set[Path] = set()
    for folder in (own, *map(Path, local_dirs)):
        for path in _gguf_files(folder, problems):
            key = path.resolve()
            if key not in seen:
                seen.add(key)
                local.append(LocalFileUse(path, path.lstat().st_size, _deletable(path, own)))
    return DiskUse(root, tuple(repos), tuple(local), tuple(problems[:MAX_SCAN_PROBLEMS]))


def delete_cached_model(repo: str, *, revision: str = "", cache: Path | None = None) -> Deleted:
    """Delete a repository (or one revision of it) from the HF cache with huggingface_hub's delete strategy."""
    repo = user_repo_id(repo)
    root = cache or hub_cache_dir()
    try:
        storage = path_inside(root, repo_folder_name(repo))
    except UnsafePathError as error:
        raise WorkbenchError(error.what, where=str(root), fix="Nothing was deleted; remove the link by hand") from None
    info, _ = _cache_info(root)
    cached = next((r for r in info.repos if r.repo_type == "model" and r.repo_id == repo), None) if info else None
    if cached is None or Path(cached.repo_path) != storage:
        raise WorkbenchError(f"{repo} is not in the HF cache", where=str(root), fix="See what is there with `workbench models --disk`")
    commits = sorted(r.commit_hash for r in cached.revisions)
    if revision:
        wanted = [c for c in commits if c == revision or c.startswith(revision) and len(revision) >= 7]
        if len(wanted) != 1:
            raise WorkbenchError(f"{repo} has no single cached revision {revision!r}", where=str(root),
                                 fix=f"Give one of: {', '.join(c[:12] for c in commits)}")
        commits = wanted
    before = _repo_bytes(root, repo)
    strategy = info.delete_revisions(*commits)
    kept = tuple(sorted(Path(p) for p in strategy.blobs if not _own(Path(p), storage)))
    strategy = dataclasses.replace(strategy, blobs=frozenset(p for p in strategy.blobs if Path(p) not in kept))
    strategy.execute()
    after = _repo_bytes(root, repo)
    what = f"{repo}@{commits[0][:12]}" if revision else repo
    return Deleted(what, max(0, before - after), kept)


def delete_local_model(path: str | os.PathLike[str]) -> Deleted:
    """Delete a .gguf file inside the workbench's own model folder; anything else is refused, nothing removed."""
    own = quantized_dir()
    candidate = Path(path)
    fix = f"Only .gguf files the workbench made, in {own}, are deleted here; remove other files yourself"
    if not _deletable(candidate, own):
        raise WorkbenchError("is not a model file in the workbench's own folder", where=str(candidate), fix=fix)
    size = candidate.lstat().st_size
    candidate.unlink()
    return Deleted(str(candidate), size)


def _deletable(path: Path, own: Path) -> bool:
    """A regular .gguf file (no link) directly or below `own`, every part of the way a plain name."""
    try:
        relative = path.absolute().relative_to(own.absolute()).as_posix()
        path_inside(own, relative)
    except (ValueError, UnsafePathError):
        return False
    return path.name.lower().endswith(".gguf") and not path.is_symlink() and path.is_file()


def _gguf_files(folder: Path, problems: list[str]) -> list[Path]:
    if not folder.is_dir():
        return []
    found = []
    for dirpath, _dirs, names in os.walk(folder):  # os.walk never follows links to folders
        for name in sorted(names):
            path = Path(dirpath) / name
            if name.lower().endswith(".gguf") and path.is_file() and not path.is_symlink():
                found.append(path)
                if len(found) >= MAX_LOCAL_FILES:
                    problems.append(f"{folder}: more than {MAX_LOCAL_FILES:,} .gguf files; the rest is not counted")
                    return found
    return sorted(found)


def _cache_info(root: Path):
    """huggingface_hub's scan of the cache (None when there is none) and its warnings as lines."""
    from huggingface_hub import CacheNotFound, scan_cache_dir  # deferred: huggingface_hub, only when the cache is read

    if not root.is_dir():
        return None, []
    try:
        info = scan_cache_dir(root)
    except (CacheNotFound, OSError) as error:
        return None, [f"{root}: cannot scan the HF cache ({error})"]
    return info, [f"{root}: {str(warning)[:200]}" for warning in info.warnings]


def _scan(root: Path) -> tuple[list[CachedRepoUse], list[str]]:
    info, problems = _cache_info(root)
    if info is None:
        return [], problems
    repos = []
    for cached in sorted(info.repos, key=lambda r: r.repo_id):
        if cached.repo_type != "model":
            continue
        storage = Path(cached.repo_path)
        revisions = sorted(cached.revisions, key=lambda r: r.last_modified, reverse=True)
        blobs = _blob_sizes(cached, storage)
        names = sorted({f.file_name for r in revisions for f in r.files if f.file_name.lower().endswith(".gguf")})
        refs = sorted(ref for r in revisions for ref in r.refs)
        repos.append(CachedRepoUse(cached.repo_id, storage, sum(blobs.values()), len(blobs),
                                   tuple(r.commit_hash for r in revisions), tuple(refs), tuple(names)))
    return repos, problems


def _blob_sizes(cached, storage: Path) -> dict[Path, int]:
    """Each blob the repository's snapshots link, once, when it lies in this repository's folder."""
    return {Path(f.blob_path): f.size_on_disk for r in cached.revisions for f in r.files if _own(Path(f.blob_path), storage)}


def _repo_bytes(root: Path, repo: str) -> int:
    repos, _ = _scan(root)
    return next((r.size_bytes for r in repos if r.repo == repo), 0)


def _own(path: Path, storage: Path) -> bool:
    """A blob of this repository: an entry of its own `blobs/` folder (itself no link leading out), or a
    file copied into one of its snapshots. Unlinking such an entry never touches another repository's file
    (a `blobs/` entry that links into huggingface_hub's shared store is swept by its own manifest)."""
    if path.parent == storage / "blobs":
        return _inside(storage / "blobs", storage) and not path.is_dir()
    return path.is_file() and not path.is_symlink() and _inside(path, storage / "snapshots")


def _inside(path: Path, folder: Path) -> bool:
    try:
        path_inside(folder, path.relative_to(folder).as_posix())
    except (ValueError, UnsafePathError):
        return False
    return True
