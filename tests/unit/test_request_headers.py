"""A request's headers by name: made once per request, the last of a repeated one."""

from __future__ import annotations

from relay.web.headers import headers_of


def test_the_headers_are_read_once_and_the_last_of_a_repeated_one_counts() -> None:
    scope = {"headers": [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")]}
    found = headers_of(scope)
    assert found == {b"a": b"3", b"b": b"2"} == dict(scope["headers"])
    scope["headers"] = []  # read already: not walked again
    assert headers_of(scope) is found
