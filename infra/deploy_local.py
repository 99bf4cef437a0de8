"""``python -m ferrymq.infra.deploy_local`` (``make deploy-local``): template.yaml deployed into MiniStack, a local
AWS emulator, through its CloudFormation API, the storage workers started against what it created, and one
line printed: ``FERRYMQ_DEPLOYED endpoint=<API Gateway URL>``.  SQS clients pointed at that URL reach API
Gateway's REST API, the deployed function (MiniStack runs Python functions in process, no Docker), and
through it the workers; SigV4 is verified by the function, as on AWS.

What of the template the emulator runs (``emulator_template``):

    deployed as written      the DynamoDB tables, the usage bucket, the KMS keys and aliases, the function's
                             layer, the REST API, the function (SAM transform by the emulator)
    changed                  the function: no VPC (no subnets here), the cluster secret a literal (the
                             workers are started with the same one) instead of a Secrets Manager reference,
                             usage records off (no Firehose), code from the emulator's S3
    left out                 the storage cluster (ECS services, instances, volumes, Cloud Map: tasks need a
                             container runtime; the workers run as processes, started by ``ferrymq up``
                             against the deployed tables), Firehose, EMR Serverless and its schedules, the
                             security groups, and every role of those

The API's URL: MiniStack serves an API at ``<id>.execute-api.localhost:<port>/<stage>/`` (which needs a
resolver answering for sub-domains of localhost) or at ``localhost:<port>/_aws/execute-api/<id>/<stage>/``,
whose path is not the one the function sees (``/<stage>/``), so a client's signature over it would not
verify.  The lane therefore listens on a port of its own and passes each request on to the second form with
its ``Host`` and everything else untouched (:class:`ApiFront`): a custom domain mapped onto the API, as an
API Gateway domain name is on AWS; it adds ``X-Forwarded-Proto`` as API Gateway does.  The printed endpoint is
that front's ``http://127.0.0.1:<port>/<stage>/``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import boto3

from ferrymq.infra import template as cfn
from ferrymq.infra.up_process import UpProcess, up_environment

REPO = cfn.TEMPLATE_PATH.parent
DEPLOYED_LINE = "FERRYMQ_DEPLOYED"
STACK_NAME = "ferrymq"
ARTIFACT_BUCKET = "ferrymq-deploy-artifacts"
REGION = "us-east-1"
EMULATOR_KEYS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}

KEPT_TYPES = frozenset({
    "AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::KMS::Key", "AWS::KMS::Alias",
    "AWS::Serverless::LayerVersion", "AWS::Serverless::Api", "AWS::Serverless::Function",
})
"""What of template.yaml the emulator runs; everything else is left out (see the module docstring)."""

RUNTIME_PACKAGES = frozenset({"boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six"})
"""What the Lambda Python runtime brings itself (boto3 and its dependencies): left out of the local layer."""


# --- the template ------------------------------------------------------------------------------------------


def to_json(value: Any) -> Any:
    """``value`` from :func:`ferrymq.infra.template.load` with its intrinsics in CloudFormation's JSON form."""
    if isinstance(value, cfn.Intrinsic):
        inner = to_json(value.value)
        if value.name == "Ref":
            return {"Ref": inner}
        if value.name == "Condition":
            return {"Condition": inner}
        if value.name == "GetAtt" and isinstance(inner, str):
            return {"Fn::GetAtt": inner.split(".", 1)}
        return {f"Fn::{value.name}": inner}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    return value


def _names(value: Any) -> set[str]:
    """Every logical name ``value`` refers to (Ref, GetAtt, ``${...}`` in Sub)."""
    found: set[str] = set()
    if isinstance(value, cfn.Intrinsic):
        if value.name == "Ref" and isinstance(value.value, str):
            found.add(value.value)
        elif value.name == "GetAtt":
            found.add(str(value.value).split(".", 1)[0] if isinstance(value.value, str) else value.value[0])
        elif value.name == "Sub":
            text = value.value if isinstance(value.value, str) else value.value[0]
            found.update(m.split(".", 1)[0] for m in cfn._SUB_VAR.findall(text))
        found.update(_names(value.value))
    elif isinstance(value, dict):
        for v in value.values():
            found.update(_names(v))
    elif isinstance(value, list):
        for v in value:
            found.update(_names(v))
    return found


