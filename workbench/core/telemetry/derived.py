"""Figures over one chat turn from timestamped samples: power, energy, J/token, heat, throttling."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.core.telemetry.sample import TelemetrySample


@dataclass(frozen=True)
class TurnFigures:
    """None means the figure has no source (or the samples do not cover the turn), never zero."""

    duration_s: float
    mean_power_w: float | None
    energy_j: float | None
    energy_source: str  # "counter: intel-rapl:0", "integrated: VDD_IN (...)", "" when None
    joules_per_token: float | None
    temperature_rise_c: float | None
    temperature_sensor: str  # the sensor hottest at the end of the turn
    throttled: bool | None
    throttle_cause: str


def turn_figures(
    samples: Sequence[TelemetrySample], start: float, end: float, generated_tokens: int
) -> TurnFigures:
    """`start`/`end` are time.monotonic() values like the samples' timestamps.

    The samples must bracket the turn (one at or before `start`, one at or after `end`);
    until the sample after the turn arrives, the energy figures are None.
    """
    ordered = sorted(samples, key=lambda sample: sample.timestamp)
    energy, source = _counter_energy(ordered, start, end)
    if energy is None:
        energy, source = _integrated_energy(ordered, start, end)
    duration = end - start
    mean_power = energy / duration if energy is not None and duration > 0 else None
    per_token = energy / generated_tokens if energy is not None and generated_tokens > 0 else None
    rise, sensor = _temperature_rise(ordered, start, end)
    throttled, cause = _throttling(ordered, start, end)
    return TurnFigures(
        duration_s=duration,
        mean_power_w=mean_power,
        energy_j=energy,
        energy_source=source if energy is not None else "",
        joules_per_token=per_token,
        temperature_rise_c=rise,
        temperature_sensor=sensor,
        throttled=throttled,
        throttle_cause=cause,
    )


def _interpolate(points: list[tuple[float, float]], at: float) -> float | None:
    """Linear interpolation of (time, value) points at `at`; None outside their span."""
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t0 <= at <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (at - t0) / (t1 - t0)
    if points and points[0][0] == at:
        return points[0][1]
    return None


def _counter_energy(samples: list[TelemetrySample], start: float, end: float) -> tuple[float | None, str]:
    """A measured cumulative counter (RAPL): the difference at the turn's edges."""
    counted = [s for s in samples if s.energy_j is not None and s.energy_source.startswith("counter")]
    points = [(s.timestamp, s.energy_j) for s in counted]
    before, after = _interpolate(points, start), _interpolate(points, end)  # type: ignore[arg-type]
    if before is None or after is None:
        return None, ""
    return after - before, counted[-1].energy_source


def _integrated_energy(samples: list[TelemetrySample], start: float, end: float) -> tuple[float | None, str]:
    """Power at the samples, taken as linear between them, integrated exactly over [start, end]."""
    powered = [s for s in samples if s.total_power_w is not None]
    points = [(s.timestamp, s.total_power_w) for s in powered]
    at_start, at_end = _interpolate(points, start), _interpolate(points, end)  # type: ignore[arg-type]
    if at_start is None or at_end is None:
        return None, ""
    inside = [(t, p) for t, p in points if start < t < end]
    edges = [(start, at_start), *inside, (end, at_end)]
    joules = sum((p0 + p1) / 2 * (t1 - t0) for (t0, p0), (t1, p1) in zip(edges, edges[1:]))
    return joules, f"integrated: {powered[-1].total_power_source}"


def _bracket(samples: list[TelemetrySample], start: float, end: float) -> list[TelemetrySample]:
    """The last sample at or before start, those inside, and the first at or after end."""
    before = [s for s in samples if s.timestamp <= start]
    inside = [s for s in samples if start < s.timestamp < end]
    after = [s for s in samples if s.timestamp >= end]
    return before[-1:] + inside + after[:1]


def _temperature_rise(samples: list[TelemetrySample], start: float, end: float) -> tuple[float | None, str]:
    span = _bracket(samples, start, end)
    if len(span) < 2 or span[0].timestamp > start or span[-1].timestamp < end:
        return None, ""
    first = {t.name: t.celsius for t in span[0].temperatures}
    last = {t.name: t.celsius for t in span[-1].temperatures}
    common = [name for name in last if name in first]
    if not common:
        return None, ""
    hottest = max(common, key=lambda name: last[name])
    return last[hottest] - first[hottest], hottest


def _throttling(samples: list[TelemetrySample], start: float, end: float) -> tuple[bool | None, str]:
    states = [s.throttle for s in _bracket(samples, start, end) if s.throttle is not None]
    if not states:
        return None, ""
    causes: list[str] = []
    for state in states:
        for cause in state.cause.split("; ") if state.active else ():
            if cause and cause not in causes:
                causes.append(cause)
    return bool(causes), "; ".join(causes)
