"""Frozen records made and copied with their fields set in one dict update.

A frozen dataclass's generated `__init__` sets each field through
`object.__setattr__`, about 1,500 instructions a field: 34,000 to make a
Verification, which a list page makes ten of. `dataclasses.replace` runs that
`__init__` again after gathering every field into keyword arguments (68,000
for a Verification), and a send copies a handful of records. `fast_init`
gives a frozen record an `__init__` of the same signature that sets its fields
in one update of the instance's dict (a Verification 15,000); `changed` copies
one with some fields changed (3,000), the others as they are, checked when it
was made. The models wrap `changed` in typed methods (`Verification.with_attempts`).
Both refuse a class whose `__init__` does more than set its fields.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
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


def fast_init(kind: type[R]) -> type[R]:
    """Over `@dataclass(frozen=True)`: the same `__init__` (parameters, defaults, default
    factories, keyword-only fields), storing the fields in one update of the instance's
    dict instead of one `object.__setattr__` each."""
    made_as: Any = kind
    fields = dataclasses.fields(made_as)
    names = _fields_of(made_as)
    if not made_as.__dataclass_params__.frozen:
        raise TypeError(f"{kind.__name__} is not frozen: its own __init__ is as fast")
    # A field with a default factory defaults to the dataclass's own marker, which its
    # signature shows as `<factory>`.
    own = inspect.signature(kind.__init__).parameters
    scope: dict[str, Any] = {}
    positional, keyword, made = ["self"], list[str](), list[str]()
    for field in fields:
        into = keyword if field.kw_only else positional
        if field.default is not dataclasses.MISSING:
            scope[f"default_{field.name}"] = field.default
            into.append(f"{field.name}=default_{field.name}")
        elif field.default_factory is not dataclasses.MISSING:
            scope[f"factory_{field.name}"] = field.default_factory
            scope[f"marker_{field.name}"] = own[field.name].default
            into.append(f"{field.name}=marker_{field.name}")
            made.append(
                f" if {field.name} is marker_{field.name}: {field.name} = factory_{field.name}()\n"
            )
        else:
            into.append(field.name)
    parameters = ", ".join([*positional, *(["*", *keyword] if keyword else [])])
    stored = ", ".join(f"{name!r}: {name}" for name in (field.name for field in fields))
    source = f"def __init__({parameters}):\n{''.join(made)} self.__dict__.update({{{stored}}})\n"
    exec(source, scope)  # noqa: S102  # made here from the class's own field names
    init = scope["__init__"]
    init.__qualname__ = f"{kind.__qualname__}.__init__"
    init.__module__ = kind.__module__
    init.__doc__ = kind.__init__.__doc__
    init.__annotations__ = dict(kind.__init__.__annotations__)
    init.__wrapped__ = kind.__init__  # the dataclass's own, which the tests hold it to
    kind.__init__ = init  # type: ignore[method-assign]
    assert names == frozenset(field.name for field in fields)
    return kind


@functools.cache
def _fields_of(kind: type) -> frozenset[str]:
    """The class's field names, once it is known to be made and copied this way."""
    found = dataclasses.fields(kind)
    if hasattr(kind, "__post_init__") or hasattr(kind, "__slots__"):
        raise TypeError(f"{kind.__name__} is not copied field by field")
    if not all(field.init for field in found):
        raise TypeError(f"{kind.__name__} has a field its __init__ does not set")
    return frozenset(field.name for field in found)
