"""Which AWS endpoint the local stack uses, and the environment it gives boto3."""

from __future__ import annotations

from ferrymq.infra.aws_target import named_endpoint, named_environment, standin_environment
from ferrymq.infra.standin.access_keys import KeyPair


def test_no_named_endpoint_means_the_standin() -> None:
    assert named_endpoint({}) is None
    assert named_endpoint({"AWS_ENDPOINT_URL": ""}) is None


def test_ferrymq_variable_wins_over_aws_variable() -> None:
    env = {"AWS_ENDPOINT_URL": "http://aws.example", "FERRYMQ_AWS_ENDPOINT_URL": "http://localhost:4566"}
    assert named_endpoint(env) == "http://localhost:4566"
    assert named_endpoint({"AWS_ENDPOINT_URL": "http://localhost:4566"}) == "http://localhost:4566"


def test_named_endpoint_keeps_the_users_credentials() -> None:
    # boto3 reads only AWS_ENDPOINT_URL; credentials stay whatever the user has
    assert named_environment("http://localhost:4566") == {"AWS_ENDPOINT_URL": "http://localhost:4566"}


def test_standin_gets_its_key_pair_and_the_region() -> None:
    pair = KeyPair("AKIAEXAMPLEEXAMPLE00", "s3cr3t")
    assert standin_environment("http://127.0.0.1:5000", "eu-west-1", pair) == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEEXAMPLE00",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }
