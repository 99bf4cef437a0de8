"""Idempotent creation of FerryMQ's AWS resources from ``template.yaml``.

Runs against whatever endpoint boto3 is pointed at (the local stand-in, LocalStack or AWS). Creating
something that already exists is not an error, so ``ferrymq up`` runs it on every start.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from botocore.exceptions import ClientError

from ferrymq.aws import session
from ferrymq.infra import template as cfn
from ferrymq.settings import Settings

log = logging.getLogger(__name__)


def template_names(settings: Settings) -> dict[str, str]:
    """Values for the template's parameters and pseudo-parameters, taken from the settings."""
    return {
        "TablePrefix": settings.table_prefix,
        "UsageBucketName": settings.usage_bucket,
        "AWS::AccountId": settings.account_id,
        "AWS::Region": settings.region,
        "AWS::Partition": "aws",
    }


def bootstrap(settings: Settings, template: dict[str, Any] | None = None) -> None:
    template = template if template is not None else cfn.load()
    names = template_names(settings)
    dynamodb = session.client("dynamodb", settings)
    for res in cfn.resources_of_type(template, "AWS::DynamoDB::Table").values():
        ensure_table(dynamodb, cfn.resolve(res["Properties"], names))
    s3 = session.client("s3", settings)
    for res in cfn.resources_of_type(template, "AWS::S3::Bucket").values():
        ensure_bucket(s3, cfn.resolve(res["Properties"], names)["BucketName"], settings.region)
    kms = session.client("kms", settings)
    for res in cfn.resources_of_type(template, "AWS::KMS::Alias").values():
        props = cfn.resolve(res["Properties"], names)
        key_res = template["Resources"][props["TargetKeyId"].value]
        ensure_key_alias(kms, props["AliasName"], cfn.resolve(key_res["Properties"], names))


def ensure_table(dynamodb: Any, props: dict[str, Any]) -> None:
    name = props["TableName"]
    try:
        dynamodb.create_table(
            TableName=name,
            BillingMode=props.get("BillingMode", "PAY_PER_REQUEST"),
            AttributeDefinitions=props["AttributeDefinitions"],
            KeySchema=props["KeySchema"],
        )
        log.info("created table %s", name)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceInUseException":
            raise
    _wait_for_table(dynamodb, name)
    ttl = props.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        current = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        if current.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
            )


def _wait_for_table(dynamodb: Any, name: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        status = dynamodb.describe_table(TableName=name)["Table"]["TableStatus"]
        if status == "ACTIVE":
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"table {name} is still {status}")
        time.sleep(0.2)


def ensure_bucket(s3: Any, name: str, region: str) -> None:
    # Asked first: CreateBucket on a bucket one owns succeeds in us-east-1, so its answer cannot say "created".
    try:
        s3.head_bucket(Bucket=name)
        return
    except ClientError as exc:
        if exc.response["Error"]["Code"] not in ("404", "NoSuchBucket"):
            raise
    try:
        if region == "us-east-1":
            s3.create_bucket(Bucket=name)
        else:
            s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})
        log.info("created bucket %s", name)
    except ClientError as exc:
        if exc.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise


def ensure_key_alias(kms: Any, alias: str, key_props: dict[str, Any]) -> str:
    """The key id behind ``alias``, creating key and alias when the alias does not exist yet."""
    try:
        return kms.describe_key(KeyId=alias)["KeyMetadata"]["KeyId"]
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "NotFoundException":
            raise
    key_id = kms.create_key(Description=key_props.get("Description", ""))["KeyMetadata"]["KeyId"]
    kms.create_alias(AliasName=alias, TargetKeyId=key_id)
    log.info("created KMS key %s as %s", key_id, alias)
    return key_id
