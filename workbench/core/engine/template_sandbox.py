"""A Jinja sandbox that renders a GGUF's chat template under a step, size and time budget."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

# A real template spends a few dozen steps (calls, attribute reads, loop turns, outputs) per
# message; a quarter of a million covers thousands of messages and stops a nested loop in
# about a second on a 2-core machine.
MAX_STEPS = 250_000
MAX_SECONDS = 2.0
# Characters (or list items) all operations of one render may create together: the output,
# every intermediate string. Scales with the messages so a long pasted document still renders.
MIN_CHARS = 4 * 1024 * 1024
CHARS_PER_INPUT_CHAR = 16
# A width, indent or count argument larger than this is an attack, not formatting.
MAX_WIDTH = 10_000
MAX_JSON_INDENT = 64

_COUNT_FILTER, _CONCAT_FILTER, _OUT_FILTER = "_wb_count", "_wb_concat", "_wb_out"
_FORMAT_WIDTH = re.compile(r"[*]|\d{5,}")  # a `*` width or a 5-digit width/precision in a format string
# Filters and str methods whose int arguments size their output.
_WIDTH_FILTERS = frozenset({"center", "indent", "wordwrap", "truncate", "batch", "slice"})
_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})


class TemplateRefused(Exception):
    """The template went over its budget; `reason` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Budget:
    steps: int
    chars: int
    deadline: float

    def step(self) -> None:
        self.steps -= 1
        if self.steps < 0:
            raise TemplateRefused(f"it ran more than {MAX_STEPS:,} steps (a loop that does not end soon)")
        if time.monotonic() > self.deadline:
            raise TemplateRefused(f"it ran longer than {MAX_SECONDS:g} s")

    def spend(self, size: int) -> None:
        if size > self.chars:
            raise TemplateRefused("it builds more text than the conversation can need (a string or list bomb)")
        self.chars -= size


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, list, tuple, dict, bytes)) else 0


