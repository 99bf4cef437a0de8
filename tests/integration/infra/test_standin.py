"""The durable AWS stand-in as a real process: state survives kill -9, clean stops and torn journals; expired
items of tables with TTL enabled are deleted, for good."""

from __future__ import annotations

import datetime
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

from ferrymq.infra import aws_target
from ferrymq.infra.standin import layout
from ferrymq.settings import Settings
from tests.integration.infra.processes import Started, child_env, python_module, running

TABLE = "items"
BUCKET = "standin-bucket"


def _standin(data_dir: Path, *extra: str) -> Any:
    argv = python_module("ferrymq.infra.standin", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir),
                         *extra)
    return running(argv, layout.READY_PREFIX)


def _client(service: str, standin: Started) -> Any:
    return boto3.client(service, endpoint_url=standin.url, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test")


def _create_table(dynamodb: Any) -> None:
    dynamodb.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )


def _item(dynamodb: Any, pk: str) -> dict[str, Any] | None:
    return dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": pk}}, ConsistentRead=True).get("Item")


def test_everything_survives_kill_9(tmp_path: Path) -> None:
    # given a table with items, a bucket with an object, and a KMS key with an alias and a data key
    with _standin(tmp_path) as standin:
        dynamodb, s3, kms = _client("dynamodb", standin), _client("s3", standin), _client("kms", standin)
        _create_table(dynamodb)
        for i in range(20):
            dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": f"k{i}"}, "n": {"N": str(i)}})
        dynamodb.update_item(TableName=TABLE, Key={"pk": {"S": "k1"}}, UpdateExpression="ADD n :d",
                             ExpressionAttributeValues={":d": {"N": "100"}})
        dynamodb.delete_item(TableName=TABLE, Key={"pk": {"S": "k2"}})
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="usage/2025/record one.json", Body=b'{"n": 1}',
                      Metadata={"my_field": "kept"})
        last_modified = s3.head_object(Bucket=BUCKET, Key="usage/2025/record one.json")["LastModified"]
        key_id = kms.create_key(Description="stand-in test")["KeyMetadata"]["KeyId"]
        kms.create_alias(AliasName="alias/standin-test", TargetKeyId=key_id)
        data_key = kms.generate_data_key(KeyId="alias/standin-test", KeySpec="AES_256",
                                         EncryptionContext={"queue": "q1"})
        # when the process is killed with SIGKILL and started again on the same directory
        standin.kill9()
    with _standin(tmp_path) as standin:
        dynamodb, s3, kms = _client("dynamodb", standin), _client("s3", standin), _client("kms", standin)
        # then items, the object (with metadata and timestamp) and the key are all there
        assert _item(dynamodb, "k1") == {"pk": {"S": "k1"}, "n": {"N": "101"}}
        assert _item(dynamodb, "k2") is None
        assert dynamodb.scan(TableName=TABLE, Select="COUNT")["Count"] == 19
        head = s3.head_object(Bucket=BUCKET, Key="usage/2025/record one.json")
        assert head["Metadata"] == {"my_field": "kept"}
        assert head["LastModified"] == last_modified
        assert s3.get_object(Bucket=BUCKET, Key="usage/2025/record one.json")["Body"].read() == b'{"n": 1}'
        assert kms.describe_key(KeyId="alias/standin-test")["KeyMetadata"]["KeyId"] == key_id
        # and the ciphertext made before the crash still decrypts
        plaintext = kms.decrypt(CiphertextBlob=data_key["CiphertextBlob"], EncryptionContext={"queue": "q1"})
        assert plaintext["Plaintext"] == data_key["Plaintext"]
        # and the restarted stand-in keeps taking writes
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "after"}})
        assert _item(dynamodb, "after") == {"pk": {"S": "after"}}


