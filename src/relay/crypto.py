"""Secrets at rest: code HMACs, sealed codes, API key hashes, key generation."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_KEY_ALPHABET = string.ascii_letters + string.digits
_NONCE_BYTES = 12


class Keyring:
    """Derives separate keys for code HMACs and code sealing from one server secret.

    The secret lives outside the database (setting or data-dir file), so a
    database dump alone reveals neither codes nor a way to test guesses offline.
    """

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 32:
            raise ValueError("the code key must be at least 32 bytes")
        mac_key = hmac.new(secret, b"relay code hmac v1", hashlib.sha256).digest()
        # Keyed once: each code's MAC copies it (HMAC's key schedule is most of its cost).
        self._mac = hmac.new(mac_key, None, hashlib.sha256)
        seal_key = hmac.new(secret, b"relay code seal v1", hashlib.sha256).digest()
        self._aead = AESGCM(seal_key)

    def code_mac(self, owner_id: str, code: str) -> bytes:
        # Binding the owner id stops a MAC from one verification matching another's.
        mac = self._mac.copy()
        mac.update(f"{owner_id}:{code}".encode())
        return mac.digest()

    def code_matches(self, owner_id: str, code: str, expected_mac: bytes) -> bool:
        return hmac.compare_digest(self.code_mac(owner_id, code), expected_mac)

    def seal(self, owner_id: str, plaintext: str) -> bytes:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plaintext.encode(), owner_id.encode())

    def unseal(self, owner_id: str, sealed: bytes) -> str:
        nonce, body = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
        try:
            return self._aead.decrypt(nonce, body, owner_id.encode()).decode()
        except InvalidTag as exc:
            raise ValueError("sealed value does not open under this key") from exc


def generate_code(length: int) -> str:
    # One uniform draw over every `length`-digit string, leading zeros included:
    # the same codes as a digit at a time, with one read of the OS's randomness.
    return f"{secrets.randbelow(10**length):0{length}d}"


def generate_secret(prefix: str, length: int = 32) -> str:
    return prefix + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(length))


def hash_api_key(key: str) -> str:
    # Keys carry ~190 bits of entropy, so a fast hash is enough: there is nothing
    # to brute-force, and a lookup by hash keeps authentication one indexed read.
    return hashlib.sha256(key.encode()).hexdigest()
