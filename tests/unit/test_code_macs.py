"""A code's MAC is HMAC-SHA256 under the key derived from the server secret: the same
bytes for every call, so MACs stored by any earlier version still match."""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from relay.crypto import Keyring

SECRET = b"s" * 32


def stored_mac(owner_id: str, code: str) -> bytes:
    """As every version of Relay has computed it."""
    key = hmac.new(SECRET, b"relay code hmac v1", hashlib.sha256).digest()
    return hmac.new(key, f"{owner_id}:{code}".encode(), hashlib.sha256).digest()


@given(st.text(max_size=40), st.text(max_size=12))
def test_a_codes_mac_is_the_stored_one_however_often_it_is_computed(
    owner_id: str, code: str
) -> None:
    keyring = Keyring(SECRET)
    first = keyring.code_mac(owner_id, code)
    assert first == keyring.code_mac(owner_id, code) == stored_mac(owner_id, code)
    assert keyring.code_matches(owner_id, code, stored_mac(owner_id, code))
    assert not keyring.code_matches(owner_id, code + "0", first)
