"""The report printed to PDF by a headless Chromium (its --print-to-pdf), in a fresh profile, offline."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from workbench.core.errors import WorkbenchError

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PRINT_TIMEOUT_S = 120
# Headless and offline: no GPU, no sandbox when run as root (Chromium refuses otherwise), no network of its own.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-pdf-header-footer")


def find_browser() -> str | None:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def print_pdf(html_path: Path, pdf_path: Path, browser: str | None = None) -> Path:
    """Print `html_path` to `pdf_path`; a missing browser, a failure or a timeout is a clear error."""
    executable = browser or find_browser()
    if executable is None:
        raise WorkbenchError("no Chromium to print the PDF with", where="report --pdf",
                             fix="install one (Debian: `apt-get install chromium`) or open the HTML and print it")
    with tempfile.TemporaryDirectory(prefix="workbench-pdf-") as profile:
        command = [executable, *FLAGS, f"--user-data-dir={profile}", f"--print-to-pdf={pdf_path}",
                   html_path.resolve().as_uri()]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PRINT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as error:
            raise WorkbenchError(f"Chromium did not print within {PRINT_TIMEOUT_S} s", where=executable,
                                 fix="open the HTML and print it from a browser") from error
        except OSError as error:
            raise WorkbenchError(f"cannot start Chromium: {error.strerror}", where=executable,
                                 fix="install Chromium or open the HTML and print it") from error
    if done.returncode != 0 or not pdf_path.is_file() or pdf_path.stat().st_size == 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise WorkbenchError(f"Chromium wrote no PDF (exit {done.returncode}: {tail[0][:200]})", where=executable,
                             fix="open the HTML and print it from a browser")
    return pdf_path
