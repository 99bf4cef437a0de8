"""Event-source mappings may not point push delivery into the service's own networks: through
``ferrymq.client("ferrymq")`` against the session's stack, a Destination that is or names a private, link-local,
carrier-grade NAT, multicast or unspecified address, or spells a host in a form that could hide one, is Lambda's
InvalidParameterValueException on create and on update, and changes nothing. The session's stack was started by
``ferrymq up``, which allows loopback (FERRYMQ_PUSH_ALLOWED_NETWORKS) for local receivers: loopback is taken."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.config import Config

import ferrymq
from tests.e2e.conftest import Stack, new_queue


@pytest.fixture
def api(stack: Stack) -> Any:
    return ferrymq.client("ferrymq", endpoint_url=stack.endpoint, region_name=stack.region,
                          aws_access_key_id=stack.access_key, aws_secret_access_key=stack.secret_key,
                          config=Config(retries={"total_max_attempts": 1}))


@pytest.fixture
def queue(sdk: Any) -> Iterator[str]:
    url = new_queue(sdk, "guarded")
    yield str(sdk.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])
    sdk.delete_queue(QueueUrl=url)


FORBIDDEN = [
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254, a link-local address"),
    ("http://[::ffff:169.254.169.254]/latest/meta-data/", "link-local"),
    ("http://[::ffff:a9fe:a9fe]/", "link-local"),
    ("http://10.0.0.1:8080/hook", "10.0.0.1, a private"),
    ("http://192.168.1.10/", "private"),
    ("http://172.16.5.4/", "private"),
    ("http://100.64.0.1/", "carrier-grade NAT"),
    ("https://[fd00::1]/", "private"),
    ("http://[fe80::1]/", "link-local"),
    ("http://224.0.0.1/", "multicast"),
    ("http://0.0.0.0:9/", "unspecified"),
    ("http://2130706433/", "four decimal numbers"),
    ("http://0x7f.1/", "four decimal numbers"),
    ("http://0177.0.0.1/", "four decimal numbers"),
    ("http://[fe80::1%25eth0]/", "zone id"),
]


def _refused(call: Any, words: str) -> None:
    with pytest.raises(Exception) as refused:
        call()
    error = refused.value.response  # type: ignore[attr-defined]
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (
        "InvalidParameterValueException", 400), error
    assert words in error["Error"]["Message"], error


@pytest.mark.parametrize(("url", "words"), FORBIDDEN)
def test_a_destination_inside_the_services_networks_is_refused_on_create_and_update(
    api: Any, queue: str, url: str, words: str
) -> None:
    _refused(lambda: api.create_event_source_mapping(EventSourceArn=queue, Destination={"Url": url}), words)
    assert api.list_event_source_mappings(EventSourceArn=queue)["EventSourceMappings"] == []
    made = api.create_event_source_mapping(EventSourceArn=queue, Destination={"Url": "http://127.0.0.1:9/ok"})
    try:
        _refused(lambda: api.update_event_source_mapping(UUID=made["UUID"], Destination={"Url": url}), words)
        assert api.get_event_source_mapping(UUID=made["UUID"])["Destination"] == {"Url": "http://127.0.0.1:9/ok"}
    finally:
        api.delete_event_source_mapping(UUID=made["UUID"])


def test_loopback_is_allowed_on_the_local_stack_and_public_names_that_do_not_resolve_yet_are_taken(
    api: Any, queue: str
) -> None:
    made = [api.create_event_source_mapping(EventSourceArn=queue, Destination={"Url": url})["UUID"]
            for url in ("http://localhost:9/a", "http://[::1]:9/b", "https://hooks.not-yet.example/c")]
    for mapping_id in made:
        api.delete_event_source_mapping(UUID=mapping_id)
