"""What the memory-ledger and temperature panels show, each as one frozen view the panel grid builds."""

from __future__ import annotations

from dataclasses import dataclass, replace

from workbench.core.engine.events import Loaded
from workbench.core.ledger.split_types import SplitLedger
from workbench.core.ledger.types import Ledger
from workbench.core.telemetry.sample import TelemetrySample
from workbench.core.units import mib_number, size


@dataclass(frozen=True)
class LedgerView:
    """The ledger described (the loaded choice's while a model is loaded, else the selection's), llama.cpp's
    report of the load, the latest telemetry sample the panel shows, and the per-device ledger."""

    ledger: Ledger | None = None
    loaded: Loaded | None = None
    sample: TelemetrySample | None = None
    split: SplitLedger | None = None  # when layers leave the CPU

    def with_sample(self, sample: TelemetrySample) -> LedgerView:
        """`sample` when it changes a figure the panel shows (as rounded on screen), else this view:
        a redraw costs, and most samples change nothing shown."""
        if self.sample is not None and shown_figures(sample) == shown_figures(self.sample):
            return self
        return replace(self, sample=sample)


def shown_figures(sample: TelemetrySample) -> tuple[str, ...]:
    return (mib_number(sample.engine_rss_bytes), size(sample.mem_available_bytes), size(sample.mem_total_bytes),
            size(sample.swap_used_bytes), size(sample.swap_total_bytes))


@dataclass(frozen=True)
class ThermalView:
    """The latest telemetry sample, the last turn's energy per token, and the device profile's battery."""

    sample: TelemetrySample | None = None
    joules_per_token: float | None = None
    energy_note: str = ""  # why there is no energy per token, when the counter exists
    last_turn_tokens: int = 0
    battery_wh: float | None = None  # the device profile's, when it gives one

    def after_turn(self, start: TelemetrySample | None, end: TelemetrySample | None, generated: int) -> ThermalView:
        """Energy per token of the last turn: the energy counter's difference across the turn."""
        if start is None or end is None or start.energy_j is None or end.energy_j is None:
            joules, note = None, ""
        elif end.timestamp <= start.timestamp or generated <= 0:
            joules, note = None, "last turn shorter than one telemetry interval"
        else:
            joules, note = (end.energy_j - start.energy_j) / generated, ""
        return replace(self, joules_per_token=joules, energy_note=note, last_turn_tokens=generated)
