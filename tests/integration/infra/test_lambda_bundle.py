"""The packaging: the wheel holds one namespace, and the front end as ``sam build`` packages it for Lambda is
imported and run outside the installed project.

The Makefile's own targets build the function's code package and the layer's library; the third-party part of
the layer is what ``layers/ferrymq/requirements.txt`` names with their dependencies (linked from this
environment instead of downloaded for the Lambda platform). A Python without site-packages, with the function
first on its path and the layer second as Lambda orders them, then serves signed SQS requests through the
handler ``template.yaml`` names, against the test's DynamoDB and a real storage worker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from zipfile import ZipFile

import pytest

from ferrymq.aws.credentials import Credential, CredentialStore
from ferrymq.infra import template as cfn
from ferrymq.settings import Settings
from tests.integration.conftest import REPO, WorkerProcess, worker_env
from tests.support.bundles import link_third_party, requirement_closure


def _function_environment() -> dict[str, object]:
    return cfn.load()["Resources"]["FrontendFunction"]["Properties"]["Environment"]["Variables"]


def _handler() -> list[str]:
    """The front-end function's handler as template.yaml names it: [module, object]."""
    function = cfn.load()["Resources"]["FrontendFunction"]["Properties"]
    return function["Handler"].rsplit(".", 1)

_SERVE = r"""
import json, sys
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
import ferrymq
import ferrymq.frontend
module = __import__(sys.argv[1], fromlist=["_"])
handler = getattr(module, sys.argv[2])

def call(action, payload):
    # Signed for the API's stage URL, delivered as API Gateway's REST API proxy event.
    body = json.dumps(payload)
    request = AWSRequest(method="POST", url="https://abcdef0123.execute-api.us-east-1.amazonaws.com/Prod/",
                         data=body.encode(), headers={"Content-Type": "application/x-amz-json-1.0",
                                                      "X-Amz-Target": "AmazonSQS." + action})
    SigV4Auth(Credentials("bundle", "bundle-secret"), "sqs", "us-east-1").add_auth(request)
    headers = {**dict(request.headers), "Host": "abcdef0123.execute-api.us-east-1.amazonaws.com"}
    event = {"httpMethod": "POST", "path": "/", "headers": headers,
             "multiValueHeaders": {k: [v] for k, v in headers.items()},
             "queryStringParameters": None, "multiValueQueryStringParameters": None,
             "requestContext": {"path": "/Prod/", "stage": "Prod", "identity": {"sourceIp": "192.0.2.1"}},
             "body": body, "isBase64Encoded": False}
    answer = handler(event, None)
    return answer["statusCode"], json.loads(answer["body"] or "{}")

status, created = call("CreateQueue", {"QueueName": "from-the-bundle"})
url = created.get("QueueUrl", "")
sent = call("SendMessage", {"QueueUrl": url, "MessageBody": "packaged"})
received = call("ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 1})
missing = call("GetQueueUrl", {"QueueName": "no-such-queue"})
print(json.dumps({"files": {"ferrymq": ferrymq.__file__, "frontend": ferrymq.frontend.__file__},
                  "modules": sorted({m.split(".")[0] for m in sys.modules}), "url": url,
                  "create": status, "send": sent[0], "receive": received, "missing": missing}))
"""


def _make(target: str, artifacts: Path) -> None:
    subprocess.run(["make", "-s", target, f"ARTIFACTS_DIR={artifacts}"], cwd=REPO, check=True, timeout=120)


@pytest.fixture
def bundle(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    function, layer = tmp_path / "function", tmp_path / "layer"
    _make("build-FrontendFunction", function)
    _make("layer-library", layer)
    link_third_party(requirement_closure(REPO / "layers/ferrymq/requirements.txt"), layer / "python")
    yield function, layer / "python"


def test_the_packaged_function_and_layer_serve_sqs_requests(
        bundle: tuple[Path, Path], aws_settings: Settings, start_worker: Callable[..., WorkerProcess],
        tmp_path: Path) -> None:
    function, layer = bundle
    assert sorted(p.name for p in function.iterdir()) == ["ferrymq"]
    assert not (function / "ferrymq" / "__init__.py").exists()
    CredentialStore.from_settings(aws_settings).put(Credential("bundle", "bundle-secret", "000000000000", "dev"))
    start_worker(tmp_path / "worker")
    env = {**worker_env(aws_settings), "PYTHONPATH": f"{function}{os.pathsep}{layer}",
           "FERRYMQ_QUEUE_URL_FORM": _function_environment()["FERRYMQ_QUEUE_URL_FORM"]}

    # -S: no site-packages, so nothing of the installed project or of this environment is importable but the
    # bundle; the working directory is outside the repository for the same reason.
    run = subprocess.run([sys.executable, "-S", "-c", _SERVE, *_handler()], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    answer = json.loads(run.stdout.strip().splitlines()[-1])

    assert answer["files"]["ferrymq"].startswith(str(layer))
    assert answer["files"]["frontend"].startswith(str(function))
    # Only the namespace: none of the folders' own names is a module the function imported.
    assert not {"functions", "storage_workers", "infra", "spark"} & set(answer["modules"])
    assert (answer["create"], answer["send"]) == (200, 200)
    # Queue URLs route back through the API's stage.
    assert answer["url"].startswith("https://abcdef0123.execute-api.us-east-1.amazonaws.com/Prod/")
    status, received = answer["receive"]
    assert status == 200 and [m["Body"] for m in received["Messages"]] == ["packaged"]
    assert answer["missing"][0] == 400
    assert answer["missing"][1]["__type"].endswith("QueueDoesNotExist")



PACKAGED = ("setup.py", "pyproject.toml", "README.md", "layers", "functions", "storage_workers", "infra", "spark")


def test_the_wheel_installs_one_namespace(tmp_path: Path) -> None:
    # A copy: setuptools builds in the source tree (build/, *.egg-info), which the suite must not leave behind.
    source = tmp_path / "source"
    source.mkdir()
    for name in PACKAGED:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--wheel-dir",
                    str(tmp_path / "dist"), str(source)], check=True, timeout=300, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("ferrymq-*.whl")
    names = ZipFile(wheel).namelist()

    assert {name.split("/")[0] for name in names} == {"ferrymq", wheel.name.split("-py")[0] + ".dist-info"}
    for module in ("frontend/app.py", "metadata/catalog.py", "storage/__main__.py", "infra/cli.py",
                   "spark/pipeline.py", "spark/prices.json", "data/ferrymq/2024-12-01/service-2.json"):
        assert f"ferrymq/{module}" in names
