"""A linear pass over TOML text before tomllib sees it: nesting depth and dotted-key depth, bounded."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_NESTING = 32  # arrays/inline tables inside each other; presets need 2, tomllib recurses until it crashes
# The deepest key path presets and device profiles have is speed.t2.read_gbs.Q8_0 (a thread table's
# rate per weight type). tomllib's cost grows with the square of a dotted key's parts: 20,000 parts
# (40 KB) took 5 s and 1.6 GB, 80,000 ran out of memory.
MAX_KEY_PARTS = 4
_PLAIN_RUN = re.compile(r"[^\n#\"'\[\]{},]+")  # characters of a value that open or close nothing
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class ShapeProblem:
    """Why the text is refused before parsing: `kind` is "nesting" or "key", at 1-based `line`."""

    kind: str
    line: int


def shape_problem(text: str) -> ShapeProblem | None:
    """The first place the text nests deeper than MAX_NESTING or has a key of more than
    MAX_KEY_PARTS parts (a table header's parts count toward the keys under it), else None.

    The pass stops at the first problem, so its cost is linear in the text however deep the
    attack goes. Text that is not valid TOML is left to tomllib to report.
    """
    return _Scan(text).run()


class _Scan:
    def __init__(self, text: str) -> None:
        self.text = text
        self.index = 0
        self.line = 1
        self.open: list[str] = []  # the '[' and '{' of values not yet closed
        self.header_parts = 0  # parts of the [table] header the current keys sit under

    def run(self) -> ShapeProblem | None:
        text, length = self.text, len(self.text)
        line_start = True
        while self.index < length:
            char = text[self.index]
            if char == "\n":
                self.line += 1
                self.index += 1
                line_start = not self.open
            elif char in " \t\r":
                self.index += 1
            elif char == "#":
                end = text.find("\n", self.index)
                self.index = length if end < 0 else end
            elif line_start:
                line_start = False
                if char == "[":  # a [table] or [[array of tables]] header
                    self.index += 2 if text.startswith("[[", self.index) else 1
                    self.header_parts = self.key_parts()
                    if self.header_parts > MAX_KEY_PARTS:
                        return ShapeProblem("key", self.line)
                elif self.header_parts + self.key_parts() > MAX_KEY_PARTS:
                    return ShapeProblem("key", self.line)
            elif char in "\"'":
                self.skip_string()
            elif char in "[{":
                self.open.append(char)
                if len(self.open) > MAX_NESTING:
                    return ShapeProblem("nesting", self.line)
                self.index += 1
                if char == "{" and self.key_parts() > MAX_KEY_PARTS:
                    return ShapeProblem("key", self.line)
            elif char in "]}":
                if self.open:
                    self.open.pop()
                self.index += 1
            elif char == ",":
                self.index += 1
                if self.open and self.open[-1] == "{" and self.key_parts() > MAX_KEY_PARTS:
                    return ShapeProblem("key", self.line)
            else:
                match = _PLAIN_RUN.match(text, self.index)
                self.index = match.end() if match else self.index + 1
        return None

    def key_parts(self) -> int:
        """Read a (dotted) key at the index; its number of parts, stopping once past the limit."""
        text, length = self.text, len(self.text)
        parts = 0
        while True:
            while self.index < length and text[self.index] in " \t":
                self.index += 1
            if self.index >= length:
                return parts
            char = text[self.index]
            if char in "\"'":
                self.skip_string(single_line=True)
            else:
                bare = _BARE_KEY.match(text, self.index)
                if bare is None:
                    return parts
                self.index = bare.end()
            parts += 1
            if parts > MAX_KEY_PARTS:
                return parts
            while self.index < length and text[self.index] in " \t":
                self.index += 1
            if self.index >= length or text[self.index] != ".":
                return parts
            self.index += 1

    def skip_string(self, *, single_line: bool = False) -> None:
        """Move past the string that starts at the index (basic or literal, one line or three quotes)."""
        text, length = self.text, len(self.text)
        char = text[self.index]
        quote = text[self.index : self.index + 3] if not single_line and text[self.index : self.index + 3] in ('"""', "'''") else char
        self.index += len(quote)
        while self.index < length and not text.startswith(quote, self.index):
            if text[self.index] == "\n":
                if len(quote) == 1:
                    return  # an unclosed one-line string: tomllib reports it
                self.line += 1
            elif text[self.index] == "\\" and quote[0] == '"':
                self.index += 1  # an escaped character, possibly a quote or a line end
                if text.startswith("\n", self.index):
                    self.line += 1
            self.index += 1
        self.index += len(quote)
