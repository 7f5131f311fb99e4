"""GSM 03.38 alphabet, septets, and the segments each SMS is billed for."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay.sms.encoding import (
    choose_encoding,
    encode_gsm7,
    is_gsm7,
    segment_count,
    septet_length,
)

EXTENSION_CHARS = "^{}\\[~]|€\f"
GSM_ALPHABET = (
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
EMOJI = "\U0001f600"  # outside the BMP: two UTF-16 code units

GSM_SAMPLE = ["a", "9", " ", "é", "€", "["]
OTHER_SAMPLE = ["ç", "ó", EMOJI]


def runs_of(chars: list[str]) -> st.SearchStrategy[str]:
    """Texts made of a few long runs, so they reach the multi-segment boundaries."""
    run = st.tuples(st.sampled_from(chars), st.integers(min_value=0, max_value=200))
    return st.lists(run, max_size=4).map(lambda runs: "".join(ch * n for ch, n in runs))


gsm_text = runs_of(GSM_SAMPLE)
sms_text = runs_of(GSM_SAMPLE + OTHER_SAMPLE)


def test_plain_ascii_letters_and_digits_are_gsm7() -> None:
    assert is_gsm7("Your Acme verification code is 123456.")


def test_empty_text_is_gsm7() -> None:
    assert is_gsm7("")


@pytest.mark.parametrize("char", list(EXTENSION_CHARS))
def test_extension_chars_are_gsm7(char: str) -> None:
    assert is_gsm7(char)


@pytest.mark.parametrize("char", list("èéùìòÇÄÖÑÜäöñüàÅåØøÆæßÉ¡¿£¥¤§ΔΦΓΛΩΠΨΣΘΞ\n\r"))
def test_accented_and_greek_letters_of_the_default_alphabet_are_gsm7(char: str) -> None:
    assert is_gsm7(char)


@pytest.mark.parametrize("char", ["ç", "ã", "õ", "ó", "á", "í", "ú", "ê", "`", "\t", "\x1b", EMOJI])
def test_characters_outside_the_alphabet_are_not_gsm7(char: str) -> None:
    assert not is_gsm7(f"code {char}")


def test_each_basic_character_is_one_septet() -> None:
    assert septet_length("Hello, world!") == 13


def test_each_extension_character_is_two_septets() -> None:
    assert septet_length(EXTENSION_CHARS) == 2 * len(EXTENSION_CHARS)


def test_septet_length_of_non_gsm_text_raises() -> None:
    with pytest.raises(ValueError, match="not in the GSM"):
        septet_length("código")


@pytest.mark.parametrize(
    ("char", "septet"),
    [
        ("@", 0x00),
        ("$", 0x02),
        ("Ç", 0x09),
        ("\n", 0x0A),
        ("\r", 0x0D),
        ("Δ", 0x10),
        ("_", 0x11),
        ("É", 0x1F),
        ("¤", 0x24),
        ("¡", 0x40),
        ("§", 0x5F),
        ("¿", 0x60),
        ("à", 0x7F),
    ],
)
def test_basic_characters_encode_to_their_gsm_code(char: str, septet: int) -> None:
    assert encode_gsm7(char) == bytes([septet])


def test_ascii_letters_and_digits_encode_as_themselves() -> None:
    assert encode_gsm7("Acme 123456") == b"Acme 123456"


@pytest.mark.parametrize(
    ("char", "code"),
    [
        ("^", 0x14),
        ("{", 0x28),
        ("}", 0x29),
        ("\\", 0x2F),
        ("[", 0x3C),
        ("~", 0x3D),
        ("]", 0x3E),
        ("|", 0x40),
        ("€", 0x65),
        ("\f", 0x0A),
    ],
)
def test_extension_characters_encode_as_escape_then_code(char: str, code: int) -> None:
    assert encode_gsm7(char) == bytes([0x1B, code])


def test_encoding_non_gsm_text_raises_naming_only_the_character() -> None:
    with pytest.raises(ValueError, match=r"'ç' at index 4") as caught:
        encode_gsm7("1234ç")
    assert "1234" not in str(caught.value)


def test_gsm_text_chooses_gsm7() -> None:
    assert choose_encoding("Votre code: 1234 [é€]") == "gsm7"


@pytest.mark.parametrize("text", [f"code 1234 {EMOJI}", "Seu código é 1234"])
def test_text_with_emoji_or_non_gsm_accent_chooses_ucs2(text: str) -> None:
    assert choose_encoding(text) == "ucs2"


def test_empty_text_is_one_segment() -> None:
    assert segment_count("") == 1


@pytest.mark.parametrize(
    ("septets", "segments"),
    [(1, 1), (160, 1), (161, 2), (306, 2), (307, 3), (459, 3), (460, 4)],
)
def test_gsm7_segments_are_160_alone_then_153_each(septets: int, segments: int) -> None:
    assert segment_count("a" * septets) == segments


def test_extension_chars_count_twice_towards_the_gsm7_limit() -> None:
    assert segment_count("€" * 80) == 1
    assert segment_count("€" * 80 + "a") == 2


def test_an_escape_pair_is_never_split_across_gsm7_segments() -> None:
    # 306 septets, yet the € would straddle septets 153-154: it moves to part two.
    text = "a" * 152 + "€" + "a" * 152
    assert septet_length(text) == 306
    assert segment_count(text) == 3


@pytest.mark.parametrize(
    ("units", "segments"),
    [(1, 1), (70, 1), (71, 2), (134, 2), (135, 3)],
)
def test_ucs2_segments_are_70_alone_then_67_each(units: int, segments: int) -> None:
    assert segment_count("ç" * units) == segments


def test_a_surrogate_pair_counts_as_two_utf16_units() -> None:
    assert segment_count(EMOJI * 35) == 1
    assert segment_count(EMOJI * 35 + "a") == 2


def test_a_surrogate_pair_is_never_split_across_ucs2_segments() -> None:
    # 134 units would be two parts of 67, but the emoji would straddle them.
    text = "ç" * 66 + EMOJI + "ç" * 66
    assert segment_count(text) == 3


def test_one_non_gsm_character_switches_the_whole_text_to_ucs2_limits() -> None:
    assert segment_count("a" * 70) == 1
    assert segment_count("a" * 70 + "ç") == 2


@given(text=sms_text, extra=sms_text)
def test_segment_count_never_drops_when_text_grows(text: str, extra: str) -> None:
    assert segment_count(text + extra) >= segment_count(text)


@given(text=sms_text)
def test_segment_count_is_never_below_the_rule_of_thumb(text: str) -> None:
    if is_gsm7(text):
        length, single, part = septet_length(text), 160, 153
    else:
        length, single, part = len(text.encode("utf-16-le")) // 2, 70, 67
    rule_of_thumb = 1 if length <= single else math.ceil(length / part)
    assert segment_count(text) >= rule_of_thumb


@given(text=gsm_text)
def test_encoded_gsm7_has_one_byte_per_septet(text: str) -> None:
    assert len(encode_gsm7(text)) == septet_length(text)


def per_character_segments(text: str) -> int:
    """Segments as the standard counts them, one character at a time."""
    gsm = all(ch in GSM_ALPHABET or ch in EXTENSION_CHARS for ch in text)
    sizes = [
        (2 if ch in EXTENSION_CHARS else 1) if gsm else (2 if ord(ch) > 0xFFFF else 1)
        for ch in text
    ]
    single, part = (160, 153) if gsm else (70, 67)
    if sum(sizes) <= single:
        return 1
    segments, used = 1, 0
    for size in sizes:
        if used + size > part:
            segments, used = segments + 1, 0
        used += size
    return segments


@given(sms_text | st.text() | st.text(GSM_ALPHABET, min_size=150, max_size=500))
def test_segment_count_is_the_count_one_character_at_a_time(text: str) -> None:
    assert segment_count(text) == per_character_segments(text)


@pytest.mark.parametrize("text", ["\ud800" * 70, "\ud800" * 71, EMOJI * 35, EMOJI * 36])
def test_lone_surrogates_and_pairs_count_as_utf16_units(text: str) -> None:
    assert segment_count(text) == per_character_segments(text)
