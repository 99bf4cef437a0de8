"""The worker RPC's handshake: both ends prove they hold the deployment's shared secret before any frame.

It runs once per connection, before the first frame, and costs two round trips on connect (connections are
persistent and pooled, so requests do not pay it)::

    client                                              server
      | HELLO: "FMQA" | version (1 byte) | client nonce (32) ->|  anything else: closed, nothing sent
      |<- server nonce (32)                                    |
      | client proof (32) ->                                   |  wrong proof: closed, nothing more sent
      |<- server proof (32)                                    |
      | frames ...                                             |

    client proof = HMAC-SHA256(secret, "ferrymq-rpc/1 client" | client nonce | server nonce)
    server proof = HMAC-SHA256(secret, "ferrymq-rpc/1 server" | client nonce | server nonce)

Fresh nonces from both sides mean neither proof can be replayed on another connection; the two labels mean
a proof cannot be reflected back to the side that asked for it. The server sends nothing a stranger could
use before the client has proved itself, and nothing of the RPC until then; proofs are compared in constant
time. A client that does not get the server's proof refuses to use the connection, so requests (message
bodies) never go to a listener that merely took over the port.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets

from ferrymq.errors import ServiceUnavailable
from ferrymq.settings import Settings

MAGIC = b"FMQA"
VERSION = 1
NONCE_BYTES = 32
PROOF_BYTES = 32
HELLO_BYTES = len(MAGIC) + 1 + NONCE_BYTES
DEFAULT_TIMEOUT_SECONDS = 5.0
_CLIENT_LABEL = b"ferrymq-rpc/1 client"
_SERVER_LABEL = b"ferrymq-rpc/1 server"


class PeerAuthFailed(ServiceUnavailable):
    """The other end of a worker RPC connection did not prove it holds the cluster secret."""


class PeerAuth:
    """The shared secret of a deployment's worker RPC, and both halves of the handshake it proves."""

    __slots__ = ("_key", "timeout")

    def __init__(self, secret: bytes | str, *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        key = secret.encode() if isinstance(secret, str) else bytes(secret)
        if not key:
            raise ValueError("the cluster secret is empty")
        self._key = key
        self.timeout = timeout

    def __repr__(self) -> str:
        return "PeerAuth(<secret>)"

    @classmethod
    def from_settings(cls, settings: Settings) -> PeerAuth | None:
        """The handshake for ``settings.cluster_secret``; None when no secret is configured."""
        return cls(settings.cluster_secret) if settings.cluster_secret else None

    def _proof(self, label: bytes, client_nonce: bytes, server_nonce: bytes) -> bytes:
        return hmac.new(self._key, label + client_nonce + server_nonce, hashlib.sha256).digest()

    async def prove_to_server(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, where: str) -> None:
        """The client half; raises :class:`PeerAuthFailed` unless the server proved itself in time."""
        client_nonce = secrets.token_bytes(NONCE_BYTES)
        try:
            writer.write(MAGIC + bytes([VERSION]) + client_nonce)
            server_nonce = await asyncio.wait_for(reader.readexactly(NONCE_BYTES), self.timeout)
            writer.write(self._proof(_CLIENT_LABEL, client_nonce, server_nonce))
            server_proof = await asyncio.wait_for(reader.readexactly(PROOF_BYTES), self.timeout)
        except (asyncio.IncompleteReadError, OSError):
            raise PeerAuthFailed(
                f"Storage worker {where} closed the connection during the handshake: it does not share this "
                "cluster secret."
            ) from None
        except TimeoutError:
            raise PeerAuthFailed(f"Storage worker {where} did not complete the handshake in time.") from None
        if not hmac.compare_digest(server_proof, self._proof(_SERVER_LABEL, client_nonce, server_nonce)):
            raise PeerAuthFailed(f"Storage worker {where} does not hold this cluster secret.")

    async def verify_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """The server half: True once the client proved itself (and got the server's proof), False when the
        connection is to be closed without another byte."""
        try:
            hello = await asyncio.wait_for(reader.readexactly(HELLO_BYTES), self.timeout)
            if hello[: len(MAGIC)] != MAGIC or hello[len(MAGIC)] != VERSION:
                return False
            client_nonce = hello[len(MAGIC) + 1 :]
            server_nonce = secrets.token_bytes(NONCE_BYTES)
            writer.write(server_nonce)
            client_proof = await asyncio.wait_for(reader.readexactly(PROOF_BYTES), self.timeout)
        except (asyncio.IncompleteReadError, OSError, TimeoutError):
            return False
        if not hmac.compare_digest(client_proof, self._proof(_CLIENT_LABEL, client_nonce, server_nonce)):
            return False
        writer.write(self._proof(_SERVER_LABEL, client_nonce, server_nonce))
        return True
