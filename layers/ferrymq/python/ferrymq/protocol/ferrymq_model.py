"""FerryMQ's own service (what SQS lacks: cluster status, queue statistics, peek, usage, access keys), compiled
into the tables the parser and renderers walk.

The model is the botocore data this package ships (``ferrymq/data/ferrymq/<API_VERSION>/service-2.json``), the
very file ``ferrymq.client("ferrymq")`` loads, so client and server cannot disagree about a shape. It speaks
AWS JSON 1.0 with the ``X-Amz-Target`` prefix ``FerryMQ.`` and is signed (SigV4) for the service ``ferrymq``;
errors render as every other error does, so botocore reads their codes from ``x-amzn-query-error`` as it does
for SQS (``AccessDenied``, ``InvalidParameterValue``, ``AWS.SimpleQueueService.NonExistentQueue``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.loaders import Loader

from ferrymq.client import DATA_PATH
from ferrymq.protocol import model
from ferrymq.protocol.model import Operation, build_operations

API_VERSION = "2024-12-01"
TARGET_PREFIX = "FerryMQ."
SIGNING_NAME = "ferrymq"
SQS_SIGNING_NAME = "sqs"


def _load() -> dict[str, Any]:
    loader = Loader(extra_search_paths=[str(DATA_PATH)], include_default_search_paths=False)
    return loader.load_service_model("ferrymq", "service-2", api_version=API_VERSION)


OPERATIONS: dict[str, Operation] = build_operations(_load())

if OPERATIONS.keys() & model.OPERATIONS.keys():
    # Results are rendered by action name alone: a FerryMQ action may never shadow an SQS one.
    raise ValueError(f"FerryMQ actions named like SQS ones: {sorted(OPERATIONS.keys() & model.OPERATIONS.keys())}")


def signing_service(headers: Mapping[str, str]) -> str:
    """The SigV4 service a request (lower-case ``headers``) must be signed for: ``ferrymq`` for FerryMQ's own
    actions, ``sqs`` for everything else."""
    target = headers.get("x-amz-target")
    return SIGNING_NAME if target is not None and target.startswith(TARGET_PREFIX) else SQS_SIGNING_NAME
