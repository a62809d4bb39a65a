"""What the client checks before asking llama.cpp to load: the file, the preset, the ledger."""

from __future__ import annotations

import os
from dataclasses import dataclass

from workbench.core.config.device_accelerator import offload_problems
from workbench.core.config.devices import load_device
from workbench.core.config.host import profile_is_this_machine
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.config.presets import preset_problems
from workbench.core.engine.load_refused import LOAD_ANYWAY, LoadRefused
from workbench.core.engine.load_split import plan_split
from workbench.core.engine.quantize import weights_type_name
from workbench.core.errors import GGUFError
from workbench.core.gguf.reader import read_gguf
from workbench.core.ledger.buffer_check import predicted_buffers
from workbench.core.ledger.predict import predict_ledger
from workbench.core.ledger.types import DOES_NOT_FIT, Ledger
from workbench.core.ledger.verdict_text import overrun_text
from workbench.core.units import MIB


@dataclass(frozen=True)
class LoadPlan:
    quantize_to: str | None  # weight type the preset asks for when the file holds another
    prediction: str  # one line, kept by the client for a crash report
    warnings: tuple[str, ...]
    rpc: tuple[str, ...] = ()  # the RPC nodes the engine registers ("host:port", device order)
    memory_budget_bytes: int | None = None  # the ledger's total; None for a split over RPC nodes
    predicted_buffers: tuple[tuple[str, int], ...] = ()  # buffer_check's figures; () for a split over RPC nodes


def describe_ledger(ledger: Ledger) -> str:
    """The ledger's prediction in one line, line by line in MiB."""
    return (
        f"ledger for {ledger.device}: weights {ledger.weights_bytes / MIB:.0f} + KV {ledger.kv_bytes / MIB:.0f} "
        f"+ compute {ledger.compute_bytes / MIB:.0f} + overhead {ledger.overhead_bytes / MIB:.0f} "
        f"= {ledger.total_bytes / MIB:.0f} MiB of a {ledger.budget_bytes / MIB:.0f} MiB budget ({ledger.verdict})"
    )


def plan_load(
    model_path: str | os.PathLike[str], preset: Preset, device: DeviceProfile | None, *, allow_overbudget: bool,
    rpc: tuple = (),
) -> LoadPlan:
    """Read the GGUF header, check the preset against the model and the ledger against the device."""

    try:
        model = read_gguf(model_path)
    except GGUFError as error:
        raise LoadRefused("load", str(error)) from None
    except OSError as error:
        raise LoadRefused("load", f"{model_path}: cannot read the model file: {error.strerror or error}") from None
    problems = preset_problems(preset, model)
    errors = [f"{problem.message} ({problem.fix})" for problem in problems if problem.level == "error"]
    if errors:
        raise LoadRefused("refused", f"preset {preset.name} cannot run {model.name or model_path}: " + "; ".join(errors))
    warnings = tuple(f"{problem.message} ({problem.fix})" for problem in problems if problem.level == "warning")
    quantize_to = None
    if preset.weights != "keep":
        target = weights_type_name(preset.weights)
        if target != model.file_type:
            quantize_to = target
    if device is None:
        device = load_device("host")
    warnings += tuple(f"{message} ({fix})" for _, message, fix in offload_problems(preset, device))
    if preset.rpc or rpc:
        prediction, addresses = plan_split(model, preset, device, rpc, allow_overbudget=allow_overbudget)
        return LoadPlan(quantize_to, prediction, warnings, addresses)
    ledger = predict_ledger(model, preset, device)
    prediction = describe_ledger(ledger)
    if ledger.verdict == DOES_NOT_FIT and not allow_overbudget:
        raise LoadRefused(
            "refused",
            f"preset {preset.name} does not fit {device.name}: {overrun_text(ledger)}. "
            f"Pick a smaller preset or a shorter context, or {LOAD_ANYWAY}",
        )
    # llama.cpp repacks weights for the CPU it runs on: a board simulated here is checked against this machine's copy
    here = ledger if profile_is_this_machine(device.name) else predict_ledger(model, preset, load_device("host"))
    return LoadPlan(quantize_to, prediction, warnings, memory_budget_bytes=ledger.total_bytes,
                    predicted_buffers=predicted_buffers(here))
