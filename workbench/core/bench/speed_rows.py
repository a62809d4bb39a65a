"""A bench row's predicted speed beside the measured one, and the device's bench history it feeds."""

from __future__ import annotations

import dataclasses

from workbench.core.bench.rows import BenchRow
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.speed import speed_model
from workbench.core.ledger.speed_history import record_run, speed_correction


def with_speed_prediction(row: BenchRow, model: ModelInfo, preset: Preset, device: DeviceProfile, *,
                          remember: bool = True) -> BenchRow:
    """The row with the speed model's decode and prefill for its own test (pp n_prompt, then tg n_gen at
    the row's threads) and measured/predicted; with `remember`, the ratio against the uncorrected model
    joins the device's bench history, so later predictions for it are corrected (and say so)."""
    notes = dict(row.unavailable)
    correction = speed_correction(device.name)
    corrected, basis = speed_model(model, preset, device, threads=row.n_threads, correction=correction)
    plain, _ = speed_model(model, preset, device, threads=row.n_threads)
    position = row.n_prompt + row.n_gen / 2  # the cache grows during the timed decodes
    decode, prefill = corrected.decode_tps(position), corrected.prefill_tps(row.n_prompt)
    for name, value in (("predicted_decode_tps", decode), ("predicted_prefill_tps", prefill)):
        if value is None:
            notes[name] = notes[name.replace("predicted_", "").replace("_tps", "_vs_predicted")] = (
                f"the speed model has no figure for it: {basis}")
    plain_decode, plain_prefill = plain.decode_tps(position), plain.prefill_tps(row.n_prompt)
    if remember:
        record_run(device.name, row.decode_tps / plain_decode if plain_decode and row.decode_tps > 0 else None,
                   row.prefill_tps / plain_prefill if plain_prefill and row.prefill_tps > 0 else None)
    return dataclasses.replace(
        row,
        predicted_decode_tps=decode,
        predicted_prefill_tps=prefill,
        decode_vs_predicted=row.decode_tps / decode if decode else None,
        prefill_vs_predicted=row.prefill_tps / prefill if prefill else None,
        speed_basis=basis,
        unavailable=tuple(notes.items()),
    )
