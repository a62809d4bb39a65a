"""Models on this machine: the bundled demo model, GGUF files in the HF cache, and local folders."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import WorkbenchError
from workbench.core.files.safe_paths import UnsafePathError, path_inside
from workbench.core.hub.cache_layout import INCOMPLETE_SUFFIX, hub_cache_dir, repo_from_folder
from workbench.core.hub.files import quant_from_name, split_part
from workbench.core.paths import bundled_model_path

BUNDLED, CACHED, LOCAL = "bundled", "cached", "local"


@dataclass(frozen=True)
class ModelEntry:
    """One usable GGUF model: a complete file (every part of a split one), never a partial download."""

    kind: str  # BUNDLED, CACHED or LOCAL
    name: str  # file name (first part of a split file)
    path: Path  # what to load
    size_bytes: int  # all parts
    repo: str = ""  # hub repository for cached models
    revision: str = ""  # commit for cached models
    quant: str | None = None  # from the file name
    parts: int = 1


@dataclass(frozen=True)
class PartialDownload:
    """A resumable download in the HF cache: shown so the user knows, never offered as a model."""

    repo: str
    blob: str
    path: Path
    size_bytes: int


def list_models(local_dirs: tuple[str | os.PathLike[str], ...] = (), *, cache: Path | None = None) -> tuple[ModelEntry, ...]:
    """Bundled first, then the HF cache by repository, then each local folder (searched recursively)."""
    entries: list[ModelEntry] = []
    bundled = bundled_model_path()
    if bundled is not None:
        entries.append(ModelEntry(BUNDLED, bundled.name, bundled, bundled.stat().st_size, quant=quant_from_name(bundled.name)))
    entries.extend(cached_models(cache))
    for folder in local_dirs:
        entries.extend(local_models(Path(folder)))
    return tuple(_once_per_file(entries))


def _once_per_file(entries: list[ModelEntry]) -> list[ModelEntry]:
    """Each file once, under its first kind: a --dir holding the HF cache or the bundled model's
    folder reaches the same files (snapshot links resolve to the cache's blobs)."""
    seen: set[Path] = set()
    kept = []
    for entry in entries:
        try:
            key = entry.path.resolve()
        except OSError:
            key = entry.path
        if key not in seen:
            seen.add(key)
            kept.append(entry)
    return kept


def cached_models(cache: Path | None = None) -> tuple[ModelEntry, ...]:
    """GGUF files reachable through snapshots/ (only verified, complete blobs are linked there)."""
    root = cache or hub_cache_dir()
    if not root.is_dir():
        return ()
    entries = []
    for storage in sorted(root.iterdir()):
        repo = repo_from_folder(storage.name)
        snapshots = storage / "snapshots"
        if repo is None or not snapshots.is_dir():
            continue
        for snapshot in sorted(snapshots.iterdir(), key=_mtime, reverse=True):
            files = sorted(p for p in snapshot.rglob("*") if p.name.lower().endswith(".gguf") and _inside(root, p))
            for entry in _group(files, CACHED, repo=repo, revision=snapshot.name, base=snapshot):
                entries.append(entry)
    return tuple(_newest_per_file(entries))


def local_models(folder: Path) -> tuple[ModelEntry, ...]:
    if not folder.is_dir():
        raise WorkbenchError("is not a folder", where=str(folder), fix="Give --dir a folder that holds .gguf files")
    files = sorted(p for p in folder.rglob("*") if p.name.lower().endswith(".gguf") and p.is_file())
    return tuple(_group(files, LOCAL, base=folder))


def partial_downloads(cache: Path | None = None) -> tuple[PartialDownload, ...]:
    """`blobs/*.incomplete` files: downloads that stopped and will resume."""
    root = cache or hub_cache_dir()
    if not root.is_dir():
        return ()
    found = []
    for blob in sorted(root.glob(f"models--*/blobs/*{INCOMPLETE_SUFFIX}")):
        repo = repo_from_folder(blob.parent.parent.name) or ""
        found.append(PartialDownload(repo, blob.name[: -len(INCOMPLETE_SUFFIX)], blob, blob.stat().st_size))
    return tuple(found)


def _group(files: list[Path], kind: str, *, base: Path, repo: str = "", revision: str = "") -> list[ModelEntry]:
    """Files to entries; a split file becomes one entry when all its parts are present (else it is not usable)."""
    entries = []
    splits: dict[tuple[Path, str, int], dict[int, Path]] = {}
    for path in files:
        if not path.exists():  # a dangling snapshot link: its blob was removed
            continue
        split = split_part(path.name)
        if split is None:
            entries.append(ModelEntry(kind, str(path.relative_to(base)), path, path.stat().st_size, repo, revision, quant_from_name(path.name)))
        else:
            stem, index, count = split
            splits.setdefault((path.parent, stem, count), {})[index] = path
    for (_, stem, count), parts in splits.items():
        if sorted(parts) != list(range(1, count + 1)):
            continue
        first = parts[1]
        size = sum(parts[i].stat().st_size for i in parts)
        entries.append(ModelEntry(kind, str(first.relative_to(base)), first, size, repo, revision, quant_from_name(stem + ".gguf"), count))
    return entries


def _newest_per_file(entries: list[ModelEntry]) -> list[ModelEntry]:
    """One entry per (repo, file): the newest snapshot's (listed first)."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for entry in entries:
        key = (entry.repo, entry.name)
        if key not in seen:
            seen.add(key)
            kept.append(entry)
    return kept


def _inside(root: Path, path: Path) -> bool:
    """A snapshot entry that resolves into the cache (its blob); a link planted to lead elsewhere is no cached model."""
    try:
        path_inside(root, path.relative_to(root).as_posix())
    except (UnsafePathError, ValueError):
        return False
    return True


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
