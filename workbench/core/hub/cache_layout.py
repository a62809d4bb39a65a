"""The Hugging Face cache layout: models--owner--name/{blobs,snapshots,refs}, read from the environment at call time."""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from workbench.core.files.safe_paths import path_inside

INCOMPLETE_SUFFIX = ".incomplete"


def hub_cache_dir() -> Path:
    """HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub (huggingface_hub's own rule).

    huggingface_hub.constants.HF_HUB_CACHE is frozen at import; this follows the environment now.
    """
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(os.path.expandvars(explicit)).expanduser()
    home = os.environ.get("HF_HOME")
    if not home:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        home = os.path.join(xdg, "huggingface")
    return Path(os.path.expandvars(home)).expanduser() / "hub"


def repo_folder_name(repo: str) -> str:
    return "models--" + repo.replace("/", "--")


def repo_from_folder(folder: str) -> str | None:
    if not folder.startswith("models--"):
        return None
    return folder[len("models--") :].replace("--", "/", 1)


@dataclass(frozen=True)
class CachedFilePaths:
    """Where one file of one commit lives in the cache; each path proven to stay inside `root`."""

    root: Path  # the hub cache folder
    storage: Path  # .../models--owner--name
    blob: Path  # blobs/<etag>: the bytes (the etag of an LFS file is its sha256)
    incomplete: Path  # blobs/<etag>.incomplete: the partial download, kept across runs so the next one resumes
    pointer: Path  # snapshots/<commit>/<path>: a relative symlink to the blob
    lock: Path  # .locks/models--owner--name/<etag>.lock, the lock huggingface_hub itself takes


def cached_file_paths(repo: str, commit: str, path: str, etag: str, *, cache: Path | None = None, source: str = "") -> CachedFilePaths:
    """The cache paths of one file; UnsafePathError when a name (from `source`) would lead out of the cache.

    The names are checked for their hub forms where they enter (workbench.core.hub.names);
    this is the second wall: no name and no symlink planted in the cache can place a
    path we write, replace or delete outside it.
    """
    root = cache or hub_cache_dir()
    folder = repo_folder_name(repo)
    return CachedFilePaths(
        root=root,
        storage=path_inside(root, folder, source=source),
        blob=path_inside(root, folder, "blobs", etag, source=source),
        incomplete=path_inside(root, folder, "blobs", etag + INCOMPLETE_SUFFIX, source=source),
        pointer=path_inside(root, folder, "snapshots", commit, path, source=source),
        lock=path_inside(root, ".locks", folder, f"{etag}.lock", source=source),
    )


def link_pointer(paths: CachedFilePaths) -> None:
    """Point snapshots/<commit>/<path> at the blob with a relative symlink (a copy where symlinks fail)."""
    paths.pointer.parent.mkdir(parents=True, exist_ok=True)
    # Checked again now the folders exist: what was checked before may have been replaced since.
    path_inside(paths.root, paths.pointer.relative_to(paths.root).as_posix())
    path_inside(paths.root, paths.blob.relative_to(paths.root).as_posix())
    if paths.pointer.is_symlink() or paths.pointer.exists():
        paths.pointer.unlink()
    relative = os.path.relpath(paths.blob, paths.pointer.parent)
    try:
        os.symlink(relative, paths.pointer)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise

        shutil.copyfile(paths.blob, paths.pointer)


def write_ref(storage: Path, revision: str, commit: str) -> None:
    """refs/<revision> names the commit, so other tools resolve `main` offline as we do."""
    if not commit or revision == commit:
        return
    ref = path_inside(storage, "refs", revision)
    ref.parent.mkdir(parents=True, exist_ok=True)
    path_inside(storage, "refs", revision)
    if not ref.exists() or ref.read_text().strip() != commit:
        ref.write_text(commit)
