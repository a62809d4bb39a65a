"""The bundled model loaded in a real engine, for module-scoped fixtures of tests that talk to llama.cpp."""

from __future__ import annotations

from collections.abc import Iterator

from workbench.core.engine.client import EngineClient
from workbench.core.paths import bundled_model_path
from workbench.core.config.preset import DeviceProfile, Preset

# A device with room for any test preset: the budget check never refuses a load here.
ROOMY = DeviceProfile(name="test-roomy", ram_total_mb=65536, cores=2)


def loaded_client(preset: Preset) -> Iterator[EngineClient]:
    """Yield an engine with the bundled model loaded under `preset`; closed after."""
    client = EngineClient()
    try:
        client.load_blocking(bundled_model_path(), preset, device=ROOMY)
        yield client
    finally:
        client.close()
