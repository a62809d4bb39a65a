"""What a download reports while it runs: small frozen events, and its result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import HubError, WorkbenchError


@dataclass(frozen=True)
class DownloadStarted:
    """A file (or one part of a split file) begins; `resumed_from_bytes` > 0 when a partial was found."""

    repo: str
    filename: str
    total_bytes: int
    resumed_from_bytes: int
    part: int = 1
    parts: int = 1


@dataclass(frozen=True)
class DownloadProgressed:
    """Bytes on disk so far for the whole model (all parts); rate over the last seconds of transfer."""

    repo: str
    filename: str
    done_bytes: int
    total_bytes: int
    rate_bytes_per_s: float | None  # None until there is enough to measure
    eta_s: float | None

    @property
    def fraction(self) -> float:
        return self.done_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(frozen=True)
class DownloadRetried:
    """The link dropped or stalled; the download continues from `resume_from_bytes`."""

    repo: str
    filename: str
    attempt: int
    max_attempts: int
    reason: str
    resume_from_bytes: int


@dataclass(frozen=True)
class DownloadVerified:
    """The file's sha256 matched the hub's LFS hash (or, without one, its size matched)."""

    repo: str
    filename: str
    sha256: str
    checked_against: str  # "LFS sha256" or "size only (the hub publishes no sha256 for this file)"


@dataclass(frozen=True)
class DownloadFinished:
    """Every part is in the cache and verified; `path` is what to load (the first part of a split file)."""

    repo: str
    filename: str
    path: Path
    size_bytes: int
    fetched_bytes: int  # transferred by this run (0 when it was already cached)
    seconds: float
    already_cached: bool


DownloadEvent = DownloadStarted | DownloadProgressed | DownloadRetried | DownloadVerified | DownloadFinished
EventSink = Callable[[DownloadEvent], None]


class DownloadCancelled(HubError):
    """Stopped on request; the partial file stays in the cache and the next download resumes from it."""

    def __init__(self, filename: str, done_bytes: int, total_bytes: int) -> None:
        self.done_bytes = done_bytes
        self.total_bytes = total_bytes
        share = f"{done_bytes / total_bytes:.0%}" if total_bytes else f"{done_bytes} bytes"
        super().__init__(
            f"download cancelled at {share} ({_mb(done_bytes)} of {_mb(total_bytes)})",
            where=filename,
            fix="The partial file is kept: run the same download again to resume",
        )


class DiskFull(WorkbenchError):
    """The disk (or the user's quota) filled during a download; what was written stays for a resume."""

    def __init__(self, path: str | Path, done_bytes: int) -> None:
        self.path = Path(path)
        self.done_bytes = done_bytes
        super().__init__(
            f"disk full at {path} after {_mb(done_bytes)}; the partial file is kept",
            fix="Free some space (or set HF_HUB_CACHE to a bigger disk) and run the same command to resume",
        )


def _mb(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:.1f} MB"
