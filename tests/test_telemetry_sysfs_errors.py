"""Every sysfs file the sampler reads, failing every way a driver fails: named with the reason, never a crash or a 0."""

from pathlib import Path

import pytest

from workbench.core.telemetry.sampler import Sampler
from workbench.core.telemetry.sysfs import read_text

TREES = Path(__file__).parent / "sysfs"
ALL_TREES = sorted(path.name for path in TREES.iterdir() if path.is_dir() and (path / "sys").is_dir())

# How drivers and files fail: an errno from the read, or a text that is no number.
FAILURES = {
    "EINVAL": OSError(22, "Invalid argument"),
    "ENODATA": OSError(61, "No data available"),
    "EIO": OSError(5, "Input/output error"),
    "EACCES": PermissionError(13, "Permission denied"),
    "missing": FileNotFoundError(2, "No such file or directory"),
    "empty": "",
    "dash": "-",
    "N/A": "N/A",
}


class SwitchableReader:
    """The real reader, except for one file that fails once `failing` is set; records what it read."""

    def __init__(self) -> None:
        self.failing: Path | None = None
        self.failure: object = None
        self.read: list[Path] = []

    def __call__(self, path: Path) -> str:
        self.read.append(path)
        if path == self.failing:
            if isinstance(self.failure, OSError):
                raise self.failure
            return str(self.failure)
        return read_text(path)


def _figures(sample) -> dict[str, float]:
    """The numbers a person reads off a sample, keyed by what they are (CPU load left out: it is psutil's)."""
    figures = {f"temperature {t.name}": t.celsius for t in sample.temperatures}
    figures |= {f"clock {c.policy}": c.cur_khz for c in sample.clocks}
    figures |= {f"rail {r.name}": r.watts for r in sample.power}
    figures |= {f"load {unit}": value for unit, value in sample.loads}
    figures |= {f"unit clock {unit}": value for unit, value in sample.device_clocks_mhz}
    if sample.total_power_w is not None:
        figures["total power"] = sample.total_power_w
    return figures


def _live_files(tree: str) -> list[Path]:
    """The files a sample reads (discovery reads such as labels and trip points are not sampled)."""
    reader = SwitchableReader()
    sampler = Sampler(TREES / tree, reader=reader)
    reader.read.clear()
    sampler.sample()
    return sorted(set(reader.read))


CASES = [(tree, path) for tree in ALL_TREES for path in _live_files(tree)]


def test_the_cases_cover_every_kind_of_reading():
    names = {path.name for _, path in CASES}
    for expected in ("temp", "temp1_input", "scaling_cur_freq", "scaling_max_freq", "in1_input", "curr1_input",
                     "energy_uj", "cur_freq", "load", "get_throttled", "core_throttle_count", "power_now"):
        assert expected in names, expected


@pytest.mark.parametrize(("tree", "path"), CASES, ids=[f"{tree}:{path.relative_to(TREES / tree)}" for tree, path in CASES])
def test_a_failing_file_is_named_and_never_zero(tree, path):
    reader = SwitchableReader()
    sampler = Sampler(TREES / tree, reader=reader)
    clean = _figures(sampler.sample())
    for kind, failure in FAILURES.items():
        reader.failing, reader.failure = path, failure
        sample = sampler.sample()  # must not raise
        reasons = [item.why for item in sample.unavailable]
        assert any(str(path) in why for why in reasons), f"{kind}: {path} failed and no reason names it: {reasons}"
        assert all(t.source != str(path) for t in sample.temperatures), kind
        for name, value in _figures(sample).items():
            assert not (value == 0 and clean.get(name, 0) != 0), f"{kind}: {name} became 0"
        reader.failing = None
        sampler.sample()  # the file comes back: the next sample reads it again


@pytest.mark.parametrize("tree", ALL_TREES)
def test_failing_at_discovery_never_crashes(tree):
    # Labels, names, trip points and device-tree strings failing while the sampler finds its sources.
    reader = SwitchableReader()
    Sampler(TREES / tree, reader=reader)
    discovered = sorted(set(reader.read))
    for path in discovered:
        for failure in (OSError(22, "Invalid argument"), "N/A"):
            failing = SwitchableReader()
            failing.failing, failing.failure = path, failure
            sample = Sampler(TREES / tree, reader=failing).sample()
            assert all(item.why for item in sample.unavailable)
