"""Soak: sustained generation, decode tok/s and temperature per interval, flagging throttling or a drop."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from workbench.core.engine.measured import SpeedMeasured
from workbench.core.errors import WorkbenchError
from workbench.core.telemetry.sample import TelemetrySample

DROP_FLAG_PCT = 10.0  # a sustained rate this much below the cold one is worth a warning
MIN_INTERVAL_S = 5.0
TARGET_INTERVALS = 20
SAMPLE_PERIOD_S = 0.5  # the telemetry samplers' 2 Hz ceiling
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class SoakInterval:
    index: int
    elapsed_s: float  # since the soak started, at the end of the interval
    decode_tps: float
    prefill_tps: float
    temp_c: float | None  # hottest sensor seen during the interval
    throttled: bool | None  # None: no throttle source on this machine
    power_w: float | None


@dataclass(frozen=True)
class SoakResult:
    preset: str
    duration_s: float
    intervals: tuple[SoakInterval, ...]
    cold_tps: float  # mean decode rate of the first quarter of the intervals
    sustained_tps: float  # ... and of the last quarter
    drop_pct: float
    throttled: bool | None
    peak_temp_c: float | None
    flagged: bool
    verdict: str
    unavailable: tuple[tuple[str, str], ...] = ()  # ("temp_c", "no thermal sensors exposed"), ...


def parse_duration(text: str) -> float:
    """'10m', '30s', '1h', '1m30s' or plain seconds -> seconds."""
    spec = text.strip().lower()
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([smh]?)", spec)
    if not spec or not parts or re.sub(r"(\d+(?:\.\d+)?)\s*([smh]?)", "", spec).strip():
        raise WorkbenchError(f"cannot read the duration {text!r}", where="--soak", fix="write it like 30s, 10m or 1h")
    seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if seconds <= 0:
        raise WorkbenchError("the soak duration must be positive", where="--soak", fix="write it like 30s, 10m or 1h")
    return seconds


def hottest_c(sample: TelemetrySample | None) -> float | None:
    if sample is None or not sample.temperatures:
        return None
    return max(t.celsius for t in sample.temperatures)


def is_throttled(sample: TelemetrySample | None) -> bool | None:
    if sample is None or sample.throttle is None:
        return None
    return sample.throttle.active


def soak_interval_s(duration_s: float) -> float:
    """About twenty intervals per soak, none shorter than 5 s (or the whole soak, if shorter)."""
    return min(duration_s, max(MIN_INTERVAL_S, duration_s / TARGET_INTERVALS))


def soak(
    preset: str,
    run_bench: Callable[[int, int], SpeedMeasured],
    sample: Callable[[], TelemetrySample | None],
    duration_s: float,
    *,
    n_prompt: int = 32,
    n_gen: int = 128,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[SoakInterval | SoakResult]:
    """Generate back to back for `duration_s`; yield each interval, then the result.

    Within an interval, bench runs (a short prompt and n_gen decodes, timed by llama.cpp)
    follow each other with no pause, so the device stays busy; the interval's rate is its
    generated tokens over its decode time. Telemetry is read between runs, at most at 2 Hz.
    """
    interval_s = soak_interval_s(duration_s)
    started = clock()
    intervals: list[SoakInterval] = []
    last_sample: TelemetrySample | None = None
    last_sample_at = float("-inf")
    while not intervals or clock() - started < duration_s:
        interval_end = min(started + duration_s, clock() + interval_s)
        runs: list[SpeedMeasured] = []
        temps: list[float] = []
        throttles: list[bool] = []
        powers: list[float] = []
        while not runs or clock() < interval_end:
            runs.append(run_bench(n_prompt, n_gen))
            if clock() - last_sample_at >= SAMPLE_PERIOD_S:
                last_sample, last_sample_at = sample(), clock()
                if (temp := hottest_c(last_sample)) is not None:
                    temps.append(temp)
                if (throttled := is_throttled(last_sample)) is not None:
                    throttles.append(throttled)
                if last_sample is not None and last_sample.total_power_w is not None:
                    powers.append(last_sample.total_power_w)
        interval = SoakInterval(
            index=len(intervals),
            elapsed_s=clock() - started,
            decode_tps=sum(r.n_gen for r in runs) / sum(r.decode_seconds for r in runs),
            prefill_tps=sum(r.n_prompt for r in runs) / sum(r.prefill_seconds for r in runs),
            temp_c=max(temps) if temps else None,
            throttled=any(throttles) if throttles else None,
            power_w=statistics.fmean(powers) if powers else None,
        )
        intervals.append(interval)
        yield interval
    yield summarise_soak(preset, intervals, clock() - started, last_sample)


def summarise_soak(
    preset: str, intervals: list[SoakInterval], duration_s: float, last_sample: TelemetrySample | None = None
) -> SoakResult:
    quarter = max(1, len(intervals) // 4)
    cold = statistics.fmean(i.decode_tps for i in intervals[:quarter])
    sustained = statistics.fmean(i.decode_tps for i in intervals[-quarter:])
    drop = (cold - sustained) / cold * 100 if cold > 0 else 0.0
    throttle_seen = [i.throttled for i in intervals if i.throttled is not None]
    throttled = any(throttle_seen) if throttle_seen else None
    temps = [i.temp_c for i in intervals if i.temp_c is not None]
    reasons = []
    if throttled:
        reasons.append("the device reported throttling")
    if drop > DROP_FLAG_PCT:
        reasons.append(f"decode fell {drop:.0f}% from {cold:.1f} to {sustained:.1f} tok/s")
    if reasons:
        verdict = "; ".join(reasons) + ": quote the sustained rate, not the cold one"
    else:
        verdict = f"steady: {sustained:.1f} tok/s sustained ({-drop:+.0f}% against the start)"
    if throttled is None:
        verdict += " (no throttle source on this machine)"
    return SoakResult(
        preset=preset,
        duration_s=duration_s,
        intervals=tuple(intervals),
        cold_tps=cold,
        sustained_tps=sustained,
        drop_pct=drop,
        throttled=throttled,
        peak_temp_c=max(temps) if temps else None,
        flagged=bool(reasons),
        verdict=verdict,
        unavailable=_unavailable_reasons(intervals, last_sample),
    )


def _unavailable_reasons(intervals: list[SoakInterval], sample: TelemetrySample | None) -> tuple[tuple[str, str], ...]:
    told = {item.what: item.why for item in sample.unavailable} if sample is not None else {}
    checks = (("temp_c", "temperature", "no temperature sensor exposed"),
              ("throttled", "throttle", "no throttle source on this machine"),
              ("power_w", "power", "no power source on this machine"))
    notes = []
    for name, what, default in checks:
        if all(getattr(i, name) is None for i in intervals):
            notes.append((name, told.get(what) or told.get("energy" if what == "power" else what) or default))
    return tuple(notes)
