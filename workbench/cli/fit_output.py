"""`workbench fit`'s text and JSON: the preset, its llama-server line, the changes and the alternatives."""

from __future__ import annotations

import tomllib

from workbench.cli.split_output import devices_json, devices_text, split_json
from workbench.cli.text_table import wrap_text
from workbench.core.config.presets import llama_server_command, preset_to_toml
from workbench.core.fit.types import FitCandidate, FitRequest, FitResult


def preset_keys(candidate: FitCandidate) -> dict:
    """The preset as its TOML file holds it (the keys `workbench presets` reads back)."""
    return tomllib.loads(preset_to_toml(candidate.preset))


def _candidate_json(candidate: FitCandidate) -> dict:
    return {
        "file": candidate.option.filename or None,
        "weight_type": candidate.option.weight_type,
        "weights_source": candidate.option.source,
        "ctx_size": candidate.ctx,
        "quality_loss_ppl": round(candidate.quality_loss, 4),
        "quality_source": candidate.quality_source,
        "decode_tps": round(candidate.decode_tps, 2) if candidate.decode_tps else None,
        "decode_source": candidate.speed_source,
        "total_bytes": candidate.ledger.total_bytes,
    }


def fit_json(result: FitResult, ledger: dict | None, model_path: str) -> dict:
    """`fit --json`: fits, preset, ledger, changes, alternatives. The ledger object is `ledger --json`'s for
    the choice (its top-level lines the whole model on the host, as there), with `file` (what the
    llama-server line runs), `llama_server`, `fit` (the choice's figures) and, for a split, `devices` and
    `split` (the per-device ledger that decided it)."""
    chosen = result.chosen
    if chosen is not None and ledger is not None:
        ledger = ledger | {"file": model_path, "llama_server": llama_server_command(chosen.preset, model_path),
                           "devices": devices_json(chosen.split) if chosen.split else None,
                           "split": split_json(chosen.split, ()) if chosen.split else None,
                           "fit": _candidate_json(chosen)}
    return {
        "fits": result.fits,
        "preset": preset_keys(chosen) if chosen else None,
        "ledger": ledger,
        "changes": [{"key": c.key, "from": c.old, "to": c.new, "why": c.why} for c in result.changes],
        "alternatives": [_candidate_json(a.candidate) | {"preset": preset_keys(a.candidate), "trades": a.trades}
                         for a in result.alternatives],
    }


def fit_text(result: FitResult, model: str, device: str, model_path: str, base: str, request: FitRequest,
             width: int | None) -> str:
    out = []
    if result.chosen is None:
        out.append(wrap_text(f"{model} on {device}: NOTHING FITS — {result.reason}", width))
        return "\n".join(out) + "\n"
    chosen = result.chosen
    rate = f"{chosen.decode_tps:,.1f} tok/s ({chosen.speed_source})" if chosen.decode_tps else chosen.speed_source
    out.append(wrap_text(f"{model} on {device}: fits as preset {chosen.preset.name} — {chosen.option.weight_type} "
                         f"weights ({chosen.option.source}), {chosen.preset.cache_type_k} KV cache, ctx "
                         f"{chosen.ctx:,}; quality +{chosen.quality_loss:.4f} ppl ({chosen.quality_source}); "
                         f"decode {rate}", width))
    out.append("")
    out.append(preset_to_toml(chosen.preset).rstrip())
    out.append("")
    if chosen.preset.weights != "keep":
        out.append(wrap_text(f"first: workbench quantize {model_path} {chosen.preset.weights} (the line below runs "
                             "the re-quantized file)", width))
    out.append(llama_server_command(chosen.preset, model_path))
    out.append("")
    if result.changes:
        out.append(f"changed from preset {base}:")
        out += [wrap_text(f"  {c.key}: {c.old} -> {c.new} — {c.why}", width) for c in result.changes]
    else:
        out.append(f"no change from preset {base}")
    if result.alternatives:
        out.append("next best:")
        for index, alternative in enumerate(result.alternatives, 1):
            other = alternative.candidate
            name = other.option.filename or other.option.weight_type
            out.append(wrap_text(f"  {index}. {name}, {other.preset.cache_type_k} KV, ctx {other.ctx:,}: "
                                 f"{alternative.trades}", width))
    if request.min_tps is not None:
        out.append(f"--min-tps {request.min_tps:g}: met ({rate})")
    text = "\n".join(out) + "\n"
    if chosen.split is not None:
        text += devices_text(chosen.split, (), width)
    return text
