"""What FerryMQ's own actions use besides the SQS actions' services: the access keys, the cluster's
coordination items, the usage bucket, and the cluster secret to ping workers with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ferrymq.aws.credentials import CredentialStore
from ferrymq.cluster_status import Registries
from ferrymq.rpc.peer_auth import PeerAuth


class AdminServices:
    def __init__(self, credentials: CredentialStore, registries: Registries, peer_auth: PeerAuth | None,
                 s3: Callable[[], Any]) -> None:
        """``s3``: makes the usage bucket's client, on first use (most front ends never need it)."""
        self.credentials = credentials
        self.registries = registries
        self.peer_auth = peer_auth
        self._make_s3 = s3
        self._s3: Any = None

    @property
    def s3(self) -> Any:
        if self._s3 is None:
            self._s3 = self._make_s3()
        return self._s3
