"""The app's themes, read from `themes/*.toml`, and the colour variables the panels use."""

from __future__ import annotations

import tomllib
from pathlib import Path

from textual.theme import Theme

from workbench.core.errors import WorkbenchError
from workbench.core.paths import data_dir

DEFAULT_THEME = "workbench-dark"

# Colours the panels draw with, beyond Textual's own. Every theme may override them; these
# fallbacks keep a theme that names none of them usable (CSS fails to parse on a missing one).
APP_COLOUR_DEFAULTS: dict[str, str] = {
    "ledger-weights": "#4aa3ff",
    "ledger-kv": "#bc8cff",
    "ledger-compute": "#ffb454",
    "ledger-overhead": "#8b949e",
    "ledger-headroom": "#238636",
    "ledger-over": "#f85149",
    "kv-system": "#e3b341",
    "kv-history": "#4aa3ff",
    "kv-reused": "#3fb950",
    "kv-current": "#ff7b72",
    "kv-free": "#30363d",
    "chart-decode": "#4aa3ff",
    "chart-bound": "#f85149",
}

_THEME_FIELDS = (
    "primary", "secondary", "warning", "error", "success", "accent",
    "foreground", "background", "surface", "panel", "boost",
)


def theme_from_toml(path: Path) -> Theme:
    """One theme file: Textual's colour fields at the top level, app colours under [variables]."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise WorkbenchError(f"cannot read theme: {error}", where=str(path), fix="fix the TOML syntax") from None
    unknown = set(data) - {"name", "dark", "luminosity_spread", "variables", *_THEME_FIELDS}
    if unknown:
        raise WorkbenchError(
            f"unknown theme key {sorted(unknown)[0]!r}", where=str(path),
            fix=f"use only name, dark, variables and {', '.join(_THEME_FIELDS)}",
        )
    if "name" not in data or "primary" not in data:
        raise WorkbenchError("a theme needs 'name' and 'primary'", where=str(path), fix="add both keys")
    variables = {str(key): str(value) for key, value in data.get("variables", {}).items()}
    unknown_variables = set(variables) - set(APP_COLOUR_DEFAULTS)
    if unknown_variables:
        raise WorkbenchError(
            f"unknown theme variable {sorted(unknown_variables)[0]!r}", where=str(path),
            fix=f"use only {', '.join(APP_COLOUR_DEFAULTS)}",
        )
    return Theme(
        name=str(data["name"]),
        dark=bool(data.get("dark", True)),
        luminosity_spread=float(data.get("luminosity_spread", 0.15)),
        variables=variables,
        **{key: str(data[key]) for key in _THEME_FIELDS if key in data},
    )


def load_themes(folder: Path | None = None) -> tuple[Theme, ...]:
    """Every theme shipped in `themes/` (or `folder`), sorted by name."""
    folder = folder if folder is not None else data_dir("themes")
    return tuple(theme_from_toml(path) for path in sorted(folder.glob("*.toml")))
