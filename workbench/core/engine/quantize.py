"""Re-quantize a GGUF model with llama.cpp's quantizer, in a process of its own, with a cache."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from multiprocessing.connection import wait
from pathlib import Path

from workbench.core import paths
from workbench.core.engine.child_process import start_child
from workbench.core.engine.log_files import new_log_file
from workbench.core.engine.log_tail import describe_exit, read_log_tail
from workbench.core.errors import WorkbenchError
from workbench.core.files.safe_paths import NAME_MAX_BYTES
from workbench.core.gguf import ggml_types
from workbench.core.gguf.model_info import ModelInfo
from workbench.core.gguf.reader import read_gguf
from workbench.core.units import MIB

FULL_PRECISION = ("F32", "F16", "BF16")
_FINGERPRINT_SPAN = MIB


def weights_type_name(name: str) -> str:
    """The quantizer target `name` means ("q4_k" -> "Q4_K_M"); WorkbenchError listing the valid ones."""
    try:
        return ggml_types.canonical_quant_type(name.strip())
    except KeyError:
        raise WorkbenchError(
            f"unknown weight type {name!r}",
            fix=f"Use one of: {', '.join(ggml_types.QUANT_TYPES)}",
        ) from None


def source_fingerprint(path: Path) -> str:
    """A short hash naming a source file in the cache: sha256 of its size, first and last MiB.

    Hashing a whole 4 GB model takes tens of seconds on an edge board's SD card; the first MiB
    holds the GGUF header (metadata and tensor table), the last MiB the end of the tensor
    data, and the size pins the rest. Two different models or two quantizations of one model
    differ there; what this does not catch is a file edited in place in its middle.
    """
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as stream:
        digest.update(stream.read(_FINGERPRINT_SPAN))
        if size > _FINGERPRINT_SPAN:
            stream.seek(max(_FINGERPRINT_SPAN, size - _FINGERPRINT_SPAN))
            digest.update(stream.read(_FINGERPRINT_SPAN))
    return digest.hexdigest()[:16]


def _gguf_stem(source: Path) -> str:
    """The file name without its ".gguf" (any case)."""
    return source.name[: -len(".gguf")] if source.name.lower().endswith(".gguf") else source.name


def _name_that_fits(stem: str, suffix: str) -> str:
    """`stem + suffix`, the stem cut at a character boundary so the name fits one file name (255 bytes).

    A source may legally be named with 250 bytes; the cache key, the type and `.part-PID`
    added to it made ENAMETOOLONG (a traceback) before any work was done.
    """
    room = max(0, NAME_MAX_BYTES - len(suffix.encode()))
    return stem.encode()[:room].decode("utf-8", errors="ignore") + suffix


def quantized_cache_dir() -> Path:
    return paths.quantized_dir()


def cached_quantized_path(src: str | os.PathLike[str], weights_type: str) -> Path:
    """Where the cache keeps `src` re-quantized to `weights_type` (it may not exist yet)."""
    source = Path(src)
    target = weights_type_name(weights_type)
    return quantized_cache_dir() / _name_that_fits(_gguf_stem(source), f".{source_fingerprint(source)}.{target}.gguf")


def requantize_warning(model: ModelInfo, weights_type: str) -> str:
    """What re-quantizing `model` to `weights_type` costs in quality, or "" when it is a clean start."""
    source_type = model.file_type
    target = weights_type_name(weights_type)
    if not source_type or source_type in FULL_PRECISION:
        return ""
    if target in FULL_PRECISION:
        return (f"the source is already quantized ({source_type}): {target} from it keeps {source_type}'s losses "
                f"at {target}'s size; quality is bounded by the source's {source_type}")
    return (f"the source is already quantized ({source_type}): quality is bounded by the source's {source_type}, "
            f"and {target} adds its own loss; start from an F16/BF16 GGUF for the best {target}")


def default_output_name(source: Path, weights_type: str) -> str:
    """The file name `-o DIR` gets: the source's stem and the type ("model.Q4_1.gguf" -> "model.Q8_0.gguf")."""
    stem = _gguf_stem(source)
    base, _, last = stem.rpartition(".")
    if base and (last.upper() in ggml_types.QUANT_TYPES or last.upper() in FULL_PRECISION):
        stem = base  # the source's own type would make "model.Q4_1.Q8_0.gguf"
    return _name_that_fits(stem, f".{weights_type}.gguf")


def output_path(source: Path, weights_type: str, out: Path, *, overwrite: bool = False) -> Path:
    """Where `-o OUT` puts the result: inside OUT when it is a folder; WorkbenchError when it cannot be written,
    or when a file is there already and `overwrite` was not asked."""
    destination = out / default_output_name(source, weights_type) if out.is_dir() else out
    folder = destination.parent
    if not folder.is_dir():
        raise WorkbenchError("the output folder does not exist", where=str(folder),
                             fix="Create it first, or give -o an existing folder or a file path in one")
    if destination.resolve() == source.resolve():
        raise WorkbenchError("the output would overwrite the source", where=str(destination),
                             fix="Give another -o path")
    if not overwrite and (destination.exists() or destination.is_symlink()):
        raise WorkbenchError("the output file exists", where=str(destination),
                             fix="Replace it with --force, or give another -o path")
    return destination


