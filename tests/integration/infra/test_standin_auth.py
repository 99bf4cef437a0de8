"""The stand-in accepts only its own key pair: anything else gets the refusal AWS sends, in the request's
protocol, and never reaches moto."""

from __future__ import annotations

import os
import stat
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from ferrymq.infra.standin import layout
from ferrymq.infra.standin.access_keys import ACCESS_KEY_ENV, CREDENTIALS_FILE, SECRET_KEY_ENV, KeyPair, read_key_pair
from tests.integration.infra.processes import Started, child_env, python_module, running

PAIR = KeyPair("AKIASTANDINTESTKEY01", "stand-in-test-secret")
TABLE = "guarded"


def _standin(data_dir: Path, env: dict[str, str]) -> Any:
    argv = python_module("ferrymq.infra.standin", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir))
    return running(argv, layout.READY_PREFIX, env=env)


def _client(service: str, standin: Started, pair: KeyPair = PAIR, **kwargs: Any) -> Any:
    return boto3.client(service, endpoint_url=standin.url, region_name="us-east-1",
                        aws_access_key_id=pair.access_key_id, aws_secret_access_key=pair.secret_access_key,
                        config=Config(retries={"max_attempts": 1}, **kwargs))


def _refusal(call: Any) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response["Error"]
    return error["Code"], error.get("Message", ""), caught.value.response["ResponseMetadata"]["HTTPStatusCode"]


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with _standin(tmp_path_factory.mktemp("guarded"), child_env(**PAIR.environment())) as started:
        dynamodb = _client("dynamodb", started)
        dynamodb.create_table(
            TableName=TABLE, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        )
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "catalog"}, "secret": {"S": "not for strangers"}})
        yield started


def test_a_scan_with_made_up_credentials_is_refused_and_with_the_right_ones_works(standin: Started) -> None:
    stranger = _client("dynamodb", standin, KeyPair("AKIAMADEUPMADEUP0000", "whatever"))
    assert _refusal(lambda: stranger.scan(TableName=TABLE)) == (
        "UnrecognizedClientException", "The security token included in the request is invalid.", 400)
    assert _client("dynamodb", standin).scan(TableName=TABLE)["Count"] == 1


def test_the_right_key_with_a_wrong_secret_is_refused(standin: Started) -> None:
    forger = _client("dynamodb", standin, KeyPair(PAIR.access_key_id, "guessed"))
    code, message, status = _refusal(lambda: forger.scan(TableName=TABLE))
    assert (code, status) == ("InvalidSignatureException", 400)
    assert message.startswith("The request signature we calculated does not match the signature you provided.")


def test_a_session_token_is_not_the_standins(standin: Started) -> None:
    with_token = boto3.client("dynamodb", endpoint_url=standin.url, region_name="us-east-1",
                              aws_access_key_id=PAIR.access_key_id, aws_secret_access_key=PAIR.secret_access_key,
                              aws_session_token="FwoGZXIvYXdzEBogus", config=Config(retries={"max_attempts": 1}))
    assert _refusal(lambda: with_token.scan(TableName=TABLE))[0] == "UnrecognizedClientException"


def test_s3_kms_and_query_apis_refuse_an_unknown_key_as_aws_does(standin: Started) -> None:
    stranger = KeyPair("AKIAMADEUPMADEUP0000", "whatever")
    s3 = _client("s3", standin, stranger, s3={"addressing_style": "path"})
    assert _refusal(s3.list_buckets) == (
        "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.", 403)
    kms = _client("kms", standin, stranger)
    assert _refusal(kms.list_keys) == (
        "UnrecognizedClientException", "The security token included in the request is invalid.", 400)
    sts = _client("sts", standin, stranger)
    assert _refusal(sts.get_caller_identity) == (
        "InvalidClientTokenId", "The security token included in the request is invalid.", 403)
    # while the stand-in's own key works on each
    assert _client("s3", standin, s3={"addressing_style": "path"}).list_buckets()["Buckets"] == []
    assert "Keys" in _client("kms", standin).list_keys()
    assert _client("sts", standin).get_caller_identity()["Account"]


def test_an_s3_presigned_url_works_only_with_the_right_signature(standin: Started) -> None:
    s3 = _client("s3", standin, s3={"addressing_style": "path"}, signature_version="s3v4")
    s3.create_bucket(Bucket="guarded-bucket")
    s3.put_object(Bucket="guarded-bucket", Key="a b+c.json", Body=b"{}")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "guarded-bucket", "Key": "a b+c.json"})
    with urllib.request.urlopen(url) as answer:
        assert answer.read() == b"{}"
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(url.replace("X-Amz-Signature=", "X-Amz-Signature=0"))
    assert caught.value.code == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in caught.value.read()


def test_an_unsigned_request_is_refused(standin: Started) -> None:
    request = urllib.request.Request(standin.url, data=b'{"TableName": "guarded"}', headers={
        "X-Amz-Target": "DynamoDB_20120810.Scan", "Content-Type": "application/x-amz-json-1.0"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    assert caught.value.code == 400
    assert caught.value.read() == (b'{"__type": "com.amazon.coral.service#MissingAuthenticationTokenException", '
                                   b'"message": "Request is missing Authentication Token"}')


def test_without_a_pair_in_its_environment_it_generates_one_into_a_private_file(tmp_path: Path) -> None:
    env = {k: v for k, v in child_env().items() if k not in (ACCESS_KEY_ENV, SECRET_KEY_ENV)}
    with _standin(tmp_path, env) as started:
        pair = read_key_pair(tmp_path)
        assert pair is not None and pair.access_key_id.startswith("AKIA") and len(pair.secret_access_key) == 40
        assert stat.S_IMODE(os.stat(tmp_path / CREDENTIALS_FILE).st_mode) == 0o600
        assert _client("dynamodb", started, pair).list_tables()["TableNames"] == []
        assert _refusal(_client("dynamodb", started, KeyPair("test", "test")).list_tables)[0] == (
            "UnrecognizedClientException")
    # and a restart keeps the same pair
    with _standin(tmp_path, env):
        assert read_key_pair(tmp_path) == pair
