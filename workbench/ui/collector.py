"""How often Python's cycle collector runs under the app.

A Textual screen is some hundred thousand objects (widgets, styles, cached strips), and each redraw
allocates thousands more. At Python's default pace (a young collection every 700 allocations net of
frees, a full one when the old generation grew by a quarter) the collector took 17% of the CPU of the
UI tests (31% of test_ui_flows and test_ui_presets), most of it in full collections walking every
object the imports made. Before the app runs, what exists then is frozen (never scanned again:
modules, classes, the catalogs read at start) and young collections wait for 5,000 allocations.
Reference counting still frees almost everything at once; only cycles wait a little longer.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 5000


def pace_collector() -> None:
    """Freeze what exists now and collect the young generation every YOUNG_THRESHOLD allocations."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
