"""The 2012-11-05 query-protocol SQS model, so tests can check the query wire format against botocore itself.

botocore 1.31.80 is the last release whose SQS model uses the query protocol.  Its ``service-2.json`` is
fetched once with ``pip download`` and cached under ``.cache/models/sqs/2012-11-05/`` (gitignored).  When it
cannot be had the tests that need it fail: the query protocol is half of what FerryMQ speaks.
"""

from __future__ import annotations

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
_WHEEL_MEMBER = "botocore/data/sqs/2012-11-05/service-2.json"


def _fetch_model() -> None:
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    wheels = sorted(WHEEL_DIR.glob("botocore-1.31.80-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(WHEEL_DIR), QUERY_BOTOCORE],
            check=True,
            capture_output=True,
            timeout=300,
        )
        wheels = sorted(WHEEL_DIR.glob("botocore-1.31.80-*.whl"))
    with zipfile.ZipFile(wheels[0]) as wheel:
        data = wheel.read(_WHEEL_MEMBER)
    MODEL_FILE.parent.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed, so a concurrent reader never sees half a file.
    fd, tmp = tempfile.mkstemp(dir=MODEL_FILE.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, MODEL_FILE)


def model_data_path() -> Path:
    """A botocore data path (``<path>/sqs/2012-11-05/service-2.json``) holding the query-protocol model."""
    if not MODEL_FILE.exists():
        _fetch_model()
    return MODEL_FILE.parents[2]


def legacy_query_model() -> ServiceModel:
    """botocore's query-protocol SQS model."""
    model_data_path()
    model = ServiceModel(json.loads(MODEL_FILE.read_text()), service_name="sqs")
    assert model.protocol == "query", f"{MODEL_FILE} is not the query-protocol model"
    return model
