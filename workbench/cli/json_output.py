"""JSON output for the headless commands' --json flag."""

from __future__ import annotations

import json
import sys


def write_json(data: object) -> None:
    """`data` to stdout as indented JSON ending in a newline (as every --json prints it)."""
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")
