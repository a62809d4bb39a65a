"""A report written from bench results: the model, the charts and the HTML, one call for the CLI and the app."""

from __future__ import annotations

from pathlib import Path

import workbench
from workbench.core.bench.report import BenchResults
from workbench.core.bench.report_charts import report_charts
from workbench.core.bench.report_html import render_html
from workbench.core.bench.report_model import build_report
from workbench.core.config.presets import list_presets, preset_to_toml
from workbench.core.errors import WorkbenchError


def library_toml() -> dict[str, str]:
    """The preset library's TOML per name: the appendix's source for rows written before the bench kept it."""
    return {preset.name: preset_to_toml(preset) for preset in list_presets()}


def export_report(files: list[tuple[str, BenchResults]], out: Path) -> Path:
    """Writes the HTML report of `files` ((name, results) per bench file) to `out`."""
    report = build_report(files, workbench.__version__, library_toml())
    page = render_html(report, report_charts(report))
    try:
        out.write_text(page, encoding="utf-8")
    except OSError as error:
        raise WorkbenchError(f"cannot write the report: {error.strerror}", where=str(out),
                             fix="choose a writable --out path") from error
    return out
