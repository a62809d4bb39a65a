"""`bench --kld`: each preset's next-token distributions against the model's full-precision (F16) version.

The reference is the model itself when it is F16/BF16/F32, else `quantize --to F16` of it
(the best source available here: its quality is bounded by the file's own quantization,
which the report says). The reference's log-probabilities over the evaluation text are
written once to a temporary file; each preset then runs the same windows in its own engine.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from workbench.core.bench.sweep import load_engine
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.engine.kld_math import KldMeasured, KldReference
from workbench.core.engine.quantize import FULL_PRECISION, quantize
from workbench.core.errors import WorkbenchError
from workbench.core.gguf.reader import read_gguf

DEFAULT_KLD_TOKENS = 1024  # scored positions: the reference file holds n_vocab 16-bit codes for each (~100 MB here)
OUTLIER_FACTOR = 4.0  # KLD this many times what its bits per weight predict is "quantization gone wrong"
GONE_WRONG = "quantization gone wrong"


@dataclass(frozen=True)
class KldRow:
    preset: str
    weights: str  # the preset's weight type
    model: str
    bits_per_weight: float  # llama.cpp's model size × 8 / parameters of what was loaded
    kld_mean: float
    kld_p99: float
    kld_max: float
    top1_agree: float
    ppl: float
    ppl_base: float
    delta_ppl: float
    n_tokens: int
    n_ctx: int
    reference: str  # the reference file's name and type
    flag: str = ""  # GONE_WRONG with the reason, or ""


@dataclass(frozen=True)
class KldConfig:
    model_path: Path
    presets: tuple[Preset, ...]
    device: DeviceProfile
    eval_text: str
    n_ctx: int = 512
    max_tokens: int = DEFAULT_KLD_TOKENS


@dataclass(frozen=True)
class KldStep:
    what: str  # "reference: quantizing to F16", "quality-q8: measuring", ...


@dataclass(frozen=True)
class KldFinished:
    rows: tuple[KldRow, ...]
    failures: tuple[tuple[str, str], ...]  # (preset, message)
    reference_note: str


def reference_source(model_path: Path, on_progress: Callable[[float], None] | None = None) -> tuple[Path, str]:
    """(full-precision file, note): the model itself when it is full precision, else its F16 copy (cached)."""

    file_type = read_gguf(model_path).file_type
    if file_type in FULL_PRECISION:
        return model_path, f"reference: {model_path.name} itself ({file_type})"
    f16 = quantize(model_path, "F16", on_progress=on_progress)
    return f16, (f"reference: F16 made from {model_path.name} ({file_type}); the source is already quantized, "
                 f"so this measures what each preset loses beyond {file_type}")


def reference_preset(preset: Preset, n_ctx: int) -> Preset:
    """The reference runs the full-precision file as it is, with an f16 KV cache and room for the window."""
    return dataclasses.replace(preset, name=f"reference ({preset.name})", weights="keep", cache_type_k="f16",
                               cache_type_v="f16", ctx_size=max(preset.ctx_size, n_ctx), draft_prompt_lookup=0)


def run_kld(config: KldConfig) -> Iterator[KldStep | KldFinished]:
    """Reference first, then each preset; yields progress and, last, the rows with outliers flagged."""
    if not config.presets:
        raise WorkbenchError("no presets to compare", where="bench --kld", fix="pass --presets a,b,c")
    if config.max_tokens < 1 or config.n_ctx < 2:
        raise WorkbenchError("--kld-tokens and --ppl-ctx must be positive", where="bench --kld",
                             fix="e.g. --kld-tokens 1024 --ppl-ctx 512")
    yield KldStep("reference: full-precision copy")
    ref_path, note = reference_source(config.model_path)
    rows: list[KldRow] = []
    failures: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="workbench-kld-") as folder:
        saved = str(Path(folder) / "reference.npz")
        yield KldStep("reference: scoring the evaluation text")
        client = load_engine(ref_path, reference_preset(config.presets[0], config.n_ctx), config.device)
        try:
            reference: KldReference = client.run_op("kld_reference", text=config.eval_text, path=saved,
                                                    n_ctx=config.n_ctx, max_tokens=config.max_tokens)
        finally:
            client.close()
        for preset in config.presets:
            yield KldStep(f"{preset.name}: measuring")
            try:
                client = load_engine(config.model_path, preset, config.device)
                try:
                    measured: KldMeasured = client.run_op("kld", text=config.eval_text, reference_path=saved)
                    facts = client.run_op("system_info")
                finally:
                    client.close()
            except WorkbenchError as error:
                failures.append((preset.name, str(error)))
                continue
            rows.append(KldRow(
                preset=preset.name,
                weights=preset.weights,
                model=config.model_path.name,
                bits_per_weight=facts.model_size_bytes * 8 / facts.model_n_params,
                kld_mean=measured.kld_mean,
                kld_p99=measured.kld_p99,
                kld_max=measured.kld_max,
                top1_agree=measured.top1_agree,
                ppl=measured.ppl,
                ppl_base=measured.ppl_base,
                delta_ppl=measured.delta_ppl,
                n_tokens=measured.n_tokens,
                n_ctx=measured.n_ctx,
                reference=f"{ref_path.name} (ppl {reference.ppl:.3f})",
            ))
    yield KldFinished(flag_outliers(tuple(rows)), tuple(failures), note)


def flag_outliers(rows: tuple[KldRow, ...]) -> tuple[KldRow, ...]:
    """Flag a row whose KLD is out of line with its bits per weight.

    Two tests, each needing no model-specific threshold: (1) a preset with clearly fewer bits
    per weight diverges less than half as much (more bits should never cost quality);
    (2) with three or more other rows, log KLD is fitted linearly in bits per weight over the
    others (quantization error falls roughly exponentially with bits) and this row's KLD is
    more than OUTLIER_FACTOR times the fit's prediction.
    """
    flagged = []
    for row in rows:
        reasons = []
        for other in rows:
            if other is not row and other.bits_per_weight < row.bits_per_weight - 0.25 and other.kld_mean * 2 < row.kld_mean:
                reasons.append(f"{other.preset} with {other.bits_per_weight:.2f} bits per weight diverges "
                               f"{row.kld_mean / max(other.kld_mean, 1e-12):.1f}x less")
                break
        others = [o for o in rows if o is not row and o.kld_mean > 0]
        predicted = _log_linear_prediction(others, row.bits_per_weight) if len(others) >= 3 else None
        if predicted is not None and row.kld_mean > OUTLIER_FACTOR * predicted:
            reasons.append(f"KLD {row.kld_mean:.4f} is {row.kld_mean / predicted:.1f}x what "
                           f"{row.bits_per_weight:.2f} bits per weight predict from the other presets")
        flagged.append(dataclasses.replace(row, flag=f"{GONE_WRONG}: {'; '.join(reasons)}" if reasons else ""))
    return tuple(flagged)


def _log_linear_prediction(rows: list[KldRow], bits: float) -> float | None:
    xs = [r.bits_per_weight for r in rows]
    ys = [math.log(r.kld_mean) for r in rows]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread
    return math.exp(mean_y + slope * (bits - mean_x))


KLD_FIELDS = tuple(f.name for f in dataclasses.fields(KldRow))


def kld_markdown(rows: tuple[KldRow, ...], note: str) -> str:
    lines = ["| preset | weights | bits/weight | KLD mean | KLD p99 | top-1 agree | ppl | Δppl | tokens | flag |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.preset} | {r.weights} | {r.bits_per_weight:.2f} | {r.kld_mean:.5f} | {r.kld_p99:.5f} | "
                     f"{r.top1_agree * 100:.1f}% | {r.ppl:.3f} | {r.delta_ppl:+.3f} | {r.n_tokens} | {r.flag or '-'} |")
    return "\n".join([*lines, note]) + "\n"
