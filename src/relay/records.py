"""Frozen records copied with some fields changed: one dict update, not a rebuild.

`dataclasses.replace` gathers every field into keyword arguments and runs the
generated `__init__`, which sets each field of a frozen class through
`object.__setattr__`: about 3,000 instructions a field, 68,000 for a
Verification, and a send copies a handful of records (the attempts as each
answer shows them, the verification with its attempts). A copy here takes the
original's fields as they are, checked when it was made, and sets the changed
ones. The models wrap it in typed methods (`Verification.with_attempts`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

R = TypeVar("R")


def changed(record: R, /, **values: Any) -> R:
    """What `dataclasses.replace(record, **values)` makes, for a dataclass whose fields
    are all set by its `__init__`, with no `__post_init__` and no slots."""
    kind: type = type(record)
    names = _fields_of(kind)
    if not names.issuperset(values):
        unknown = ", ".join(sorted(set(values) - names))
        raise TypeError(f"{kind.__name__} has no field {unknown}")
    copy: R = object.__new__(kind)
    vars(copy).update(vars(record), **values)
    return copy


@functools.cache
def _fields_of(kind: type) -> frozenset[str]:
    """The class's field names, once it is known to be copied correctly this way."""
    found = dataclasses.fields(kind)
    if hasattr(kind, "__post_init__") or hasattr(kind, "__slots__"):
        raise TypeError(f"{kind.__name__} is not copied field by field")
    if not all(field.init for field in found):
        raise TypeError(f"{kind.__name__} has a field its __init__ does not set")
    return frozenset(field.name for field in found)
