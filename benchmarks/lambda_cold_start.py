"""Cold start of the front-end function: a fresh interpreter, as a new Lambda execution environment, from the
import of the handler template.yaml names to its first answer (a signed SendMessage in a REST API proxy
event), then the warm answers after it, against a ``ferrymq up`` stack on loopback.

    .venv/bin/python benchmarks/lambda_cold_start.py [--runs 5]

Prints, per run, the import time, the first answer (building the front end: settings, boto3 clients,
credential lookup, the partition map, the worker connection) and the median of ten warm answers.  The figures
include neither Lambda's own start nor the runtime's, which no machine here has.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ferrymq.infra import aws_target
from ferrymq.infra.cluster_secret import SECRET_FILE, SECRET_FILE_ENV
from ferrymq.infra.standin.access_keys import read_key_pair
from ferrymq.infra.standin.layout import ENDPOINT_FILE
from ferrymq.infra.up_process import UpProcess, up_environment

REPO = Path(__file__).resolve().parents[1]

_PROBE = r"""
import json, sys, time
started = time.perf_counter()
from ferrymq.frontend.app import handler
imported = time.perf_counter()
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from tests.support.lambda_events import load, signed_event

def event():
    body = json.dumps({"QueueUrl": sys.argv[2], "MessageBody": "cold"}).encode()
    request = AWSRequest(method="POST", url=sys.argv[1] + "/Prod/", data=body, headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"})
    SigV4Auth(Credentials("test", "test"), "sqs", "us-east-1").add_auth(request)
    return signed_event(load("rest-v1-proxy"), request, forwarded_proto="http")

first_event = event()
before = time.perf_counter()
first = handler(first_event, None)
answered = time.perf_counter()
warm = []
for _ in range(10):
    e = event()
    t = time.perf_counter()
    assert handler(e, None)["statusCode"] == 200
    warm.append(time.perf_counter() - t)
print(json.dumps({"import": imported - started, "first": answered - before, "status": first["statusCode"],
                  "warm": sorted(warm)[len(warm) // 2]}))
"""


def function_environment(stack: UpProcess) -> dict[str, str]:
    standin = stack.data_dir / "aws"
    key_pair = read_key_pair(standin)
    if key_pair is None:
        raise SystemExit(f"no stand-in key pair in {standin}")
    endpoint = (standin / ENDPOINT_FILE).read_text().strip()
    return {**stack.env, **aws_target.standin_environment(endpoint, "us-east-1", key_pair),
            SECRET_FILE_ENV: str(stack.data_dir / SECRET_FILE)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as data:
        env = up_environment(Path(data))
        env["FERRYMQ_HOST"] = "127.0.0.1"
        stack = UpProcess(Path(data), env)
        stack.start()
        try:
            import boto3

            sqs = boto3.client("sqs", endpoint_url=stack.endpoint, region_name="us-east-1",
                               aws_access_key_id="test", aws_secret_access_key="test")
            queue = sqs.create_queue(QueueName="cold-start")["QueueUrl"]
            runs = []
            for _ in range(args.runs):
                probe = subprocess.run([sys.executable, "-c", _PROBE, stack.endpoint, queue], cwd=REPO,
                                       env=function_environment(stack), capture_output=True, text=True,
                                       timeout=120, check=False)
                if probe.returncode != 0:
                    raise SystemExit(probe.stderr[-2000:])
                run = json.loads(probe.stdout.strip().splitlines()[-1])
                if run["status"] != 200:
                    raise SystemExit(f"the first answer was {run['status']}")
                runs.append(run)
                print(f"import {run['import'] * 1000:7.1f} ms   first answer {run['first'] * 1000:7.1f} ms   "
                      f"warm answer (median of 10) {run['warm'] * 1000:6.2f} ms")
            print(f"median: import {statistics.median(r['import'] for r in runs) * 1000:.1f} ms, "
                  f"import to first answer {statistics.median(r['import'] + r['first'] for r in runs) * 1000:.1f} "
                  f"ms, warm {statistics.median(r['warm'] for r in runs) * 1000:.2f} ms")
        finally:
            stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
