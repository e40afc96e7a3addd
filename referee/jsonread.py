"""Reading JSON text that other tools wrote: a key given twice in one object."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["RepeatedKeyError", "loads_once"]


class RepeatedKeyError(ValueError):
    """A name given twice in one object: JSON that readers read differently."""

    key: str

    def __init__(self, key: str) -> None:
        super().__init__(
            f"the key {key!r} appears twice in one object (JSON readers differ on which one counts)"
        )
        self.key = key


class _Objects:
    """``json.loads``'s ``object_pairs_hook``: builds each object and notes the first name
    given twice. It does not raise, so a text that is not JSON at all is still reported as
    such, whatever it repeats before the fault."""

    __slots__ = ("repeated",)

    def __init__(self) -> None:
        self.repeated: str | None = None

    def __call__(self, pairs: list[tuple[str, object]]) -> dict[str, object]:
        obj = dict(pairs)
        if len(obj) != len(pairs) and self.repeated is None:
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    self.repeated = key
                    break
                seen.add(key)
        return obj


def loads_once(text: str, **options: Any) -> tuple[object, RepeatedKeyError | None]:
    """``json.loads(text, **options)`` and, when some object names a key twice, the error
    saying so (None otherwise). Python keeps the last of a repeated name, other readers the
    first (RFC 8259 §4: names "SHOULD be unique"), so such a text has no one meaning: a record
    with a second ``hands`` (two records pasted together) hid the first from the audit, which
    called it legal. The value (the last of each repeated name) lets a caller still say which
    question it refuses (a query's ``id``)."""
    objects = _Objects()
    value = json.loads(text, object_pairs_hook=objects, **options)
    return value, None if objects.repeated is None else RepeatedKeyError(objects.repeated)
