"""Encryption at rest: AES-256-GCM envelopes, and where the key comes from.

Envelope (version 1), everything after the header is AES-GCM output (ciphertext + tag):

    b"GGE" 0x01 | key id (8 bytes) | nonce (12 bytes) | ciphertext | tag (16 bytes)

The header and a label naming what the bytes are (``artifact:patch_call_3.diff``,
``message``, ``state``) are the associated data, so a sealed file moved under another
name, or a byte flipped anywhere, fails to open instead of decrypting to garbage.
The key id is derived from the key (HKDF), so a wrong key is told apart from damage
before any decryption is tried, and store.json can name the key without holding it.
Message blobs use a synthetic nonce (an HMAC of label and plaintext) so identical
messages still share one blob; everything else gets a random nonce.
"""

from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from typing import Any

from gitguard.errors import CorruptRecord
from gitguard.errors import KeyProblem as KeyProblem  # raised here; `sealing.KeyProblem` stays

MAGIC = b"GGE\x01"
KEY_ID_LEN = 8
NONCE_LEN = 12
HEADER_LEN = len(MAGIC) + KEY_ID_LEN + NONCE_LEN
ALGORITHM = "AES-256-GCM"
KEYRING_SERVICE = "gitguard"
KEY_HINT = ("set GITGUARD_KEY to the store's key (base64 of 32 bytes), or keep it in the "
            "system keyring: `gitguard key generate --keyring`")


# `cryptography` is imported where a key is used, not with this module: every store
# imports it through gitguard.storage.privacy, and the import costs ~60-200 ms that an
# unencrypted store (the default) never needs, in its first snapshot and every CLI call.
def _derive(master: bytes, info: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(master)


@dataclass(frozen=True)
class Key:
    key_id: str            # hex of the 8-byte id; safe to store and print
    _cipher_key: bytes
    _nonce_key: bytes

    @classmethod
    def from_bytes(cls, master: bytes) -> Key:
        if len(master) != 32:
            raise KeyProblem(f"an encryption key is 32 bytes; this one is {len(master)}",
                            "make one with `gitguard key generate`")
        key_id = _derive(master, b"gitguard key id v1")[:KEY_ID_LEN].hex()
        return cls(key_id, _derive(master, b"gitguard cipher v1"),
                   _derive(master, b"gitguard nonce v1"))

    @classmethod
    def from_text(cls, text: str, source: str) -> Key:
        cleaned = text.strip()
        padded = cleaned + "=" * (-len(cleaned) % 4)
        for alphabet in (b"+/", b"-_"):
            try:
                return cls.from_bytes(base64.b64decode(padded, altchars=alphabet, validate=True))
            except (binascii.Error, ValueError):
                continue
        raise KeyProblem(f"{source} is not a base64 key", KEY_HINT)

    def seal(self, data: bytes, label: str, deterministic: bool = False) -> bytes:
        if deterministic:
            import hashlib  # here: hmac and secrets load OpenSSL's libcrypto (_hashlib)
            import hmac

            nonce = hmac.new(self._nonce_key, label.encode() + b"\0" + data,
                             hashlib.sha256).digest()[:NONCE_LEN]
        else:
            nonce = os.urandom(NONCE_LEN)
        header = MAGIC + bytes.fromhex(self.key_id) + nonce
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        return header + AESGCM(self._cipher_key).encrypt(nonce, data, header + label.encode())

    def open(self, data: bytes, label: str) -> bytes:
        found = envelope_key_id(data)
        if found is None:
            raise CorruptRecord(f"{label} is not a gitguard envelope",
                                "run `gitguard verify`")
        if found != self.key_id:
            raise KeyProblem(f"{label} was sealed with key {found}, not with the given key "
                            f"{self.key_id}", KEY_HINT)
        header, body = data[:HEADER_LEN], data[HEADER_LEN:]
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        try:
            return AESGCM(self._cipher_key).decrypt(header[-NONCE_LEN:], body,
                                                    header + label.encode())
        except InvalidTag:
            raise CorruptRecord(f"{label} cannot be decrypted: it was changed after it was "
                                "sealed", "run `gitguard verify`; restore it from a backup"
                                ) from None


def is_sealed(data: bytes) -> bool:
    return data[:len(MAGIC)] == MAGIC and len(data) >= HEADER_LEN + 16


def envelope_key_id(data: bytes) -> str | None:
    if not is_sealed(data):
        return None
    return data[len(MAGIC):len(MAGIC) + KEY_ID_LEN].hex()


def new_key_text() -> str:
    import secrets  # here, as hmac above: an unencrypted store's process never needs it

    return base64.b64encode(secrets.token_bytes(32)).decode()


def load_key(keyring_user: str) -> Key:
    """GITGUARD_KEY wins; else the system keyring (service "gitguard"); else a clear error."""
    text = os.environ.get("GITGUARD_KEY", "")
    if text.strip():
        return Key.from_text(text, "GITGUARD_KEY")
    stored = _keyring_get(keyring_user)
    if stored is None:
        raise KeyProblem("encryption is on but no key was found: GITGUARD_KEY is not set and the "
                        f"keyring has no entry {KEYRING_SERVICE}/{keyring_user}", KEY_HINT)
    return Key.from_text(stored, f"the keyring entry {KEYRING_SERVICE}/{keyring_user}")


def store_in_keyring(keyring_user: str, text: str) -> None:
    keyring = _keyring_module()
    try:
        keyring.set_password(KEYRING_SERVICE, keyring_user, text)
    except Exception as exc:  # noqa: BLE001 - every backend failure means "no usable keyring"
        raise _no_backend(exc) from None


def _keyring_get(user: str) -> str | None:
    keyring = _keyring_module()
    try:
        value = keyring.get_password(KEYRING_SERVICE, user)
    except Exception as exc:  # noqa: BLE001 - every backend failure means "no usable keyring"
        raise _no_backend(exc) from None
    return value if isinstance(value, str) else None


def _keyring_module() -> Any:
    try:
        import keyring
    except ImportError:
        raise KeyProblem("encryption is on, GITGUARD_KEY is not set and the `keyring` package "
                        "is not installed",
                        "set GITGUARD_KEY, or install it: pip install 'gitguard[keyring]'"
                        ) from None
    return keyring


def _no_backend(exc: Exception) -> KeyProblem:
    first = str(exc).strip().splitlines()
    return KeyProblem(f"the system keyring is not usable: {type(exc).__name__}"
                     + (f": {first[0]}" if first else ""),
                     "set GITGUARD_KEY instead (base64 of 32 bytes; `gitguard key generate`)")
