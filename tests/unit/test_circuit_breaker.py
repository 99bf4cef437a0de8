"""CircuitBreaker: opens after N failures in a row, lets one trial through per cooldown, closes on success."""

from __future__ import annotations

from ferrymq.circuit_breaker import BreakerState, CircuitBreaker
from ferrymq.clock import ManualClock


def test_it_opens_after_failures_in_a_row_and_a_success_in_between_resets_the_count() -> None:
    breaker = CircuitBreaker(ManualClock(), failures=3, cooldown_seconds=1.0)
    breaker.failed()
    breaker.failed()
    breaker.succeeded()
    breaker.failed()
    breaker.failed()
    assert breaker.state is BreakerState.CLOSED and breaker.allow()
    breaker.failed()
    assert breaker.state is BreakerState.OPEN
    assert not breaker.allow()


def test_after_the_cooldown_one_trial_goes_through_and_its_outcome_decides() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(clock, failures=1, cooldown_seconds=1.0)
    breaker.failed()
    clock.advance(1.0)
    assert breaker.state is BreakerState.HALF_OPEN
    # one trial, and no second one while it is out
    assert breaker.allow()
    assert not breaker.allow()
    # a failed trial opens it for another cooldown
    breaker.failed()
    clock.advance(0.5)
    assert not breaker.allow()
    clock.advance(0.5)
    assert breaker.allow()
    # a successful one closes it
    breaker.succeeded()
    assert breaker.state is BreakerState.CLOSED and breaker.allow() and breaker.allow()


def test_a_trial_whose_outcome_never_comes_does_not_keep_it_shut() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(clock, failures=1, cooldown_seconds=1.0)
    breaker.failed()
    clock.advance(1.0)
    assert breaker.allow()  # the trial, never reported
    clock.advance(1.0)
    assert breaker.allow()
