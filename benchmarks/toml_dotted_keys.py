"""Time and memory to refuse TOML files with deep dotted keys, beside reading a shipped device profile.

Each case is written to a temporary folder and read with `read_toml` (what presets, device
profiles, `workbench presets` and the app's start use) in a fresh child interpreter, timed
there; the peak is tracemalloc's in a second run and the child's max RSS after both. Cases:

- dotted-20k: `a.a.….b = 1` with 20,000 parts (40 KB; tomllib alone took 5 s and 1.6 GB);
- dotted-80k: 80,000 parts (tomllib alone ran out of memory);
- quoted-80k: the same with every part quoted ("a"."a".…);
- tomllib-2k: tomllib itself on 2,000 parts, to show the growth the check stops (not read_toml).

Target (issue 21): 80,000 parts refused in under a second with under 100 MB.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import resource, sys, time, tracemalloc, tomllib
from pathlib import Path
from workbench.core.config.toml_checks import read_toml
from workbench.core.errors import PresetError
path = Path(sys.argv[1])
def run():
    try:
        if sys.argv[2] == "tomllib":
            tomllib.loads(path.read_text())
            return "parsed by tomllib"
        read_toml(path, "device profile")
        return "read"
    except PresetError as error:
        return "refused: " + str(error)[len(str(path)):][:70]
started = time.perf_counter(); outcome = run(); seconds = time.perf_counter() - started
tracemalloc.start(); run(); peak = tracemalloc.get_traced_memory()[1]
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{seconds:.3f} {peak / 1e6:.1f} {rss:.0f} {outcome}")
"""


def _dotted(parts: int, quoted: bool = False) -> str:
    part = '"a"' if quoted else "a"
    return ".".join([part] * (parts - 1) + ["b"]) + " = 1\n"


def main() -> int:
    shipped = Path(__file__).resolve().parent.parent / "presets" / "devices" / "jetson-orin-nano-8gb.toml"
    with tempfile.TemporaryDirectory() as folder:
        cases = [("shipped-profile", shipped, "read_toml")]
        for name, text, how in (("dotted-20k", _dotted(20_000), "read_toml"), ("dotted-80k", _dotted(80_000), "read_toml"),
                                ("quoted-80k", _dotted(80_000, quoted=True), "read_toml"),
                                ("tomllib-2k", _dotted(2_000), "tomllib")):
            path = Path(folder) / f"{name}.toml"
            path.write_text(text, encoding="utf-8")
            cases.append((name, path, how))
        print(f"{'case':<16} {'KB':>6} {'seconds':>8} {'peak MB':>8} {'max RSS MB':>10}  outcome")
        base = None
        for name, path, how in cases:
            done = subprocess.run([sys.executable, "-c", _CHILD, str(path), how], capture_output=True, text=True, timeout=600, check=False)
            if done.returncode != 0:
                print(f"{name:<16} failed: {done.stderr.strip().splitlines()[-1:]}")
                continue
            seconds, peak, rss, outcome = done.stdout.split(" ", 3)
            base = base or float(seconds) or 1e-6
            print(f"{name:<16} {path.stat().st_size / 1000:>6.0f} {float(seconds):>8.3f} {float(peak):>8.1f} {float(rss):>10.0f}"
                  f"  {outcome.strip()} (x{float(seconds) / base:.1f} of the shipped profile)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
