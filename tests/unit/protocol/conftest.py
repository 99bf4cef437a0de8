"""Fixtures for the wire-protocol tests: botocore's SQS models for both protocols."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.model import ServiceModel

from tests.support.legacy_sqs_model import legacy_query_model


@pytest.fixture(scope="session")
def json_model() -> ServiceModel:
    """The SQS model boto3 speaks today (AWS JSON 1.0)."""
    return botocore.session.get_session().get_service_model("sqs")


@pytest.fixture(scope="session")
def query_model() -> ServiceModel:
    """The 2012-11-05 query-protocol SQS model (botocore 1.31.80), extracted by `make sqs-query-model`."""
    return legacy_query_model()
