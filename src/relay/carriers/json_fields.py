"""A provider's JSON read field by field: a value counts only with the type documented."""

from __future__ import annotations

__all__ = ["nonempty_text", "whole_number"]


def nonempty_text(value: object) -> str | None:
    """`value` when it is a string with something in it."""
    return value if isinstance(value, str) and value else None


def whole_number(value: object) -> int | None:
    """`value` when it is an integer (JSON's true and false are not)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
