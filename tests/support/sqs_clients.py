"""Real SQS SDK clients for end-to-end tests, on either wire protocol.

boto3 speaks the JSON protocol to SQS; the query protocol comes from the last botocore SQS model that used
it (botocore 1.31.80), put in front of botocore's own models for one session only.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import boto3
import botocore.session
from botocore.config import Config

REPO = Path(__file__).resolve().parents[2]
MODEL_CACHE = REPO / ".cache" / "models"
_QUERY_BOTOCORE = "botocore==1.31.80"
_MODEL_MEMBER = "botocore/data/sqs/2012-11-05/service-2.json"


def query_model_dir() -> Path:
    """A botocore data path whose SQS model is the query-protocol one, fetched from PyPI once and cached."""
    target = MODEL_CACHE / "sqs" / "2012-11-05" / "service-2.json"
    if not target.exists():
        wheels = REPO / ".cache" / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        found = sorted(wheels.glob("botocore-1.31.80-*.whl"))
        if not found:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), _QUERY_BOTOCORE],
                check=True,
            )
            found = sorted(wheels.glob("botocore-1.31.80-*.whl"))
        with zipfile.ZipFile(found[0]) as wheel:
            data = wheel.read(_MODEL_MEMBER)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    return MODEL_CACHE


def sqs_client(endpoint: str, protocol: str, *, access_key: str = "test", secret_key: str = "test",
               region: str = "us-east-1", **config: Any) -> Any:
    core = botocore.session.get_session()
    if protocol == "query":
        loader = core.get_component("data_loader")
        loader.search_paths.insert(0, str(query_model_dir()))
    elif protocol != "json":
        raise ValueError(protocol)
    session = boto3.Session(
        botocore_session=core, aws_access_key_id=access_key, aws_secret_access_key=secret_key, region_name=region
    )
    client = session.client(
        "sqs",
        endpoint_url=endpoint,
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, read_timeout=60, **config),
    )
    assert client.meta.service_model.protocol == protocol
    return client
