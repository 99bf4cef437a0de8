"""Real SQS SDK clients for end-to-end tests, on either wire protocol.

boto3 speaks the JSON protocol to SQS; the query protocol comes from the last botocore SQS model that used
it (botocore 1.31.80, see :mod:`tests.support.legacy_sqs_model`), put in front of botocore's own models
for one session only.
"""

from __future__ import annotations

import threading
from typing import Any

import boto3
import botocore.session
from botocore.config import Config

from tests.support.legacy_sqs_model import model_data_path

_SESSIONS: dict[str, boto3.Session] = {}
_SESSIONS_LOCK = threading.Lock()


def _session(protocol: str) -> boto3.Session:
    """One session per protocol for the whole run: a new one loads botocore's models again (~90 ms a client,
    against ~3 ms from a session that has them); credentials and region go to each client."""
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(protocol)
        if session is None:
            core = botocore.session.get_session()
            if protocol == "query":
                core.get_component("data_loader").search_paths.insert(0, str(model_data_path()))
            elif protocol != "json":
                raise ValueError(protocol)
            session = _SESSIONS[protocol] = boto3.Session(botocore_session=core)
        return session


def sqs_client(endpoint: str, protocol: str, *, access_key: str = "test", secret_key: str = "test",
               region: str = "us-east-1", session_token: str | None = None, verify: str | bool | None = None,
               **config: Any) -> Any:
    """``verify``: as boto3's (e.g. the path of a gateway's self-signed certificate); ``config``: botocore Config."""
    session = _session(protocol)
    with _SESSIONS_LOCK:
        # Creating clients is not thread-safe on a shared session; using them is.
        client = session.client(
            "sqs",
            endpoint_url=endpoint,
            region_name=region,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            aws_session_token=session_token,
            verify=verify,
            # No retries unless a test asks for them: each test sees exactly the answer to its request.
            config=Config(**{"retries": {"total_max_attempts": 1, "mode": "standard"}, "read_timeout": 60, **config}),
        )
    assert client.meta.service_model.protocol == protocol
    return client
