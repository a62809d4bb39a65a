"""The app's Fit action: the fit search (core/fit, as `workbench fit`) in a thread worker, and how it is told."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from textual.message import Message

from workbench.core.fit.devices import fit_devices
from workbench.core.fit.options import local_options
from workbench.core.fit.search import fit
from workbench.core.fit.types import FitRequest, FitResult
from workbench.core.ledger.speed_history import speed_correction
from workbench.ui.loaded_choice import Choice
from workbench.ui.messages import FitFailed, FitSearched
from workbench.ui.selection import Selection

FIT_PRESET = "fit"  # the name the chosen preset gets (saved from the presets screen under any name)


def fit_choice(selection: Selection, choice: Choice, post: Callable[[Message], None]) -> None:
    """Search from the chosen preset for the chosen model on the chosen device (and the --rpc nodes); post it."""
    try:
        model, preset, device = selection.resolve(choice)
        base = dataclasses.replace(preset, gpu_layers=None, rpc=(), tensor_split=(), source="")
        request = FitRequest(base=base, devices=fit_devices(device, selection.rpc), name=FIT_PRESET)
        result = fit(local_options(model), device, request, speed_correction(device.name))
    except Exception as error:  # a model or profile that cannot be read: said in a notice, the app goes on
        post(FitFailed(str(error) or type(error).__name__))
        return
    post(FitSearched(result, choice))


def fit_label(result: FitResult) -> str:
    """The choice at a glance (the notice's title; the preset select says "fit (unsaved)")."""
    chosen = result.chosen
    assert chosen is not None
    return f"{chosen.option.weight_type} weights, {chosen.preset.cache_type_k} KV cache, ctx {chosen.ctx:,}"


def fit_notice(result: FitResult) -> str:
    """What the search changed and why, one line a change, and the next best with what it trades."""
    lines = [f"{c.key}: {c.old} -> {c.new} — {c.why}" for c in result.changes] or ["no change from the preset"]
    lines += [f"or: {a.trades}" for a in result.alternatives[:2]]
    return "\n".join(lines)