def emulator_template(template: Mapping[str, Any], *, code_uri: str, layer_uri: str, cluster_secret: str,
                      partitions: int) -> dict[str, Any]:
    """The part of ``template`` the emulator runs, in CloudFormation's JSON form (see the module docstring)."""
    resources = {name: dict(r) for name, r in template["Resources"].items() if r["Type"] in KEPT_TYPES}
    left_out = set(template["Resources"]) - set(resources)
    function = resources["FrontendFunction"] = _deep_copy(resources["FrontendFunction"])
    props = function["Properties"]
    props.pop("VpcConfig", None)
    props["CodeUri"] = code_uri
    props.pop("Metadata", None)
    function.pop("Metadata", None)
    variables = props["Environment"]["Variables"]
    variables["FERRYMQ_CLUSTER_SECRET"] = cluster_secret
    variables["FERRYMQ_USAGE_ENABLED"] = "0"
    for name in [n for n, v in variables.items() if _names(v) & left_out]:
        del variables[name]
    # Statements on resources left out would name nothing; the rest stay as written.
    for policy in props.get("Policies", []):
        if isinstance(policy, dict) and "Statement" in policy:
            policy["Statement"] = [s for s in policy["Statement"] if not _names(s) & left_out]
    layer = resources["FerryMQLayer"] = _deep_copy(resources["FerryMQLayer"])
    layer["Properties"]["ContentUri"] = layer_uri
    layer.pop("Metadata", None)
    used = _names(resources)
    parameters = {n: p for n, p in template["Parameters"].items() if n in used}
    parameters["Partitions"] = {**parameters["Partitions"], "Default": partitions}
    outputs = {n: o for n, o in template.get("Outputs", {}).items() if not _names(o) & left_out}
    return to_json({
        "AWSTemplateFormatVersion": template["AWSTemplateFormatVersion"],
        "Transform": template["Transform"],
        "Description": "FerryMQ's template.yaml as a local AWS emulator runs it (ferrymq.infra.deploy_local)",
        "Parameters": parameters,
        "Resources": resources,
        "Outputs": outputs,
    })


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


# --- the code packages -----------------------------------------------------------------------------------


