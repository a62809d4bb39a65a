"""What the user has chosen (model, preset, device) and the options offered for each."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench.core.config.devices import list_devices, load_device
from workbench.core.config.preset import DeviceProfile, Preset
from workbench.core.config.presets import list_presets, load_preset
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.gguf.reader import read_gguf
from workbench.ui.loaded_choice import Choice

DEFAULT_PRESET = "as-is"  # the file's own weights: nothing to re-quantize before the first load
DEFAULT_DEVICE = "host"


@dataclass
class Selection:
    """The chosen model path, preset spec and device spec; resolves them with caching."""

    model_path: Path
    preset_name: str = DEFAULT_PRESET
    device_name: str = DEFAULT_DEVICE
    models: dict[str, str] = field(default_factory=dict)  # path -> label, in the order offered
    # presets used from the editor without saving: label ("as-is (edited)") -> preset, never written
    unsaved_presets: dict[str, Preset] = field(default_factory=dict)
    rpc: tuple = ()  # --rpc nodes (RpcEndpoint): they replace every preset's rpc list
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _model_cache: dict[tuple[str, float], ModelInfo] = field(default_factory=dict, repr=False)
    _device_cache: dict[str, DeviceProfile] = field(default_factory=dict, repr=False)
    _preset_names: tuple[str, ...] | None = field(default=None, repr=False)
    _device_names: tuple[str, ...] | None = field(default=None, repr=False)

    def add_model(self, path: Path, label: str | None = None) -> None:
        self.models.setdefault(str(path), label or path.name)

    def model_info(self, path: Path | None = None) -> ModelInfo:
        """The GGUF header of `path` (default: the chosen model), read once per file version."""
        path = path or self.model_path
        key = (str(path), path.stat().st_mtime)
        with self._lock:
            if key not in self._model_cache:
                self._model_cache[key] = read_gguf(path)
            return self._model_cache[key]

    def preset(self, name: str | None = None) -> Preset:
        """The preset `name` names (default: the chosen one): an unsaved edit, a shipped or user preset, a file."""
        name = name or self.preset_name
        preset = self.unsaved_presets.get(name) or preset_from(name)
        return replace(preset, rpc=tuple(node.address for node in self.rpc)) if self.rpc else preset

    def use_unsaved(self, preset: Preset, label: str | None = None) -> str:
        """Offer an edited preset for this session only (nothing is written) as `label`; return the label."""
        label = label or unsaved_label(preset)
        self.unsaved_presets[label] = replace(preset, name=label)
        return label

    def device(self, name: str | None = None) -> DeviceProfile:
        name = name or self.device_name
        with self._lock:
            if name not in self._device_cache:  # host detection reads /proc and /sys
                self._device_cache[name] = device_from(name)
            return self._device_cache[name]

    def resolve(self, choice: Choice | None = None) -> tuple[ModelInfo, Preset, DeviceProfile]:
        """The model, preset and device `choice` names (default: the current one); safe from a worker thread."""
        choice = choice or self.choice()
        return self.model_info(Path(choice.model_path)), self.preset(choice.preset_name), self.device(choice.device_name)

    def choice(self) -> Choice:
        return Choice(str(self.model_path), self.preset_name, self.device_name)

    def preset_names(self, *, refresh: bool = False) -> tuple[str, ...]:
        if self._preset_names is None or refresh:
            self._preset_names = tuple(preset.name for preset in list_presets())
        return self._preset_names

    def device_names(self, *, refresh: bool = False) -> tuple[str, ...]:
        """The device profiles (shipped and the user's); `refresh` reads the folders again (a profile added)."""
        if self._device_names is None or refresh:
            self._device_names = tuple(device.name for device in list_devices(include_host=False))
        return self._device_names


def unsaved_label(preset: Preset, saved_names: tuple[str, ...] | set[str] = ()) -> str:
    """How the preset selector names an edit used without saving: "as-is (edited)", "mine (unsaved)"."""
    return f"{preset.name} ({'edited' if preset.name in saved_names else 'unsaved'})"


def preset_from(spec: Preset | str) -> Preset:
    """A preset as given, or the one a name or a file path names."""
    if isinstance(spec, Preset):
        return spec

    return load_preset(spec)


def device_from(spec: DeviceProfile | str) -> DeviceProfile:
    """A device profile as given, or the one a name or a file path names ("host" is detected)."""
    if isinstance(spec, DeviceProfile):
        return spec

    return load_device(spec)


def model_options(selection: Selection) -> list[tuple[str, str]]:
    selection.add_model(selection.model_path)
    return [(label, path) for path, label in selection.models.items()]


def preset_options(selection: Selection, *, refresh: bool = False) -> list[tuple[str, str]]:
    names = list(selection.preset_names(refresh=refresh)) + list(selection.unsaved_presets)
    if selection.preset_name not in names:
        names.insert(0, selection.preset_name)  # a preset given as a file path
    return [(name, name) for name in names]


def device_options(selection: Selection, *, refresh: bool = False) -> list[tuple[str, str]]:
    names = ["host", *selection.device_names(refresh=refresh)]
    if selection.device_name not in names:
        names.insert(0, selection.device_name)
    return [("host (this machine)" if name == "host" else name, name) for name in names]
