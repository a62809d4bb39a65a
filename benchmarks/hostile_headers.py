"""Time and memory to refuse (or read) hostile GGUF headers, beside reading the bundled model.

Each case is written to a temporary folder (large ones sparse, so no disk is spent), read
with `read_gguf` in a fresh child interpreter, and timed there; the peak is tracemalloc's
(Python allocations, deterministic) in a second run. Cases:

- forged-layers: a tiny file claiming 2**32 - 1 layers (a ledger that trusts the count grows by ~110 MB/s);
- keys-3M: 3 million metadata pairs announced (a reader without a key limit takes 16 s and 385 MB);
- strings-at-limit: a vocabulary of MAX_ARRAY_STRINGS - 1 tokens, the slowest header still read;
- tensors-at-limit: MAX_TENSORS tensor entries, the largest tensor table still read;
- header-over-limit: a 65 MiB string value in a sparse file.

Prints seconds and peak MB per case and the ratio to reading the bundled model's header.
Target: every hostile case under 2 s and a few MB. `--quick` uses 10x smaller limits-cases.
"""

from __future__ import annotations

import argparse
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import sys, time, tracemalloc
from workbench.core.errors import GGUFError
from workbench.core.gguf.reader import read_gguf
def run():
    try:
        read_gguf(sys.argv[1])
        return "read"
    except GGUFError as error:
        return "refused: " + str(error)[:140]
started = time.perf_counter(); outcome = run(); seconds = time.perf_counter() - started
tracemalloc.start(); run(); peak = tracemalloc.get_traced_memory()[1]
print(f"{seconds:.3f} {peak / 1e6:.1f} {outcome}")
"""


def _string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def _header(n_tensors: int, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)


def write_cases(folder: Path, quick: bool) -> dict[str, Path]:
    from workbench.core.gguf.reader import MAX_ARRAY_STRINGS, MAX_TENSORS

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from gguf_factory import FUZZ_MODEL, with_u32_field, write_tiny_gguf

    scale = 10 if quick else 1
    cases = {}
    tiny = write_tiny_gguf(folder / "tiny.gguf", FUZZ_MODEL)
    cases["forged-layers"] = with_u32_field(tiny, "llama.block_count", 2**32 - 1, "forged-layers.gguf")

    keys = folder / "keys-3M.gguf"
    with open(keys, "wb") as stream:
        stream.write(_header(0, 3_000_000))
        stream.truncate(3_000_000 * 21 + 64)  # as if 3M pairs of 21 bytes followed
    cases["keys-3M"] = keys

    n_strings = MAX_ARRAY_STRINGS // scale - 1
    strings = folder / "strings-at-limit.gguf"
    with open(strings, "wb") as stream:
        stream.write(_header(0, 1) + _string(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, n_strings))
        stream.write(_string(b"token") * n_strings)
    cases["strings-at-limit"] = strings

    n_tensors = MAX_TENSORS // scale
    table = b"".join(_string(b"t%07d.weight" % i) + struct.pack("<IQIQ", 1, 32, 0, i * 128) for i in range(n_tensors))
    tensors = folder / "tensors-at-limit.gguf"
    with open(tensors, "wb") as stream:
        head = _header(n_tensors, 0) + table
        stream.write(head + b"\0" * (-len(head) % 32))
        stream.truncate(stream.tell() + n_tensors * 128)
    cases["tensors-at-limit"] = tensors

    huge = folder / "header-over-limit.gguf"
    with open(huge, "wb") as stream:
        stream.write(_header(0, 1) + _string(b"general.name") + struct.pack("<IQ", 8, 65 << 20))
        stream.truncate(66 << 20)
    cases["header-over-limit"] = huge
    return cases


def measure(path: Path) -> tuple[float, float, str]:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, check=True,
                          cwd=path.parent)
    seconds, peak, outcome = done.stdout.strip().split(" ", 2)
    return float(seconds), float(peak), outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="limit cases 10x smaller (a smoke run)")
    args = parser.parse_args()
    from workbench.core.paths import bundled_model_path

    with tempfile.TemporaryDirectory(prefix="hostile-headers-") as folder:
        cases = write_cases(Path(folder), args.quick)
        reference = bundled_model_path()
        base_seconds, base_peak, _ = measure(reference) if reference else (0.0, 0.0, "")
        print(f"{'case':<20}{'seconds':>9}{'peak MB':>9}{'x bundled':>11}  outcome")
        if reference:
            print(f"{'bundled (reference)':<20}{base_seconds:>9.3f}{base_peak:>9.1f}{1:>11.1f}  read")
        for name, path in cases.items():
            seconds, peak, outcome = measure(path)
            outcome = outcome.replace(f"{folder}/", "")
            ratio = seconds / base_seconds if base_seconds else float("nan")
            print(f"{name:<20}{seconds:>9.3f}{peak:>9.1f}{ratio:>11.1f}  {outcome}")


if __name__ == "__main__":
    main()