def test_conditional_failures_change_nothing_across_restarts(tmp_path: Path) -> None:
    # given an item, and a conditional put that fails because the item exists
    with _standin(tmp_path) as standin:
        dynamodb = _client("dynamodb", standin)
        _create_table(dynamodb)
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "lease"}, "epoch": {"N": "1"}})
        with pytest.raises(dynamodb.exceptions.ConditionalCheckFailedException):
            dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "lease"}, "epoch": {"N": "2"}},
                              ConditionExpression="attribute_not_exists(pk)")
        standin.kill9()
    # when restarted, then the failed write left no trace
    with _standin(tmp_path) as standin:
        assert _item(_client("dynamodb", standin), "lease") == {"pk": {"S": "lease"}, "epoch": {"N": "1"}}


def test_versioned_objects_keep_their_version_ids(tmp_path: Path) -> None:
    # given a versioned bucket: each put gets a random version id, which replay could not reproduce
    with _standin(tmp_path) as standin:
        s3 = _client("s3", standin)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        first = s3.put_object(Bucket=BUCKET, Key="k", Body=b"one")["VersionId"]
        second = s3.put_object(Bucket=BUCKET, Key="k", Body=b"two")["VersionId"]
        standin.kill9()
    # when restarted after kill -9, then both versions are there under the ids the client was given
    with _standin(tmp_path) as standin:
        s3 = _client("s3", standin)
        assert s3.get_object(Bucket=BUCKET, Key="k", VersionId=first)["Body"].read() == b"one"
        assert s3.get_object(Bucket=BUCKET, Key="k", VersionId=second)["Body"].read() == b"two"


def test_a_torn_journal_tail_is_dropped(tmp_path: Path) -> None:
    # given items written, then a crash that left half a record at the end of the journal
    with _standin(tmp_path) as standin:
        dynamodb = _client("dynamodb", standin)
        _create_table(dynamodb)
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "whole"}})
        standin.kill9()
    with (tmp_path / layout.JOURNAL_FILE).open("ab") as journal:
        journal.write(b"\x00\x00\x10\x00\x12\x34")
    # when restarted, then every complete record is applied and the stand-in serves
    with _standin(tmp_path) as standin:
        assert _item(_client("dynamodb", standin), "whole") == {"pk": {"S": "whole"}}


def test_a_small_journal_limit_snapshots_as_it_goes(tmp_path: Path) -> None:
    # given a stand-in that snapshots whenever the journal holds anything
    with _standin(tmp_path, "--journal-limit-bytes", "1") as standin:
        dynamodb = _client("dynamodb", standin)
        _create_table(dynamodb)
        for i in range(5):
            dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": f"k{i}"}})
        # then the journal stays empty
        assert (tmp_path / layout.JOURNAL_FILE).stat().st_size == 0
        standin.kill9()
    # and after kill -9 everything is in the snapshot
    with _standin(tmp_path) as standin:
        assert _client("dynamodb", standin).scan(TableName=TABLE, Select="COUNT")["Count"] == 5


def test_clean_stop_snapshots_and_empties_the_journal(tmp_path: Path) -> None:
    # given some journaled writes
    with _standin(tmp_path) as standin:
        dynamodb = _client("dynamodb", standin)
        _create_table(dynamodb)
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "k"}})
        assert (tmp_path / layout.JOURNAL_FILE).stat().st_size > 0
        # when stopped with SIGTERM
        status = standin.terminate()
    # then it exits 0 with the state in the snapshot and nothing left to replay
    assert status == 0
    assert (tmp_path / layout.JOURNAL_FILE).stat().st_size == 0
    assert (tmp_path / layout.SNAPSHOT_FILE).stat().st_size > 0
    with _standin(tmp_path) as standin:
        assert _item(_client("dynamodb", standin), "k") == {"pk": {"S": "k"}}


def test_a_second_standin_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    # given a running stand-in
    with _standin(tmp_path):
        # when another one starts on its directory
        second = subprocess.run(
            python_module("ferrymq.infra.standin", "--port", "0", "--data-dir", str(tmp_path)),
            capture_output=True, text=True, timeout=60, env=child_env(),
        )
    # then it exits without serving
    assert second.returncode != 0
    assert "another stand-in is using" in second.stderr
    assert layout.READY_PREFIX not in second.stdout


