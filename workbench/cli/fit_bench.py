"""`workbench fit --bench FILE`: the user's own perplexity rows for this model, as the search's quality figures."""

from __future__ import annotations

from pathlib import Path

from workbench.core.bench.report import read_results
from workbench.core.fit.quality import PUBLISHED_PPL, MeasuredQuality
from workbench.core.gguf.model_info import ModelInfo


def _weight_type(weights: str, model: ModelInfo) -> str:
    return (model.file_type or "unknown").upper() if weights == "keep" else weights.upper()


def measured_quality(path: str, model: ModelInfo) -> tuple[MeasuredQuality, ...]:
    """The rows of a `workbench bench --output json|jsonl` file measured on this model's file, as perplexity
    increases over full precision: each row's Δppl is against its sweep's reference row, so the reference's
    own published loss (llama.cpp's table) is added; a row whose reference the table cannot place is left out."""
    results = read_results(path)
    name = Path(model.source).name
    rows = [row for row in results.rows if row.model == name]
    by_preset = {row.preset: row for row in rows}
    measured = []
    for row in rows:
        reference = by_preset.get(row.reference)
        if row.ppl_delta is None or reference is None:
            continue
        reference_type = _weight_type(reference.weights, model)
        base = PUBLISHED_PPL.get(reference_type)
        if base is None or reference.type_k.lower() != "f16":
            continue
        measured.append(MeasuredQuality(
            _weight_type(row.weights, model), row.type_k, base + row.ppl_delta,
            f"your bench {Path(path).name}: preset {row.preset} {row.ppl_delta:+.4f} ppl against "
            f"{row.reference} ({reference_type}, +{base:.4f} by llama.cpp's table)"))
    return tuple(measured)
