"""When a storage worker calls itself ready (its admin listener's /health/ready), from what its replicas do."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ferrymq.storage.server.metrics import readiness

LOG = object()


def replica(
    *, log: Any = LOG, term: Any = None, follower: Any = None, following: Any = None, refusing: bool = False
) -> Any:
    return SimpleNamespace(log=log, term=term, follower=follower, following=following, refusing=refusing)


def worker(replicas: dict[int, Any], address: tuple[str, int] | None = ("127.0.0.1", 9000)) -> Any:
    return SimpleNamespace(replicas=replicas, address=address, requests=0)


LEADING = replica(term=object())
FOLLOWING = replica(follower=object(), following=(("127.0.0.1", 7001), 3))


def test_ready_when_every_partition_is_led_or_followed_with_a_known_leader() -> None:
    assert readiness(worker({0: LEADING, 1: FOLLOWING})) == (True, {"0": "leading", "1": "following 127.0.0.1:7001"})


def test_a_spare_holding_no_partition_is_ready() -> None:
    assert readiness(worker({})) == (True, {})


def test_a_partition_without_a_role_or_still_recovering_makes_it_unready() -> None:
    ready, partitions = readiness(worker({0: LEADING, 1: replica(), 2: replica(log=None)}))
    assert not ready
    assert partitions == {"0": "leading", "1": "standing by (no role yet)", "2": "recovering"}


def test_a_worker_not_listening_yet_is_not_ready() -> None:
    assert readiness(worker({0: LEADING}, address=None))[0] is False


def test_a_partition_refused_for_a_damaged_log_makes_it_unready_and_says_so() -> None:
    ready, partitions = readiness(worker({0: LEADING, 1: replica(log=None, refusing=True)}))
    assert not ready
    assert partitions == {"0": "leading", "1": "refused: its log is damaged"}