def test_dates_survive_as_utc(tmp_path: Path) -> None:
    # given a table created before a restart
    with _standin(tmp_path) as standin:
        dynamodb = _client("dynamodb", standin)
        _create_table(dynamodb)
        created = dynamodb.describe_table(TableName=TABLE)["Table"]["CreationDateTime"]
        standin.kill9()
    # then its creation time is unchanged afterwards
    with _standin(tmp_path) as standin:
        again = _client("dynamodb", standin).describe_table(TableName=TABLE)["Table"]["CreationDateTime"]
    assert again == created
    assert isinstance(again, datetime.datetime)


def _until(condition: Callable[[], bool], what: str, attempts: int = 400) -> None:
    """Poll ``condition`` every 50 ms; give up after ``attempts`` looks (a guard against hanging, not a timing)."""
    for _ in range(attempts):
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} never happened")


def test_expired_items_of_ttl_tables_are_deleted_and_stay_deleted(tmp_path: Path) -> None:
    now = int(time.time())
    # given a stand-in sweeping every 0.2 s, and a table with TTL on "expires" holding an item that expires in an
    # hour and one whose "expires" is not a number; and a table without TTL holding an item expired by its clock
    with _standin(tmp_path, "--ttl-sweep-seconds", "0.2") as standin:
        dynamodb = _client("dynamodb", standin)
        _create_table(dynamodb)
        dynamodb.update_time_to_live(TableName=TABLE,
                                     TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"})
        live = {"pk": {"S": "live"}, "expires": {"N": str(now + 3600)}}
        text = {"pk": {"S": "text"}, "expires": {"S": str(now - 3600)}}
        dynamodb.put_item(TableName=TABLE, Item=live)
        dynamodb.put_item(TableName=TABLE, Item=text)
        dynamodb.create_table(
            TableName="no-ttl",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        )
        untimed = {"pk": {"S": "untimed"}, "expires": {"N": str(now - 3600)}}
        dynamodb.put_item(TableName="no-ttl", Item=untimed)
        # when an item that expired an hour ago is put last, and a sweep runs
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "expired"}, "expires": {"N": str(now - 3600)}})
        _until(lambda: _item(dynamodb, "expired") is None, "a sweep deleting the expired item")
        # then the sweep that deleted it, which saw every item, left the others
        assert _item(dynamodb, "live") == live
        assert _item(dynamodb, "text") == text
        assert dynamodb.get_item(TableName="no-ttl", Key={"pk": {"S": "untimed"}})["Item"] == untimed
        standin.kill9()
    # and after kill -9 and a restart with no sweep due for an hour, the expired item is still gone: its
    # delete was journaled, not only applied in memory
    with _standin(tmp_path, "--ttl-sweep-seconds", "3600") as standin:
        dynamodb = _client("dynamodb", standin)
        assert _item(dynamodb, "expired") is None
        assert _item(dynamodb, "live") == live
        assert dynamodb.scan(TableName=TABLE, Select="COUNT")["Count"] == 2


def test_a_stand_in_launched_by_up_is_called_before_it_serves_and_answers_once_it_does(tmp_path: Path) -> None:
    # given a stand-in launched as `up` launches it: its socket bound and listening first, then handed to it
    settings = Settings.from_env({"FERRYMQ_DATA_DIR": str(tmp_path)})
    starting, endpoint = aws_target.launch_standin(settings, child_env())
    try:
        key_pair = aws_target.standin_key_pair(settings)
        dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                                aws_access_key_id=key_pair.access_key_id,
                                aws_secret_access_key=key_pair.secret_access_key)
        # when it is called while still starting (its imports alone take longer than this)
        assert starting.poll() is None
        # then the call waits for it, not refused, and is answered once it serves
        assert dynamodb.list_tables()["TableNames"] == []
        child = starting.wait_ready(timeout=60)
        assert child.ready_fields == [endpoint]
    finally:
        starting.child.stop()
    # and once it has stopped, nothing holds its port (this process let its copy of the socket go)
    port = int(endpoint.rsplit(":", 1)[1])
    with socket.create_server(("127.0.0.1", port)):
        pass
