"""``Frozen``: the base of the core's frozen dataclasses, so that they pickle and copy.

Why: ``setup.py`` compiles the core with mypyc, and a compiled frozen dataclass cannot be
unpickled or copied: both rebuild it by assigning its fields one by one, which a frozen class
refuses (mypyc/mypyc#1213). Rebuilding through ``__init__`` works the same compiled and pure, so
game states can still be copied and sent between processes (``audit --jobs``, a caller's own
``multiprocessing``).
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class Frozen:
    """Pickles and copies a frozen dataclass as a call of its class with its fields in order.

    Only for dataclasses whose every field is an ``__init__`` argument that takes back what
    the attribute holds.
    """

    __slots__ = ()

    def __reduce__(self) -> tuple[type[Frozen], tuple[object, ...]]:
        instance = cast("DataclassInstance", self)
        return (type(self), tuple([getattr(self, field.name) for field in fields(instance)]))
