"""Which llama.cpp build the ledger was verified against, and whether the installed one is it."""

from __future__ import annotations

from functools import cache
from importlib import metadata

# The ledger's compute and overhead lines follow one llama.cpp graph allocator and cache
# layout; they were checked (tests/test_arch_ledger.py, benchmarks/ledger_accuracy.py) on
# this build. pyproject.toml pins llama-cpp-python to the same range.
VERIFIED_PACKAGE = "llama-cpp-python"
VERIFIED_VERSIONS = ("0.3.36",)
VERIFIED_LLAMA_CPP = "0c1e570"  # vendor/llama.cpp commit of llama-cpp-python 0.3.36
VERIFIED_ON = f"llama.cpp {VERIFIED_LLAMA_CPP} ({VERIFIED_PACKAGE} {', '.join(VERIFIED_VERSIONS)})"


@cache
def installed_version() -> str:
    """The installed llama-cpp-python version, "" when it is not installed (read once: a process keeps the
    llama.cpp it imported)."""
    try:
        return metadata.version(VERIFIED_PACKAGE)
    except metadata.PackageNotFoundError:
        return ""


def unverified_reason(version: str | None = None) -> str:
    """Why the installed build is not the verified one; "" when it is."""
    version = installed_version() if version is None else version
    if not version:
        return f"{VERIFIED_PACKAGE} is not installed: the prediction follows {VERIFIED_ON}"
    if version not in VERIFIED_VERSIONS:
        return (f"unverified: installed {VERIFIED_PACKAGE} {version} is outside the verified "
                f"{', '.join(VERIFIED_VERSIONS)}; compute and overhead lines may be off")
    return ""
