"""Keyset cursors shared by every list route."""

from __future__ import annotations

from relay.errors import ParameterInvalid
from relay.ids import is_id


def require_cursors(
    starting_after: str | None, ending_before: str | None, *, prefix: str, noun: str
) -> None:
    """At most one cursor, and it must be an id of the listed kind."""
    if starting_after is not None and ending_before is not None:
        raise ParameterInvalid(
            "Use starting_after or ending_before, not both.", param="ending_before"
        )
    for name, cursor in (("starting_after", starting_after), ("ending_before", ending_before)):
        if cursor is not None and not is_id(cursor, prefix):
            raise ParameterInvalid(f"{name} must be {noun}.", param=name)
