"""What the console shows of a receiver's answer: printable text, short, never raw bytes."""

from __future__ import annotations

from relay.webhooks.transport import EXCERPT_CHARACTERS, excerpt


def test_a_short_answer_is_shown_as_it_is() -> None:
    assert excerpt(b'{"error": "bad signature"}') == '{"error": "bad signature"}'


def test_control_characters_and_runs_of_space_become_one_space() -> None:
    assert excerpt(b"line one\r\n\x1b[31mline\ttwo\x00") == "line one [31mline two"


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert excerpt(b"caf\xe9 ok") == "caf\ufffd ok"


def test_a_long_answer_is_cut_to_the_excerpt_length() -> None:
    shown = excerpt(b"x" * 100_000)
    assert shown == "x" * EXCERPT_CHARACTERS


def test_an_empty_or_blank_answer_shows_nothing() -> None:
    assert excerpt(b"") is None
    assert excerpt(b" \r\n\t") is None
