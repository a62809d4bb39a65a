"""The layers hold: no import cycle, lower core packages never import higher ones, imports at the top of
a module unless deferring one avoids a real start-up cost, and no product file over 400 lines."""

from __future__ import annotations

from pathlib import Path

import workbench
from import_graph import cycles, imports_of, module_files

PACKAGE = Path(workbench.__file__).parent
MODULES = module_files(PACKAGE)
IMPORTS = [edge for module, path in MODULES.items() for edge in imports_of(module, path, MODULES, "workbench")]

LOOSE = {"errors", "paths", "units"}  # workbench.core's own modules, below every package
BELOW = {  # core package → the core packages it may import, as DESIGN.md orders them
    "files": set(),
    "gguf": {"files"},
    "config": {"files", "gguf"},
    "ledger": {"files", "gguf", "config"},
    "hub": {"files", "gguf", "config", "ledger"},
    "rpc": {"files", "gguf", "config", "ledger"},
    "telemetry": {"files", "gguf", "config", "ledger"},
    "fit": {"files", "gguf", "config", "ledger", "hub", "rpc", "telemetry"},
    "engine": {"files", "gguf", "config", "ledger", "hub", "rpc", "telemetry", "fit"},
    "serve": {"files", "gguf", "config", "ledger", "hub", "rpc", "telemetry", "fit", "engine"},
    "tasks": {"files", "gguf", "config", "ledger", "hub", "rpc", "telemetry", "fit", "engine"},
    "bench": {"files", "gguf", "config", "ledger", "hub", "rpc", "telemetry", "fit", "engine", "serve", "tasks"},
}
# Outside packages whose import costs start-up time; only these (or workbench modules that import them)
# may be imported inside a function, with a `# deferred:` comment saying which.
COSTLY = {"llama_cpp", "numpy", "gguf", "huggingface_hub", "textual", "textual_plotext", "textual_serve", "plotext",
          "rich", "starlette", "uvicorn", "httpx", "jinja2", "prometheus_client", "openai", "matplotlib"}
MAX_LINES = 400


def _core_part(module: str) -> str | None:
    """The core package a module belongs to ('ledger'), the loose module's own name, or None outside core."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["workbench", "core"] else None


def _layer_breaks(imports) -> list[str]:
    breaks = []
    for edge in imports:
        if not edge.target.startswith("workbench"):
            continue
        here, there = _core_part(edge.importer), _core_part(edge.target)
        where = f"{edge.importer}:{edge.line} imports {edge.target}"
        if here is not None and there is None and edge.target.startswith(("workbench.ui", "workbench.cli")):
            breaks.append(f"{where} (core imports the UI or the CLI)")
        elif edge.importer.startswith("workbench.ui") and edge.target.startswith("workbench.cli"):
            breaks.append(f"{where} (the UI imports the CLI)")
        elif here in LOOSE and there is not None and there not in LOOSE:
            breaks.append(f"{where} (a loose core module imports a core package)")
        elif here in BELOW and there in BELOW and there != here and there not in BELOW[here]:
            breaks.append(f"{where} ({here} is below {there})")
    return breaks


def _top_level_closure_is_costly(module: str, seen: set[str] | None = None) -> bool:
    seen = set() if seen is None else seen
    if module in seen:
        return False
    seen.add(module)
    for edge in IMPORTS:
        if edge.importer != module or edge.local:
            continue
        if edge.target in COSTLY or (edge.target in MODULES and _top_level_closure_is_costly(edge.target, seen)):
            return True
    return False


def test_the_graph_is_read_from_every_module():
    assert "workbench.core.ledger.predict" in MODULES and "workbench.ui.app" in MODULES
    assert any(edge.importer == "workbench.core.ledger.predict" and edge.target == "workbench.core.gguf.model_info"
               for edge in IMPORTS)
    assert any(edge.local and edge.target == "llama_cpp" for edge in IMPORTS)


def test_the_cycle_finder_finds_a_planted_cycle():
    assert cycles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]) == [["a", "b", "c"]]
    assert cycles([("a", "b"), ("b", "c")]) == []


def test_no_import_cycle_between_modules():
    edges = [(edge.importer, edge.target) for edge in IMPORTS if edge.target in MODULES]
    assert cycles(edges) == []


def test_no_import_cycle_between_core_packages():
    edges = {(_core_part(edge.importer), _core_part(edge.target)) for edge in IMPORTS
             if _core_part(edge.importer) in BELOW and _core_part(edge.target) in BELOW}
    assert cycles(edges) == []


def test_the_layer_check_catches_a_lower_package_importing_a_higher_one():
    from import_graph import Import

    planted = [Import("workbench.core.gguf.reader", "workbench.core.ledger.predict", 1, True, "", False),
               Import("workbench.core.errors", "workbench.core.config.preset", 1, False, "", False),
               Import("workbench.core.engine.client", "workbench.ui.app", 1, False, "", False),
               Import("workbench.core.ledger.predict", "workbench.core.gguf.model_info", 1, False, "", False)]
    assert len(_layer_breaks(planted)) == 3


def test_no_lower_package_imports_a_higher_one():
    assert _layer_breaks(IMPORTS) == []


def test_core_has_only_a_handful_of_loose_modules():
    loose = {path.stem for path in (PACKAGE / "core").glob("*.py")} - {"__init__"}
    assert loose == LOOSE


def test_function_local_imports_only_defer_a_start_up_cost():
    unjustified = []
    for edge in IMPORTS:
        if not edge.local or edge.in_import_guard:
            continue
        costly = edge.target in COSTLY or (edge.target in MODULES and _top_level_closure_is_costly(edge.target))
        if not costly or "deferred:" not in edge.source:
            unjustified.append(f"{edge.importer}:{edge.line} {edge.source.strip()}")
    assert unjustified == []


def test_no_product_file_over_400_lines():
    long = {str(path.relative_to(PACKAGE)): n for path in MODULES.values()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}
