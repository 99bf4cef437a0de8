"""The coordination client's botocore config: one lease call, answered or not, ends well inside the lease."""

from __future__ import annotations

import pytest

from ferrymq.aws import session
from ferrymq.aws.replica_sets import ReplicaSets
from ferrymq.settings import Settings


@pytest.mark.parametrize("lease_seconds", [2.0, 5.0, 30.0])
def test_a_lease_call_ends_within_half_the_lease_with_no_hidden_retry(lease_seconds: float) -> None:
    config = session.lease_config(lease_seconds)
    assert config.retries["total_max_attempts"] == 1
    assert config.connect_timeout + config.read_timeout <= lease_seconds / 2


def test_replica_sets_from_settings_make_lease_writes_on_the_lease_bounded_client() -> None:
    # given a worker's settings with a two-second lease (the fault suite's)
    settings = Settings(leader_lease_seconds=2.0, aws_endpoint_url="http://127.0.0.1:9")
    # when the replica-set adapter is built from them, then its lease writes are bounded by the lease, not
    # 3 x 30 s (scans and in-sync set writes keep the default client: no renewal waits on them)
    config = ReplicaSets.from_settings(settings)._lease_client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (0.5, 0.5)
    assert config.retries["total_max_attempts"] == 1