def zip_tree(root: Path, *, leave_out: frozenset[str] = frozenset()) -> bytes:
    """``root``'s files as a zip, its top-level entries named in ``leave_out`` left out."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        # os.walk follows linked folders (a layer made of links to installed packages).
        for folder, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()
            for name in sorted(files):
                relative = (Path(folder) / name).relative_to(root)
                if "__pycache__" in relative.parts or _top_package(relative) in leave_out:
                    continue
                archive.write(Path(folder) / name, relative.as_posix())
    return out.getvalue()


def _top_package(relative: Path) -> str:
    """The package a layer file belongs to (``python/<package>/...``), its dist-info folded onto it."""
    parts = relative.parts
    name = parts[1] if len(parts) > 1 and parts[0] == "python" else parts[0]
    name = name.split("-", 1)[0] if name.endswith((".dist-info", ".pth")) else name
    return {"python_dateutil": "dateutil"}.get(name, name)


def build_packages(into: Path) -> tuple[Path, Path]:
    """The function's code package and the layer, built by the Makefile's targets (as ``sam build`` does;
    the layer's third-party wheels come from PyPI)."""
    function, layer = into / "function", into / "layer"
    for target, path in (("build-FrontendFunction", function), ("build-FerryMQLayer", layer)):
        subprocess.run(["make", "-s", target, f"ARTIFACTS_DIR={path}", f"PYTHON={sys.executable}"], cwd=REPO,
                       check=True)
    return function, layer


# --- the emulator ------------------------------------------------------------------------------------------


class MiniStack:
    """A MiniStack process on loopback, on a port of its own, stopped with its process group."""

    def __init__(self, executable: str, port: int, state_dir: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        state_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **EMULATOR_KEYS, "GATEWAY_PORT": str(port), "BIND_HOST": "127.0.0.1",
               "IOT_MTLS_ENABLED": "0", "AWS_DEFAULT_REGION": REGION, "TMPDIR": str(state_dir)}
        for name in [n for n in env if n.startswith("AWS_ENDPOINT_URL")]:
            del env[name]
        self._log = (state_dir / "ministack.log").open("ab")
        # Resolved before it runs in its own folder: a relative command (the Makefile's) names one from here.
        command = shutil.which(executable) if os.sep not in executable else str(Path(executable).resolve())
        self.process = subprocess.Popen([command or executable], cwd=state_dir, env=env, stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"MiniStack exited with status {self.process.returncode} (see its log)")
            try:
                with urllib.request.urlopen(f"{self.url}/_ministack/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"MiniStack did not answer on {self.url} within {timeout:.0f} s")

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.url, region_name=REGION,
                            aws_access_key_id="test", aws_secret_access_key="test")

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self._log.close()


def deploy_stack(emulator: MiniStack, template: dict[str, Any], function_zip: bytes, layer_zip: bytes,
                 *, timeout: float = 300.0) -> dict[str, str]:
    """Upload the packages, create the stack, wait for it; returns its outputs."""
    s3 = emulator.client("s3")
    s3.create_bucket(Bucket=ARTIFACT_BUCKET)
    s3.put_object(Bucket=ARTIFACT_BUCKET, Key="function.zip", Body=function_zip)
    s3.put_object(Bucket=ARTIFACT_BUCKET, Key="layer.zip", Body=layer_zip)
    cloudformation = emulator.client("cloudformation")
    cloudformation.create_stack(StackName=STACK_NAME, TemplateBody=json.dumps(template),
                                Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"])
    deadline = time.monotonic() + timeout
    while True:
        (stack,) = cloudformation.describe_stacks(StackName=STACK_NAME)["Stacks"]
        status = stack["StackStatus"]
        if status == "CREATE_COMPLETE":
            return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        if status.endswith(("FAILED", "ROLLBACK_COMPLETE", "ROLLBACK_IN_PROGRESS")) or time.monotonic() > deadline:
            events = cloudformation.describe_stack_events(StackName=STACK_NAME)["StackEvents"]
            failed = [f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason')}" for e in events
                      if e.get("ResourceStatus", "").endswith("FAILED")]
            raise RuntimeError(f"stack {STACK_NAME} is {status}: {'; '.join(failed) or 'no reason given'}")
        time.sleep(0.5)


def rest_api_id(emulator: MiniStack) -> str:
    """The REST API the stack created (FrontendApi)."""
    resource = emulator.client("cloudformation").describe_stack_resource(
        StackName=STACK_NAME, LogicalResourceId="FrontendApi")["StackResourceDetail"]
    return str(resource["PhysicalResourceId"])


# --- the API's front ---------------------------------------------------------------------------------------


class ApiFront:
    """Passes every HTTP request on to the emulator's path form of the API, ``/_aws/execute-api/<id>/...``,
    byte for byte but for that prefix: the ``Host`` the client signed reaches the function unchanged, and so
    does the path below the prefix (``/<stage>/...``, API Gateway's ``requestContext.path``)."""

    def __init__(self, upstream_port: int, api_id: str) -> None:
        self._upstream = upstream_port
        self._prefix = f"/_aws/execute-api/{api_id}".encode()
        self._server: asyncio.AbstractServer | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="api-front", daemon=True)
        self.port = 0

    def start(self) -> int:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(10)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self._upstream)
        except OSError:
            writer.close()
            return
        async def requests_up() -> None:
            try:
                while line := await reader.readline():
                    # The request line carries the path: the prefix goes before it, nothing else changes.
                    method, _, rest = line.partition(b" ")
                    upstream_writer.write(method + b" " + self._prefix + rest)
                    head = []
                    while True:
                        header = await reader.readline()
                        if header in (b"\r\n", b"\n", b""):
                            if not any(h.lower().startswith(b"x-forwarded-proto:") for h in head):
                                # What API Gateway adds: the scheme the client used (queue URLs carry it).
                                upstream_writer.write(b"X-Forwarded-Proto: http\r\n")
                            upstream_writer.write(header)
                            break
                        upstream_writer.write(header)
                        head.append(header)
                    length = _content_length(head)
                    if length:
                        upstream_writer.write(await reader.readexactly(length))
                    await upstream_writer.drain()
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                upstream_writer.close()

        async def answers_down() -> None:
            try:
                while chunk := await upstream_reader.read(65536):
                    writer.write(chunk)
                    await writer.drain()
            except ConnectionError:
                pass
            finally:
                writer.close()

        await asyncio.gather(requests_up(), answers_down())

    def stop(self) -> None:
        """Close the listener, end every connection's tasks, then the loop."""

        async def shut() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()


