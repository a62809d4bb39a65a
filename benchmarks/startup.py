"""Time from starting `workbench` to its first painted screen, in a real pseudo-terminal.

Runs the installed command (or `python -m workbench`) in a 160x48 pty, reads its output
until the main screen's title and footer are drawn, then quits it. Prints each run, the
median, and beside it the interpreter alone and `import textual.app` for scale.
Target: under 1.5 s on this machine.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time

# the first frame of the main screen: header title, a panel title and the prompt box
PAINTED = (b"Edge LLM Workbench", b"Memory ledger", b"Ask the model")
# the footer fills in its key bindings on a later frame; timed too, reported apart
COMPLETE = PAINTED + (b"palette",)


def time_to_paint(command: list[str], timeout_s: float = 30.0) -> tuple[float, float]:
    """Seconds to the first main-screen frame and to the frame with the footer's bindings."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="160", LINES="48")
    started = time.perf_counter()
    process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                               cwd="/tmp")
    os.close(slave)
    seen = b""
    first_paint = None
    try:
        while time.perf_counter() - started < timeout_s:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
                if first_paint is None and all(marker in seen for marker in PAINTED):
                    first_paint = time.perf_counter() - started
                if first_paint is not None and all(marker in seen for marker in COMPLETE):
                    return first_paint, time.perf_counter() - started
            if process.poll() is not None:
                break
        raise RuntimeError(f"no painted screen within {timeout_s} s; output tail: {seen[-400:]!r}")
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        process.wait(timeout=10)
        os.close(master)


def time_command(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    executable = shutil.which("workbench")
    command = [executable] if executable else [sys.executable, "-m", "workbench"]
    time_to_paint(command)  # warm the page cache and .pyc files once, unreported
    paints, completes, bare, textual = [], [], [], []
    for _ in range(args.runs):
        paint, complete = time_to_paint(command)
        paints.append(paint)
        completes.append(complete)
        bare.append(time_command([sys.executable, "-c", "pass"]))
        textual.append(time_command([sys.executable, "-c", "import textual.app"]))
    print(f"command: {' '.join(command)}  (pty 160x48, {args.runs} runs, load average {os.getloadavg()[0]:.1f})")
    print("runs to first paint (s): " + " ".join(f"{value:.2f}" for value in paints))
    print(f"{'':<30}{'median s':>10}")
    print(f"{'python -c pass':<30}{statistics.median(bare):>10.3f}")
    print(f"{'python -c import textual.app':<30}{statistics.median(textual):>10.3f}")
    print(f"{'workbench footer bindings drawn':<30}{statistics.median(completes):>10.3f}")
    median = statistics.median(paints)
    print(f"{'workbench first paint':<30}{median:>10.3f}   target < 1.5 s: {'met' if median < 1.5 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
