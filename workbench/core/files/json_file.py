"""Write a file whole or not at all: into a temporary file beside it, then replaced in one step."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_text_replacing(path: Path, text: str) -> None:
    """`text` at `path`, never half-written (OSError when the folder cannot be written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def write_json_replacing(path: Path, data: Any, *, indent: int = 2) -> None:
    """`data` as JSON at `path`, never half-written (OSError when the folder cannot be written)."""
    write_text_replacing(path, json.dumps(data, indent=indent))
