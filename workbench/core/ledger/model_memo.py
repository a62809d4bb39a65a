"""Results computed from one ModelInfo, kept while it is the same object.

The fit search and the live ledger price hundreds of presets of one file; the walk over its tensor
table (what the quantizer makes of each tensor, which ones the CPU repacks) is the same for each.
The key is the model's identity, not its value: hashing a table of thousands of tensors would cost
what the cache saves, and the entry holds the model so that its id is not reused while cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from functools import wraps
from typing import Any, TypeVar

from workbench.core.gguf.model_info import ModelInfo

T = TypeVar("T")
ENTRIES = 32


def by_model(fn: Callable[..., T]) -> Callable[..., T]:
    """Memoizes fn(model, *args) (hashable args) on the model's identity, the last ENTRIES calls."""
    cache: OrderedDict[tuple[Hashable, ...], tuple[ModelInfo, T]] = OrderedDict()
    lock = threading.Lock()

    @wraps(fn)
    def cached(model: ModelInfo, *args: Any) -> T:
        key = (id(model), *args)
        with lock:
            hit = cache.get(key)
            if hit is not None and hit[0] is model:
                cache.move_to_end(key)
                return hit[1]
        value = fn(model, *args)
        with lock:
            cache[key] = (model, value)
            while len(cache) > ENTRIES:
                cache.popitem(last=False)
        return value

    return cached
