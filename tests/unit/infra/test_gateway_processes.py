"""How many gateway processes `up` starts, and the share of the port's limits each one takes."""

from __future__ import annotations

import pytest

from ferrymq.clock import ManualClock
from ferrymq.frontend.throttle import Throttle
from ferrymq.infra.gateway import process_share
from ferrymq.settings import Settings


@pytest.mark.parametrize(("cores", "processes"), [(None, 1), (1, 1), (2, 1), (4, 1), (7, 2), (8, 2), (16, 5),
                                                  (64, 21), (1024, 64)])
def test_auto_gives_a_gateway_process_per_three_cores_beyond_the_first(cores: int | None, processes: int,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: cores)
    assert Settings.from_env({}).gateway_processes == processes
    assert Settings.from_env({"FERRYMQ_GATEWAY_PROCESSES": " Auto "}).gateway_processes == processes
    assert Settings.from_env({"FERRYMQ_GATEWAY_PROCESSES": "3"}).gateway_processes == 3


@pytest.mark.parametrize("value", ["0", "-2", "65", "100000", "", "two", "1.5", "9" * 5000])
def test_a_count_that_is_no_number_of_processes_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(ValueError, match=r"^FERRYMQ_GATEWAY_PROCESSES: "):
        Settings.from_env({"FERRYMQ_GATEWAY_PROCESSES": value})


def test_one_process_keeps_the_limits_as_they_are() -> None:
    settings = Settings(gateway_processes=1, throttle_frontends=2)
    assert process_share(settings) == settings


def test_each_of_several_processes_takes_its_share_of_the_ports_limits() -> None:
    settings = Settings(gateway_processes=3, throttle_frontends=2, max_connections_per_client=512,
                        unauthenticated_buffer_bytes=64 * 2**20)
    share = process_share(settings)
    assert share.throttle_frontends == 6, "two hosts of three processes each"
    assert share.max_connections_per_client == 171, "512 / 3, rounded up"
    assert share.unauthenticated_buffer_bytes == 64 * 2**20 // 3
    assert process_share(Settings(gateway_processes=4, max_connections_per_client=1)).max_connections_per_client == 1


def test_two_processes_throttling_together_let_the_account_s_rate_through_not_twice_it() -> None:
    # given an account limit of 10 requests/s with 1 s of burst, shared by two gateway processes
    clock = ManualClock()
    settings = process_share(Settings(gateway_processes=2, throttle_account_rate=10.0, throttle_action_rate=0.0,
                                      throttle_queue_rate=0.0, throttle_burst_seconds=1.0))
    processes = [Throttle(settings, clock), Throttle(settings, clock)]
    # when each takes as many requests as it admits at once
    admitted = sum(1 for throttle in processes for _ in range(100) if throttle.admit("111122223333", "SendMessage"))
    # then together they let the account's burst through, not one burst each
    assert admitted == 10