def check_writable_folder(folder: Path) -> None:
    """WorkbenchError unless a file can be created in `folder`.

    Tried for real rather than with os.access(): root passes os.access() everywhere, and a
    read-only mount or /sys refuses anyway; llama.cpp would only say "iostream error" later.
    """
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise WorkbenchError(f"cannot write in the output folder ({error.strerror or error})", where=str(folder),
                             fix="Give -o a folder you can write to") from None


def partial_path(out: Path) -> Path:
    """Where a quantization is written before it is complete (renamed into place at the end)."""
    return out.with_name(_name_that_fits(out.name, f".part-{os.getpid()}"))


def remove_partial_files(pid: int) -> None:
    """Delete the cache's unfinished files of a process that died while quantizing."""
    folder = quantized_cache_dir()
    if folder.is_dir():
        for leftover in folder.glob(f"*.part-{pid}"):
            leftover.unlink(missing_ok=True)


def quantize(
    src: str | os.PathLike[str],
    weights_type: str,
    out: str | os.PathLike[str] | None = None,
    on_progress: Callable[[float], None] | None = None,
    *,
    on_warning: Callable[[str], None] | None = None,
    overwrite: bool = False,
) -> Path:
    """Re-quantize `src` to `weights_type` and return the new file's path.

    Without `out` the result goes to the cache (`cache_dir()/quantized`, keyed by the source's
    fingerprint and the type) and a cached file is returned at once. llama.cpp's quantizer runs
    in a separate process, so a crash in it is an error here, not a dead caller. `on_progress`
    gets the fraction of tensors done; `on_warning` the re-quantization warning, if any. A file
    already at `out` is replaced only with `overwrite`.
    """
    source = Path(src)
    target = weights_type_name(weights_type)
    model = read_gguf(source)  # GGUFError (one line) for anything that is not a readable GGUF
    if out is None:
        destination = cached_quantized_path(source, target)
        if destination.is_file():
            if on_progress is not None:
                on_progress(1.0)
            return destination
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise WorkbenchError(f"cannot create the cache folder ({error.strerror or error})",
                                 where=str(destination.parent),
                                 fix="Point WORKBENCH_CACHE_DIR at a folder you can write to, or give -o") from None
    else:
        destination = output_path(source, target, Path(out), overwrite=overwrite)
    check_writable_folder(destination.parent)
    warning = requantize_warning(model, target)
    if warning and on_warning is not None:
        on_warning(warning)
    _run_quantize_process(source, destination, ggml_types.QUANT_TYPES[target], on_progress)
    return destination


def _run_quantize_process(
    source: Path, destination: Path, ftype_id: int, on_progress: Callable[[float], None] | None
) -> None:

    partial = partial_path(destination)
    log_path = new_log_file("quantize")  # the state folder, pruned: a killed client leaves no /tmp litter
    process, ours = start_child("workbench.core.engine.quantize_worker",
                                (str(source), str(partial), str(ftype_id), log_path), log_path)
    try:
        outcome = _follow(ours, process, on_progress)
        if outcome[0] == "done":
            os.replace(partial, destination)  # the cache never holds half a file
            return
        message, log_tail = (outcome[1], outcome[2]) if outcome[0] == "failed" else _death(process, log_path)
        detail = f" Last log line: {log_tail[-1].strip()}" if log_tail and log_tail[-1].strip() not in message else ""
        fix = ("This type needs an importance matrix (llama-imatrix), which the workbench does not make: "
               "pick another type, e.g. Q4_K_M" if "imatrix" in message else "Pick another type, or check the source file")
        raise WorkbenchError(f"{message.rstrip('!. ')}.{detail}".rstrip("."), where=str(source), fix=fix)
    finally:
        process.kill()
        process.join(timeout=5)
        process.close()
        ours.close()
        partial.unlink(missing_ok=True)
        Path(log_path).unlink(missing_ok=True)


def _follow(conn, process, on_progress) -> tuple:  # noqa: ANN001 - multiprocessing objects
    while True:
        ready = wait([conn] if process.sentinel is None else [conn, process.sentinel])
        if conn in ready:
            try:
                message = conn.recv()
            except EOFError:
                return ("died",)
            if message[0] == "progress":
                if on_progress is not None:
                    on_progress(message[1])
                continue
            return message
        if not conn.poll():
            return ("died",)


def _death(process, log_path: str) -> tuple[str, tuple[str, ...]]:  # noqa: ANN001

    process.join(timeout=5)
    return f"the quantize process died ({describe_exit(process.exitcode)})", read_log_tail(log_path)