class _Bounding(NodeTransformer):
    """Routes every loop's iterable, `~` concatenation and output through the budget's filters."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, _COUNT_FILTER, [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Filter(nodes.List(node.nodes, lineno=node.lineno), _CONCAT_FILTER, [], [], None, None,
                            lineno=node.lineno)

    def visit_Output(self, node: nodes.Output) -> nodes.Node:
        self.generic_visit(node)
        node.nodes = [nodes.Filter(child, _OUT_FILTER, [], [], None, None, lineno=node.lineno) for child in node.nodes]
        return node


class _IgnoreGenerationTags(jinja2.ext.Extension):
    """HuggingFace's `{% generation %}` tag passes its body through (as llama-cpp-python's formatter does)."""

    tags = {"generation"}

    def parse(self, parser: Any) -> Any:
        parser.stream.skip(1)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """jinja2's immutable sandbox with llama-cpp-python's chat options, counting what a render spends."""

    intercepted_binops = frozenset({"+", "*", "%", "**"})

    def __init__(self) -> None:
        super().__init__(loader=jinja2.BaseLoader(), trim_blocks=True, lstrip_blocks=True,
                         extensions=[_IgnoreGenerationTags, jinja2.ext.loopcontrols])
        self.budget = _Budget(0, 0, 0.0)
        self.globals.pop("lipsum", None)  # unbounded text on demand, and no chat template uses it
        for name, function in list(self.filters.items()):
            self.filters[name] = self._bounded_filter(name, function)
        self.filters["tojson"] = self._bounded_filter("tojson", _tojson)
        self.filters[_COUNT_FILTER] = self._count
        self.filters[_CONCAT_FILTER] = self._concat
        self.filters[_OUT_FILTER] = self._out

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        return _Bounding().visit(super()._parse(source, name, filename))

    def start(self, input_chars: int) -> None:
        self.budget = _Budget(MAX_STEPS, max(MIN_CHARS, CHARS_PER_INPUT_CHAR * input_chars),
                              time.monotonic() + MAX_SECONDS)

    # -- the budget's filters -------------------------------------------------------------
    def _count(self, iterable: Iterable[Any]) -> Iterator[Any]:
        budget = self.budget
        for item in iterable:
            budget.step()
            yield item

    def _concat(self, parts: list[Any]) -> str:
        texts = [str(part) for part in parts]
        self.budget.step()
        self.budget.spend(sum(map(len, texts)))
        return "".join(texts)

    def _out(self, value: Any) -> Any:
        self.budget.step()
        self.budget.spend(len(str(value)))
        return value

    # -- sandbox hooks ---------------------------------------------------------------------
    def getattr(self, obj: Any, attribute: str) -> Any:
        self.budget.step()
        value = super().getattr(obj, attribute)
        if isinstance(obj, str) and attribute in ("format", "format_map") and callable(value):
            return self._bounded_format(obj, value)
        return value

    def _bounded_format(self, text: str, format_function: Any) -> Any:
        """str.format (the sandbox's safe one), refused before it would build more than the budget."""
        _check_format(text)

        def bounded(*args: Any, **kwargs: Any) -> str:
            fields = text.count("{")
            self.budget.spend(len(text) + fields * sum(len(str(v)) for v in (*args, *kwargs.values())))
            return format_function(*args, **kwargs)

        return bounded

    def getitem(self, obj: Any, argument: Any) -> Any:
        self.budget.step()
        return super().getitem(obj, argument)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self.budget.step()
        self.budget.spend(_binop_size(operator, left, right))
        result = super().call_binop(context, operator, left, right)
        self.budget.spend(_size(result))
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - jinja's signature
        __self.budget.step()
        name = getattr(__obj, "__name__", "")
        if isinstance(getattr(__obj, "__self__", None), str):
            if name in _WIDTH_METHODS:
                _check_widths(name, args, kwargs)
            __self.budget.spend(_method_size(__obj, name, args))
        result = super().call(__context, __obj, *args, **kwargs)
        __self.budget.spend(_size(result))
        return result

    def _bounded_filter(self, name: str, function: Any) -> Any:
        pass_arg = getattr(function, "jinja_pass_arg", None)

        def bounded(*args: Any, **kwargs: Any) -> Any:
            self.budget.step()
            value_at = 1 if pass_arg is not None else 0  # context/eval-context/environment comes first
            if name == "format":
                _check_format(args[value_at] if len(args) > value_at else "")
            elif name in _WIDTH_FILTERS:
                _check_widths(name, args[value_at + 1:], kwargs)
            self.budget.spend(_filter_size(name, args[value_at:], kwargs))
            result = function(*args, **kwargs)
            if isinstance(result, (list, tuple, str, dict)):
                self.budget.spend(len(result))
            return result

        if pass_arg is not None:
            bounded.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
        return bounded


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    """Transformers' tojson (as llama-cpp-python's formatter has it), its indent bounded."""
    if indent is not None and (not isinstance(indent, int) or not 0 <= indent <= MAX_JSON_INDENT):
        raise TemplateRefused(f"tojson(indent={indent!r}) is past {MAX_JSON_INDENT}")
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _check_widths(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_WIDTH:
            raise TemplateRefused(f"{name or 'a call'} was given {value:,} (more than {MAX_WIDTH:,})")


def _check_format(text: Any) -> None:
    if isinstance(text, str) and _FORMAT_WIDTH.search(text.replace("%%", "")):
        raise TemplateRefused("a format string asks for a huge or a `*` width")


def _binop_size(operator: str, left: Any, right: Any) -> int:
    """How much the operation would create, known before it runs."""
    if operator == "+":
        return _size(left) + _size(right)
    if operator == "*":
        if isinstance(left, int) and isinstance(right, int):
            return (abs(left).bit_length() + abs(right).bit_length()) // 8
        sized, count = (left, right) if isinstance(right, int) else (right, left)
        return _size(sized) * max(0, count) if isinstance(count, int) else 0
    if operator == "**" and isinstance(left, int) and isinstance(right, int):
        return abs(left).bit_length() * max(0, right) // 8
    if operator == "%" and isinstance(left, str):
        _check_format(left)
        return len(left) + sum(map(_size, right if isinstance(right, tuple) else (right,)))
    return 0


def _method_size(function: Any, name: str, args: tuple[Any, ...]) -> int:  # function: a bound str method
    """What a str method would create (format/join/replace), before it runs."""
    owner = function.__self__
    if name == "join" and args and isinstance(args[0], (list, tuple)):
        return sum(map(_size, args[0])) + len(owner) * len(args[0])
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        return len(owner) + (owner.count(args[0]) if args[0] else len(owner) + 1) * len(args[1])
    return 0


def _filter_size(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """What a filter would create (join, replace, indent, center), before it runs."""
    value = args[0] if args else None
    if name == "join" and isinstance(value, (list, tuple)):
        sep = args[1] if len(args) > 1 else kwargs.get("d", "")
        return sum(len(str(v)) for v in value) + _size(sep) * len(value)
    if name == "replace" and isinstance(value, str) and len(args) >= 3:
        old, new = str(args[1]), str(args[2])
        return len(value) + (value.count(old) if old else len(value) + 1) * len(new)
    if name == "indent" and isinstance(value, str):
        width = args[1] if len(args) > 1 else kwargs.get("width", 4)
        return len(value) + (value.count("\n") + 1) * (len(width) if isinstance(width, str) else int(width))
    return _size(value)
