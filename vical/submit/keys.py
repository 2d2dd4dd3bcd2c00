"""Ed25519 signing keys for results bundles (``cryptography``, works offline)."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from vical.errors import VicalError

DEFAULT_KEYRING = Path("submissions") / "keys"  # the trusted public keys, *.pub


class KeyError_(VicalError, ValueError):
    """A key file is missing or malformed."""


def keygen(out: Path, overwrite: bool = False) -> tuple[Path, Path]:
    """Write a new private key to ``out`` (mode 0600) and its public key to ``out.pub``."""
    out = Path(out)
    pub = out.with_name(out.name + ".pub")
    if not overwrite and (out.exists() or pub.exists()):
        raise KeyError_(f"{out} or {pub} already exists; pass --force to replace them")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    os.chmod(out, 0o600)
    pub.write_bytes(public_pem(key.public_key()))
    return out, pub


def public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def load_private(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as e:
        raise KeyError_(
            f"{path}: not a readable Ed25519 private key ({e}); "
            "create one with `vical keygen --out PATH`"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyError_(f"{path}: not an Ed25519 key")
    return key


def load_public(data: bytes, where: str = "public key") -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError as e:
        raise KeyError_(f"{where}: not a PEM public key ({e})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyError_(f"{where}: not an Ed25519 public key")
    return key


def key_id(pub: Ed25519PublicKey) -> str:
    """Short fingerprint of a public key: sha256 of its raw bytes, 16 hex digits."""
    raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def sign(key: Ed25519PrivateKey, data: bytes) -> str:
    return base64.b64encode(key.sign(data)).decode()


def check(pub: Ed25519PublicKey, data: bytes, signature_b64: str) -> bool:
    try:
        pub.verify(base64.b64decode(signature_b64, validate=True), data)
    except (InvalidSignature, ValueError):
        return False
    return True
