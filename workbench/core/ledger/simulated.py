"""A board simulated on this machine: a device profile that is not the machine the engine runs on. Its memory
verdict is the board's (its budget), but every rate measured here is this machine's; the board's own rate is the
speed model's prediction, shown beside the measured one, and a measured rate above it is said to be this machine's."""

from __future__ import annotations

import platform
from dataclasses import dataclass

from workbench.core.config.host import profile_is_this_machine
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.ledger.speed import SpeedModel, speed_model
from workbench.core.ledger.speed_history import speed_correction


@dataclass(frozen=True)
class BoardSimulation:
    board: str  # the device profile's name
    host: str  # the machine the engine runs on
    speed: SpeedModel
    basis: str  # what the board's predicted rates rest on

    def decode_tps(self, position: float = 0) -> float | None:
        return self.speed.decode_tps(position)

    def notice(self) -> str:
        """One paragraph for the load: what is the board's and what is this machine's."""
        decode = self.decode_tps(0)
        predicted = (f"the board's predicted decode is {decode:.1f} tok/s at empty context ({self.speed.method})"
                     if decode else f"the speed model has no decode figure for {self.board} ({self.basis})")
        return (f"{self.board} is a board simulated on {self.host}: the memory verdict is the board's, "
                f"but the measured speed is {self.host}'s; {predicted}.")

    def beside(self, measured_tps: float | None, position: float) -> str:
        """The board's predicted decode beside a rate measured here, saying which is which."""
        predicted = self.decode_tps(position)
        if predicted is None:
            return f"{self.board}: no predicted rate (the speed model has no figure); measured on {self.host}"
        text = f"{predicted:.2f} tok/s predicted on {self.board}"
        if measured_tps is not None and measured_tps > predicted:
            text += (f"; the {measured_tps:.2f} tok/s measured is {self.host}'s, {measured_tps / predicted:.1f}x "
                     "the board's")
        return text


def board_simulation(model: ModelInfo, preset: Preset, device: DeviceProfile | None,
                     hostname: str | None = None) -> BoardSimulation | None:
    """The simulation when `device` is not this machine (None or the host's own profile: nothing simulated)."""
    if device is None or profile_is_this_machine(device.name, hostname):
        return None
    speed, basis = speed_model(model, preset, device, correction=speed_correction(device.name))  # as the ledger's
    return BoardSimulation(device.name, hostname or platform.node() or "this machine", speed, basis)
