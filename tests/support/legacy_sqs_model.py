"""The 2012-11-05 query-protocol SQS model, so tests can check the query wire format against botocore itself.

botocore 1.31.80 is the last release whose SQS model uses the query protocol.  Its ``service-2.json`` is put
under ``.cache/models/sqs/2012-11-05/`` (gitignored) by the install step, never while tests run:

    make sqs-query-model        (``make test`` does it first; it runs only while the file is missing)
    python -m tests.support.legacy_sqs_model --install

which downloads the wheel with pip into ``.cache/wheels/`` (unless it is there already) and extracts the
model from it.  At test time the model is only read; when it is missing the tests that need it fail, naming
the make target: the query protocol is half of what FerryMQ speaks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from botocore.model import ServiceModel

REPO = Path(__file__).resolve().parents[2]
MODEL_FILE = REPO / ".cache" / "models" / "sqs" / "2012-11-05" / "service-2.json"
WHEEL_DIR = REPO / ".cache" / "wheels"
QUERY_BOTOCORE = "botocore==1.31.80"
MAKE_TARGET = "sqs-query-model"
_WHEEL_MEMBER = "botocore/data/sqs/2012-11-05/service-2.json"


class ModelMissing(FileNotFoundError):
    """The query-protocol model was not installed before the tests ran."""


def install() -> Path:
    """Put the model in place: download botocore 1.31.80's wheel unless it is cached, extract the model."""
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    wheels = sorted(WHEEL_DIR.glob("botocore-1.31.80-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(WHEEL_DIR), QUERY_BOTOCORE],
            check=True,
            timeout=300,
        )
        wheels = sorted(WHEEL_DIR.glob("botocore-1.31.80-*.whl"))
    with zipfile.ZipFile(wheels[0]) as wheel:
        data = wheel.read(_WHEEL_MEMBER)
    if json.loads(data)["metadata"]["protocol"] != "query":
        raise RuntimeError(f"{wheels[0].name} does not carry the query-protocol SQS model")
    MODEL_FILE.parent.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed, so a reader never sees half a file (and make never sees one as done).
    fd, tmp = tempfile.mkstemp(dir=MODEL_FILE.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, MODEL_FILE)
    return MODEL_FILE


def model_data_path() -> Path:
    """A botocore data path (``<path>/sqs/2012-11-05/service-2.json``) holding the query-protocol model."""
    if not MODEL_FILE.exists():
        raise ModelMissing(
            f"botocore's query-protocol SQS model is not installed ({MODEL_FILE} is missing): "
            f"run `make {MAKE_TARGET}` (`make test` runs it before the tests)"
        )
    return MODEL_FILE.parents[2]


def legacy_query_model() -> ServiceModel:
    """botocore's query-protocol SQS model."""
    model_data_path()
    model = ServiceModel(json.loads(MODEL_FILE.read_text()), service_name="sqs")
    assert model.protocol == "query", f"{MODEL_FILE} is not the query-protocol model"
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.legacy_sqs_model", description="Install the query-protocol SQS model."
    )
    parser.add_argument("--install", action="store_true", help=f"download {QUERY_BOTOCORE} and extract the model")
    args = parser.parse_args(argv)
    if not args.install:
        parser.print_help()
        return 2
    print(f"installed {install().relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
