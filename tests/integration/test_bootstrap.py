from ferrymq.aws import session
from ferrymq.infra.bootstrap import bootstrap
from ferrymq.settings import Settings


def test_bootstrap_creates_resources_and_is_idempotent(aws_settings: Settings) -> None:
    # given a bootstrapped endpoint, when bootstrap runs again
    bootstrap(aws_settings)
    # then the tables, bucket and key alias each exist exactly once
    tables = session.client("dynamodb", aws_settings).list_tables()["TableNames"]
    for name in ("queues", "credentials", "partitions", "dedup"):
        assert f"{aws_settings.table_prefix}{name}" in tables
    buckets = [b["Name"] for b in session.client("s3", aws_settings).list_buckets()["Buckets"]]
    assert aws_settings.usage_bucket in buckets
    aliases = session.client("kms", aws_settings).list_aliases()["Aliases"]
    assert [a["AliasName"] for a in aliases].count("alias/ferrymq/managed-sse") == 1