def _content_length(head: list[bytes]) -> int:
    for line in head:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


# --- the lane ----------------------------------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def deployed(data_dir: Path, ministack: str, *, function_dir: Path | None = None, layer_dir: Path | None = None,
             partitions: int = 3, out: Any = None) -> Iterator[str]:
    """The whole lane; yields the API's URL and takes everything down on exit."""
    out = out or sys.stdout
    data_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        if function_dir is None or layer_dir is None:
            build = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ferrymq-build-")))
            function_dir, layer_dir = build_packages(build)
        emulator = MiniStack(ministack, _free_port(), data_dir / "ministack")
        stack.callback(emulator.stop)
        emulator.wait_ready()
        print(f"ferrymq deploy-local: MiniStack on {emulator.url}", file=out, flush=True)
        cluster_secret = secrets.token_urlsafe(32)
        template = emulator_template(cfn.load(), code_uri=f"s3://{ARTIFACT_BUCKET}/function.zip",
                                     layer_uri=f"s3://{ARTIFACT_BUCKET}/layer.zip", cluster_secret=cluster_secret,
                                     partitions=partitions)
        outputs = deploy_stack(emulator, template, zip_tree(function_dir),
                               zip_tree(layer_dir, leave_out=RUNTIME_PACKAGES))
        print(f"ferrymq deploy-local: stack {STACK_NAME} created ({', '.join(sorted(outputs))})", file=out,
              flush=True)
        workers_dir = data_dir / "stack"
        if workers_dir.exists():
            shutil.rmtree(workers_dir)
        env = {**up_environment(workers_dir), **EMULATOR_KEYS, "AWS_ENDPOINT_URL": emulator.url,
               "AWS_DEFAULT_REGION": REGION, "FERRYMQ_CLUSTER_SECRET": cluster_secret,
               "FERRYMQ_PARTITIONS": str(partitions), "FERRYMQ_USAGE_ENABLED": "0"}
        workers = UpProcess(workers_dir, env)
        stack.callback(workers.stop)
        workers.start()
        pid = workers.process.pid if workers.process is not None else 0
        print(f"ferrymq deploy-local: storage workers up (ferrymq up, pid {pid}; its own gateway at "
              f"{workers.endpoint})", file=out, flush=True)
        front = ApiFront(emulator.port, rest_api_id(emulator))
        stack.callback(front.stop)
        port = front.start()
        stage = outputs["Endpoint"].rstrip("/").rsplit("/", 1)[1]
        # With the trailing slash: botocore signs the path /<stage>/, which is what the function is told.
        endpoint = f"http://127.0.0.1:{port}/{stage}/"
        print(f"{DEPLOYED_LINE} endpoint={endpoint}", file=out, flush=True)
        yield endpoint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ferrymq.infra.deploy_local", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO / ".cache" / "deploy-local")
    parser.add_argument("--ministack", default=shutil.which("ministack") or "ministack",
                        help="MiniStack's command (make deploy-local installs it into .cache/ministack)")
    parser.add_argument("--function-dir", type=Path, help="a built code package (default: make build-FrontendFunction)")
    parser.add_argument("--layer-dir", type=Path, help="a built layer (default: make build-FerryMQLayer)")
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args(argv)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        with deployed(args.data_dir, args.ministack, function_dir=args.function_dir, layer_dir=args.layer_dir,
                      partitions=args.partitions):
            stopping.wait()
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        # OSError: MiniStack's command missing (make deploy-local installs it), a port taken, a folder unreadable.
        print(f"ferrymq deploy-local: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
