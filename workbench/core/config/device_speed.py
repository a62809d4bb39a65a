"""A device profile's speed figures: effective bandwidth and compute from published runs, and probe-measured rates per thread count."""

from __future__ import annotations

import math
import re
from typing import Any

from workbench.core.config.preset import ThreadRates
from workbench.core.config.toml_checks import TomlSource, check_known_keys, get_str, wrong_type
from workbench.core.errors import PresetError
from workbench.core.gguf.ggml_types import GGML_TYPES_BY_NAME

SPEED_KEYS = ("effective_bandwidth_gbs", "effective_gflops", "effective_backend", "speed")
BACKENDS = ("cpu", "cuda", "vulkan")  # where the published runs behind the effective figures ran
THREAD_KEYS = ("token_us", "layer_us", "node_us", "read_gbs", "kv_read_gbs", "prefill_token_us", "prefill_layer_us",
               "prefill_element_ns", "prefill_gflops", "attn_gflops", "prefill_attn_points", "cached_read_gbs",
               "cache_mb", "row_ns", "node_us_range", "read_gbs_range", "cached_read_gbs_range", "unmapped_read_gbs")
_THREAD_TABLE = re.compile(r"^t([1-9][0-9]{0,3})$")  # [speed.t4]: the rates at 4 threads
MAX_THREAD_TABLES = 64
# Bounds: a fixed cost above a second per token, or a rate beyond any memory system or chip made,
# is a damaged file, not a measurement.
_MAX_US = 1e6
_MAX_GBS = 100_000.0
_MAX_GFLOPS = 1e7


def _number(table: dict[str, Any], key: str, source: TomlSource, where_table: str | None, *, minimum: float,
            maximum: float, example: str, strict_minimum: bool = True, where: str | None = None) -> float:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong_type(key, value, "a number", example, source, where_table)
    low_ok = value > minimum if strict_minimum else value >= minimum
    if not math.isfinite(value) or not low_ok or value > maximum:
        above = "above" if strict_minimum else "from"
        raise PresetError(f"{key} = {value} is out of range", where=where or source.where(key, where_table),
                          fix=f"Use a value {above} {minimum:g} and at most {maximum:g}, e.g. {example}")
    return float(value)


def _per_type(table: dict[str, Any], key: str, source: TomlSource, where_table: str, maximum: float,
              example: str) -> tuple[tuple[str, float], ...]:
    value = table.get(key, {})
    if not isinstance(value, dict):
        raise wrong_type(key, value, "a table of ggml type = rate", example, source, where_table)
    rates = []
    # An entry's line: in a [speed.tN.read_gbs] table of its own, or the inline table's line.
    sub_table = f"{where_table}.{key}"
    for type_name in value:
        where = source.where(type_name, sub_table)
        where = where if where != source.label else source.where(key, where_table)
        if type_name.upper() not in GGML_TYPES_BY_NAME:
            raise PresetError(f'{key} names "{type_name}", which is not a ggml type', where=where,
                              fix=f"Use llama.cpp's type names, e.g. {example}")
        rates.append((type_name.upper(), _number(value, type_name, source, where_table, minimum=0, maximum=maximum,
                                                 example=example, where=where)))
    return tuple(rates)


def _points(table: dict[str, Any], source: TomlSource, where_table: str) -> tuple[tuple[float, float], ...]:
    """prefill_attn_points = [[score MB, ns], ...]: at most 8 pairs of positive numbers."""
    value = table.get("prefill_attn_points", [])
    example = "prefill_attn_points = [[1.3, 4.0], [10.5, 7.3]]"
    if not isinstance(value, list) or len(value) > 8 or not all(
            isinstance(pair, list) and len(pair) == 2 and all(
                isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and 0 < x <= _MAX_US
                for x in pair) for pair in value):
        raise PresetError("prefill_attn_points is not a list of up to 8 [score MB, ns] pairs of positive numbers",
                          where=source.where("prefill_attn_points", where_table), fix=f"Write it like {example}")
    return tuple(sorted((float(mb), float(ns)) for mb, ns in value))


def _range(table: dict[str, Any], key: str, source: TomlSource, where_table: str, maximum: float,
           example: str) -> tuple[float, float] | tuple[()]:
    """`key = [lowest, highest]`: two numbers from 0 to `maximum`, the first not above the second."""
    if key not in table:
        return ()
    value = table[key]
    if not (isinstance(value, list) and len(value) == 2 and all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and 0 <= x <= maximum
            for x in value) and value[0] <= value[1]):
        raise PresetError(f"{key} is not a [lowest, highest] pair of numbers from 0 to {maximum:g}",
                          where=source.where(key, where_table), fix=f"Write it like {example}")
    return float(value[0]), float(value[1])


