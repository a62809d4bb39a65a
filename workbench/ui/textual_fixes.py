"""A workaround for a Textual defect that costs a long session its memory (applied when the app is made)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

_applied = False


def release_styles_caches() -> None:
    """Stop Textual's StylesCache.get_inner_outer from keeping every widget's rendered lines alive.

    Textual 8 decorates that *instance* method with lru_cache(1024), so the cache's keys hold up to
    1024 StylesCache objects with all the strips they drew: every chat bubble ever shown, ~120 KiB
    an answer here, until 1024 widgets have come and gone (Textualize/textual#6665, open). The
    result depends only on the two colours (the method never reads its `self`), so Textual's own
    code is cached on them alone.
    """
    global _applied
    if _applied:
        return
    from textual._styles_cache import StylesCache  # deferred: patched when the app is made, never at import

    original = getattr(StylesCache.get_inner_outer, "__wrapped__", None)
    if original is None:  # a Textual that no longer caches it this way: nothing to release
        _applied = True
        return

    @lru_cache(1024)
    def inner_outer(base_background: Any, background: Any) -> Any:
        return original(None, base_background, background)

    def get_inner_outer(self: Any, base_background: Any, background: Any) -> Any:
        return inner_outer(base_background, background)

    StylesCache.get_inner_outer = get_inner_outer  # type: ignore[method-assign]
    _applied = True
