"""For the benchmarks that run the front end's pipeline in-process against a running ``ferrymq up`` (they
import it from beside them, as they run as scripts): signed requests as the gateway hands them over, and
Settings that reach that stack's stand-in and workers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ferrymq.frontend.http import HttpRequest
from ferrymq.infra.cluster_secret import with_local_secret
from ferrymq.infra.standin.access_keys import read_key_pair
from ferrymq.settings import Settings

HOST = "127.0.0.1:9324"


def signed(action: str, payload: dict[str, Any], protocol: str = "json") -> HttpRequest:
    """A request signed with the development key, as the gateway passes it to the pipeline."""
    if protocol == "json":
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}"}
    else:
        body = urlencode({"Action": action, "Version": "2012-11-05", **payload}).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    request = AWSRequest(method="POST", url=f"http://{HOST}/", data=body, headers=headers)
    SigV4Auth(Credentials("test", "test"), "sqs", "us-east-1").add_auth(request)
    lowered = {k.lower(): v for k, v in request.headers.items()}
    lowered["host"] = HOST
    return HttpRequest("POST", "/", "", lowered, body)


def attach(data_dir: Path) -> Settings:
    """Settings for the stack running on ``data_dir``: its stand-in (which accepts only the key pair kept in
    its data directory) unless ``AWS_ENDPOINT_URL`` names another endpoint, and its workers' cluster secret."""
    if not os.environ.get("AWS_ENDPOINT_URL"):
        pair = read_key_pair(data_dir / "aws")
        if pair is None:
            raise SystemExit(f"no running stack's stand-in key pair in {data_dir / 'aws'}")
        os.environ.update(AWS_ENDPOINT_URL=(data_dir / "aws" / "endpoint").read_text().strip(),
                          AWS_ACCESS_KEY_ID=pair.access_key_id, AWS_SECRET_ACCESS_KEY=pair.secret_access_key)
    return with_local_secret(Settings.from_env().with_(data_dir=data_dir))
