"""The one key pair the stand-in accepts, generated on first start and kept in ``<data dir>/credentials`` (0600).

``ferrymq up`` (or an admin command starting a stand-in of its own) calls :func:`ensure_key_pair` before
starting the stand-in and hands the pair to the stand-in and to every other child through their environment
(:data:`ACCESS_KEY_ENV`, :data:`SECRET_KEY_ENV` for the stand-in; boto3's ``AWS_ACCESS_KEY_ID`` and
``AWS_SECRET_ACCESS_KEY`` for the clients). The file keeps the pair across restarts, so admin commands
run while the stack is up sign with the same key.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ferrymq.private_files import private_dir, write_private

CREDENTIALS_FILE = "credentials"
ACCESS_KEY_ENV = "FERRYMQ_STANDIN_ACCESS_KEY_ID"
SECRET_KEY_ENV = "FERRYMQ_STANDIN_SECRET_ACCESS_KEY"

_ID_ALPHABET = string.ascii_uppercase + "234567"
_SECRET_ALPHABET = string.ascii_letters + string.digits + "+/"


@dataclass(frozen=True, slots=True)
class KeyPair:
    access_key_id: str
    secret_access_key: str

    def __repr__(self) -> str:
        return f"KeyPair({self.access_key_id!r}, <secret>)"

    @classmethod
    def generate(cls) -> KeyPair:
        # Shaped like an AWS long-term key, so tools that check the form accept it.
        return cls(
            "AKIA" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(16)),
            "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(40)),
        )

    def environment(self) -> dict[str, str]:
        """What tells a stand-in to accept this pair."""
        return {ACCESS_KEY_ENV: self.access_key_id, SECRET_KEY_ENV: self.secret_access_key}


def from_environment(env: Mapping[str, str]) -> KeyPair | None:
    access, secret = env.get(ACCESS_KEY_ENV), env.get(SECRET_KEY_ENV)
    if access and secret:
        return KeyPair(access, secret)
    return None


def read_key_pair(data_dir: Path) -> KeyPair | None:
    """The pair kept in ``data_dir``, if there is one."""
    try:
        stored = json.loads((data_dir / CREDENTIALS_FILE).read_text())
    except FileNotFoundError:
        return None
    return KeyPair(stored["access_key_id"], stored["secret_access_key"])


def ensure_key_pair(data_dir: Path) -> KeyPair:
    """The pair kept in ``data_dir``, generated and written (0600, directory 0700) if there is none yet."""
    existing = read_key_pair(data_dir)
    if existing is not None:
        return existing
    pair = KeyPair.generate()
    private_dir(data_dir)
    write_private(data_dir / CREDENTIALS_FILE, json.dumps(
        {"access_key_id": pair.access_key_id, "secret_access_key": pair.secret_access_key}
    ).encode())
    return pair
