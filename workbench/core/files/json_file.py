"""Write a JSON file whole or not at all: into a temporary file beside it, then replaced in one step."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json_replacing(path: Path, data: Any, *, indent: int = 2) -> None:
    """`data` as JSON at `path`, never half-written (OSError when the folder cannot be written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data, indent=indent), encoding="utf-8")
    temporary.replace(path)
