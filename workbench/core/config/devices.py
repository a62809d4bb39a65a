"""Device profiles: shipped and user TOML files with each figure's source, plus the detected host."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from workbench.core import paths
from workbench.core.config.cpu_features import profile_cpu_features
from workbench.core.config.device_accelerator import accelerator_fields
from workbench.core.config.device_speed import SPEED_KEYS, speed_fields
from workbench.core.config.host import detect_host, probed_profile_name
from workbench.core.config.preset import DeviceProfile
from workbench.core.config.toml_checks import (
    Catalog,
    TomlSource,
    catalog_files,
    catalog_origin,
    check_known_keys,
    get_int,
    get_number,
    get_str,
    load_catalog,
    load_entry_file,
    looks_like_path,
    unknown_name,
    wrong_type,
)
from workbench.core.errors import PresetError

HOST = "host"
DEVICE_KEYS = ("name", "description", "ram_total_mb", "mem_bandwidth_gbs", "power_limit_w", "cores",
               "fast_cores", "reserves_mb", "notes", "accelerator", "vram_mb", "vram_bandwidth_gbs", "battery_wh",
               "accelerator_slower_than_cpu", "cpu_features") + SPEED_KEYS
FIGURE_KEYS = ("ram_total_mb", "mem_bandwidth_gbs", "power_limit_w", "cores", "fast_cores", "accelerator", "vram_mb",
               "vram_bandwidth_gbs", "battery_wh", "accelerator_slower_than_cpu", "cpu_features") + SPEED_KEYS
_RESERVE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")


def shipped_devices_dir() -> Path:
    return paths.data_dir("presets") / "devices"


def user_devices_dir() -> Path:
    return paths.config_dir() / "devices"


def _table(data: dict[str, Any], key: str, source: TomlSource, example: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise wrong_type(key, value, "a table", example, source)
    return value


def _reserves(data: dict[str, Any], source: TomlSource) -> tuple[tuple[str, int], ...]:
    table = _table(data, "reserves_mb", source, "[reserves_mb] with lines like os = 1200")
    reserves = []
    for name in table:
        if not _RESERVE_NAME.match(name):
            raise PresetError(f'reserve name "{name}" is not a simple lowercase name',
                              where=source.where(name, "reserves_mb"),
                              fix="Use lowercase letters, digits and '_', e.g. dma_frame_buffers = 800")
        mb = get_int(table, name, None, source, minimum=0, maximum=1 << 24, example=f"{name} = 1200",
                     unit="MB", table="reserves_mb")
        reserves.append((name, mb))
    return tuple(reserves)


def _notes(data: dict[str, Any], reserves: tuple[tuple[str, int], ...],
           source: TomlSource) -> tuple[tuple[str, str], ...]:
    table = _table(data, "notes", source, '[notes] with lines like ram_total_mb = "vendor datasheet"')
    known = FIGURE_KEYS + tuple(f"reserves_mb.{name}" for name, _ in reserves)
    check_known_keys(table, known, source, "device profile", table="notes")
    notes = []
    for figure, text in table.items():
        if not isinstance(text, str):
            raise wrong_type(figure, text, "a text value", f'"{figure}" = "where the figure comes from"', source,
                             table="notes")
        notes.append((figure, text))
    return tuple(notes)


def _device_from_source(data: dict[str, Any], source: TomlSource, default_name: str = "") -> DeviceProfile:
    check_known_keys(data, DEVICE_KEYS, source, "device profile")
    name = get_str(data, "name", default_name, source, example='name = "my-board"')
    if not name:
        raise PresetError("missing name", where=source.where(), fix='Add a line like name = "my-board"')
    if name == HOST:
        raise PresetError('the name "host" is taken by the detected machine', where=source.where("name"),
                          fix='Pick another name, e.g. name = "my-board"')
    ram_total_mb = get_int(data, "ram_total_mb", None, source, minimum=1, maximum=1 << 24,
                           example="ram_total_mb = 8192", unit="MB")
    if ram_total_mb < 256:
        # Nothing that runs a language model has under 256 MB: this is GB written as MB.
        raise PresetError(f"ram_total_mb = {ram_total_mb} is tiny", where=source.where("ram_total_mb"),
                          fix=f"The figure is in MB: {ram_total_mb} GB is ram_total_mb = {ram_total_mb * 1024}")
    reserves = _reserves(data, source)
    reserved = sum(mb for _, mb in reserves)
    if reserved >= ram_total_mb:
        raise PresetError(f"the reserves add up to {reserved} MB, leaving nothing of ram_total_mb = {ram_total_mb}",
                          where=source.where("reserves_mb") if "reserves_mb" in data else source.where(),
                          fix="Lower the [reserves_mb] figures (they are in MB) or fix ram_total_mb")
    bandwidth = get_number(data, "mem_bandwidth_gbs", None, source, minimum_exclusive=0, maximum=100_000,
                           example="mem_bandwidth_gbs = 68", required=True)
    cores = get_int(data, "cores", None, source, minimum=1, maximum=4096, example="cores = 6")
    # The big cores of a big.LITTLE board: one of them, up to every core.
    fast_cores = (get_int(data, "fast_cores", None, source, minimum=1, maximum=cores, example=f"fast_cores = {max(1, cores // 2)}")
                  if "fast_cores" in data else None)
    power = get_number(data, "power_limit_w", None, source, minimum_exclusive=0, maximum=100_000,
                       example="power_limit_w = 15")
    return DeviceProfile(
        name=name,
        ram_total_mb=ram_total_mb,
        reserves_mb=reserves,
        mem_bandwidth_gbs=float(bandwidth or 0.0),
        power_limit_w=power,
        cores=cores,
        fast_cores=fast_cores,
        battery_wh=get_number(data, "battery_wh", None, source, minimum_exclusive=0, maximum=100_000,
                              example="battery_wh = 99.9"),
        description=get_str(data, "description", "", source, example='description = "what the board is"'),
        notes=_notes(data, reserves, source),
        source=source.label if source.text else "",
        cpu_features=(profile_cpu_features(data["cpu_features"], source.where("cpu_features"))
                      if "cpu_features" in data else None),
        **accelerator_fields(data, source),
        **speed_fields(data, source),
    )


def _load_device_file(path: Path, *, catalog: bool) -> DeviceProfile:
    return load_entry_file(path, "device", _device_from_source, catalog=catalog)


def _catalog_files() -> dict[str, Path]:
    return catalog_files(shipped_devices_dir(), user_devices_dir())


def _host() -> DeviceProfile:
    """The detected host, with the speed figures of this machine's probed profile when there is one."""
    host = detect_host()
    path = _catalog_files().get(probed_profile_name())
    if path is None:
        return host
    try:
        probed = _load_device_file(path, catalog=True)
    except PresetError:
        return host  # `workbench devices` names the broken file
    note = dict(probed.notes).get("speed", "no source given")
    return dataclasses.replace(host, thread_rates=probed.thread_rates,
                               notes=host.notes + (("speed", f"{note} (from {path})"),))


def load_device(spec: str) -> DeviceProfile:
    """A device by name ("host" detects this machine) or by path to a TOML file."""
    if spec == HOST:
        return _host()
    if looks_like_path(spec):
        return _load_device_file(Path(spec).expanduser(), catalog=False)
    files = _catalog_files()
    if spec in files:
        return _load_device_file(files[spec], catalog=True)
    raise unknown_name(spec, sorted(files) + [HOST], "device")


def device_catalog() -> Catalog[DeviceProfile]:
    """Shipped and user devices that load, by name (user wins by name), and the files that do not (with why)."""
    return load_catalog(_catalog_files(), lambda path: _load_device_file(path, catalog=True))


def list_devices(*, include_host: bool = True) -> tuple[DeviceProfile, ...]:
    """The devices of `device_catalog()` that load (a malformed file is left out), then the detected host."""
    devices = device_catalog().entries
    if include_host:
        devices += (_host(),)
    return devices


def device_origin(device: DeviceProfile) -> str:
    """"shipped", "user", "detected" (host), "file" (elsewhere) or "built-in" (made in code)."""
    if device.source == "detected":
        return "detected"
    return catalog_origin(device.source, shipped_devices_dir(), user_devices_dir())
