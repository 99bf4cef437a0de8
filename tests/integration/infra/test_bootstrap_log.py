"""What ``bootstrap`` (run by every ``ferrymq up``) says: it names only what it created."""

from __future__ import annotations

import logging
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError

from ferrymq.aws import session
from ferrymq.infra.bootstrap import bootstrap, ensure_bucket
from ferrymq.settings import Settings


def test_the_usage_bucket_is_reported_created_only_when_it_was(aws_settings: Settings,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    # given a usage bucket that does not exist yet
    settings = aws_settings.with_(usage_bucket=f"ferrymq-created-once-{uuid.uuid4().hex[:8]}")
    caplog.set_level(logging.INFO, logger="ferrymq.infra.bootstrap")
    # when bootstrap runs twice, as two starts of a stack do
    bootstrap(settings)
    bootstrap(settings)
    # then the bucket exists and its creation was logged once (us-east-1 answers CreateBucket on an owned bucket
    # with success, so that answer alone cannot tell)
    created = [r.getMessage() for r in caplog.records if r.getMessage().startswith("created bucket")]
    assert created == [f"created bucket {settings.usage_bucket}"]
    s3 = session.client("s3", settings)
    assert settings.usage_bucket in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_a_refused_bucket_check_is_not_taken_for_a_missing_bucket(aws_settings: Settings) -> None:
    # given a client whose signature the endpoint refuses
    refused = boto3.client("s3", endpoint_url=aws_settings.aws_endpoint_url, region_name="us-east-1",
                           aws_access_key_id="test", aws_secret_access_key="wrong")
    # when a bucket is ensured, then the refusal surfaces, neither taken for "missing" nor for "there"
    with pytest.raises(ClientError) as raised:
        ensure_bucket(refused, f"ferrymq-refused-{uuid.uuid4().hex[:8]}", "us-east-1")
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
