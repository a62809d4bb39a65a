"""What the engine runs versus what the selectors show: the panels follow the first, the verdict line both."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.core.ledger.types import Ledger


@dataclass(frozen=True)
class Choice:
    """A model, preset and device as the selectors name them."""

    model_path: str
    preset_name: str
    device_name: str


@dataclass
class LoadedChoice:
    """The choice in the engine (with the ledger predicted for it) and the one a load is bringing in."""

    loaded: Choice | None = None
    loaded_ledger: Ledger | None = None
    _loading: Choice | None = None
    _loading_ledger: Ledger | None = None
    _last_prediction: tuple[Choice, Ledger] | None = None

    def load_started(self, choice: Choice) -> None:
        self._loading = choice
        last = self._last_prediction
        self._loading_ledger = last[1] if last is not None and last[0] == choice else None

    def load_finished(self) -> None:
        self.loaded, self.loaded_ledger = self._loading, self._loading_ledger
        self._loading = self._loading_ledger = None

    def unloaded(self) -> None:
        self.loaded = self.loaded_ledger = self._loading = self._loading_ledger = None

    def predicted(self, choice: Choice, ledger: Ledger) -> None:
        """A prediction arrived: it is the loaded choice's when the choices match (e.g. after a re-predict)."""
        self._last_prediction = (choice, ledger)
        if choice == self.loaded:
            self.loaded_ledger = ledger
        if choice == self._loading:
            self._loading_ledger = ledger

    def differs(self, choice: Choice) -> bool:
        """Whether a model is loaded and the selectors name something else: Ctrl+L then reloads."""
        return self.loaded is not None and choice != self.loaded

    def panel_ledger(self, selected: Ledger | None) -> Ledger | None:
        """The ledger the panels describe: the loaded one while a model is loaded, else the selection's."""
        return self.loaded_ledger if self.loaded is not None else selected