def _thread_rates(name: str, table: Any, source: TomlSource) -> ThreadRates:
    where_table = f"speed.{name}"
    if not isinstance(table, dict):
        raise wrong_type(name, table, "a table", f"[speed.{name}] with lines like token_us = 120", source, "speed")
    check_known_keys(table, THREAD_KEYS, source, "device profile", table=where_table)
    us = {key: _number(table, key, source, where_table, minimum=0, maximum=_MAX_US, example=f"{key} = 120",
                       strict_minimum=False) if key in table else 0.0
          for key in ("token_us", "layer_us", "node_us", "prefill_token_us", "prefill_layer_us", "prefill_element_ns",
                      "cache_mb", "row_ns")}
    rates = {key: _number(table, key, source, where_table, minimum=0, maximum=maximum, example=f"{key} = 40")
             if key in table else None
             for key, maximum in (("kv_read_gbs", _MAX_GBS), ("attn_gflops", _MAX_GFLOPS), ("unmapped_read_gbs", _MAX_GBS))}
    read = _per_type(table, "read_gbs", source, where_table, _MAX_GBS, "read_gbs = { Q8_0 = 12.5 }")
    if not read:
        raise PresetError(f"[speed.{name}] has no read_gbs", where=source.where(where_table),
                          fix="Add the measured read rate per weight type, e.g. read_gbs = { Q8_0 = 12.5 }")
    return ThreadRates(
        threads=int(_THREAD_TABLE.match(name).group(1)),  # type: ignore[union-attr]  # checked by the caller
        token_us=us["token_us"], layer_us=us["layer_us"], read_gbs=read, kv_read_gbs=rates["kv_read_gbs"],
        prefill_token_us=us["prefill_token_us"], prefill_layer_us=us["prefill_layer_us"],
        prefill_gflops=_per_type(table, "prefill_gflops", source, where_table, _MAX_GFLOPS,
                                 "prefill_gflops = { Q8_0 = 80 }"),
        attn_gflops=rates["attn_gflops"], prefill_attn_points=_points(table, source, where_table),
        cached_read_gbs=_per_type(table, "cached_read_gbs", source, where_table, _MAX_GBS,
                                  "cached_read_gbs = { Q8_0 = 25 }"),
        cache_mb=us["cache_mb"], row_ns=us["row_ns"], prefill_element_ns=us["prefill_element_ns"],
        node_us=us["node_us"],
        node_us_range=_range(table, "node_us_range", source, where_table, _MAX_US, "node_us_range = [0.24, 0.45]"),
        read_gbs_range=_range(table, "read_gbs_range", source, where_table, _MAX_GBS, "read_gbs_range = [18.8, 23.7]"),
        cached_read_gbs_range=_range(table, "cached_read_gbs_range", source, where_table, _MAX_GBS,
                                     "cached_read_gbs_range = [25.0, 34.9]"),
        unmapped_read_gbs=rates["unmapped_read_gbs"],
    )


def speed_fields(data: dict[str, Any], source: TomlSource) -> dict[str, Any]:
    """`effective_bandwidth_gbs`, `effective_gflops` and the `[speed.tN]` tables, checked and bounded."""
    fields: dict[str, Any] = {"effective_bandwidth_gbs": None, "effective_gflops": None, "thread_rates": ()}
    backend = get_str(data, "effective_backend", "cpu", source, example='effective_backend = "cuda"').lower()
    if backend not in BACKENDS:
        raise PresetError(f'effective_backend = "{backend}" is not a backend the workbench models',
                          where=source.where("effective_backend"), fix=f"Use one of: {', '.join(BACKENDS)}")
    fields["effective_backend"] = backend
    for key, maximum in (("effective_bandwidth_gbs", _MAX_GBS), ("effective_gflops", _MAX_GFLOPS)):
        if key in data:
            fields[key] = _number(data, key, source, None, minimum=0, maximum=maximum,
                                  example=f"{key} = 10")
    speed = data.get("speed", {})
    if not isinstance(speed, dict):
        raise wrong_type("speed", speed, "a table", "[speed.t1] with lines like token_us = 120", source)
    if len(speed) > MAX_THREAD_TABLES:
        raise PresetError(f"[speed] has {len(speed)} thread tables", where=source.where("speed"),
                          fix=f"Keep at most {MAX_THREAD_TABLES} ([speed.t1], [speed.t2], ...)")
    tables = []
    for name, table in speed.items():
        if not _THREAD_TABLE.match(name):
            raise PresetError(f'[speed.{name}] is not a thread count', where=source.where(f"speed.{name}"),
                              fix="Name the tables by thread count: [speed.t1], [speed.t4], ...")
        tables.append(_thread_rates(name, table, source))
    fields["thread_rates"] = tuple(sorted(tables, key=lambda rates: rates.threads))
    return fields
