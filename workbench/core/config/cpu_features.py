"""The CPU features that decide which weights llama.cpp's CPU backend repacks: the host's, or a board profile's."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import PresetError

# The features ggml-cpu's repack selection asks about (ggml/src/ggml-cpu/repack.cpp,
# ggml_repack_get_optimal_repack_type, llama.cpp 0c1e570): ggml_cpu_has_avx2 / _avx512 on x86,
# ggml_cpu_has_neon / _dotprod / _matmul_int8 (i8mm) / _sve on Arm.
KNOWN_FEATURES = ("avx2", "avx512", "neon", "dotprod", "i8mm", "sve")

# /proc/cpuinfo's names for them: x86 "flags", arm64 "Features" (asimd = NEON, asimddp = dot product)
_CPUINFO_NAMES = {"avx2": "avx2", "avx512f": "avx512", "asimd": "neon", "asimddp": "dotprod", "i8mm": "i8mm",
                  "sve": "sve"}
_FEATURE_LINE = re.compile(r"^(?:flags|Features)\s*:\s*(.*)$", re.MULTILINE)
_MAX_CPUINFO_BYTES = 256 * 1024  # the first CPU's lines are at the top; a planted huge file is cut


@dataclass(frozen=True)
class CpuFeatures:
    features: frozenset[str]  # of KNOWN_FEATURES
    source: str  # where they were read

    def has(self, feature: str) -> bool:
        return feature in self.features


def parse_cpuinfo(text: str) -> frozenset[str]:
    """The known features of the first CPU listed in /proc/cpuinfo text."""
    match = _FEATURE_LINE.search(text)
    if match is None:
        return frozenset()
    return frozenset(_CPUINFO_NAMES[flag] for flag in match.group(1).split() if flag in _CPUINFO_NAMES)


def host_cpu_features(path: Path | str = "/proc/cpuinfo") -> CpuFeatures:
    """This machine's features from /proc/cpuinfo (bounded read); none known when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"not a regular file: {path}")
            text = os.read(fd, _MAX_CPUINFO_BYTES).decode("utf-8", "replace")
        finally:
            os.close(fd)
    except OSError as error:
        return CpuFeatures(frozenset(), f"unavailable: {path} could not be read ({error})")
    return CpuFeatures(parse_cpuinfo(text), f"this machine's {path}")


def profile_cpu_features(value: object, where: str) -> tuple[str, ...]:
    """A device profile's `cpu_features = ["neon", "dotprod"]`, checked against the known names."""
    example = 'cpu_features = ["neon", "dotprod"]'
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value) or len(value) > 16:
        raise PresetError(f"cpu_features = {value!r} is not a list of feature names", where=where,
                          fix=f"Write a list like {example}, from: {', '.join(KNOWN_FEATURES)}")
    unknown = [item for item in value if item not in KNOWN_FEATURES]
    if unknown:
        raise PresetError(f"cpu_features names {', '.join(map(repr, unknown))}, which the workbench does not know",
                          where=where, fix=f"Use only: {', '.join(KNOWN_FEATURES)} (e.g. {example})")
    return tuple(dict.fromkeys(value))
