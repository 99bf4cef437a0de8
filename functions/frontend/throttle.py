"""Request throttling: token buckets per account, per account and action, per queue, and SQS's FIFO quota.

Checked right after authentication and parsing, before any metadata lookup or worker call, so a throttled
request costs a few dictionary lookups on top of verifying its signature (benchmarks/throttle_bench.py). The
state is this process's memory: with several front-end processes each takes an equal share of every limit
(``Settings.throttle_frontends``), so a throttled request never waits on a network call; see
docs/design/throttling.md for why not shared counters in DynamoDB.

A refused request gets SQS's throttling error in the protocol it spoke: ``RequestThrottled`` (HTTP 403) in the
query protocol, ``ThrottlingException`` (HTTP 400, ``x-amzn-query-error: Throttling;Sender``) in AWS JSON.
Both are codes botocore's retry handlers, legacy and standard, treat as throttling, so SDKs back off.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from ferrymq.clock import Clock
from ferrymq.errors import RequestThrottled, SqsError, Throttling
from ferrymq.frontend.queue_urls import parse_queue_url
from ferrymq.metadata.catalog import QueueCatalog
from ferrymq.settings import Settings

# SQS meters a FIFO queue's quota per API action on the actions that move messages.
FIFO_METERED_ACTIONS = frozenset(
    {
        "SendMessage",
        "SendMessageBatch",
        "ReceiveMessage",
        "DeleteMessage",
        "DeleteMessageBatch",
        "ChangeMessageVisibility",
        "ChangeMessageVisibilityBatch",
    }
)
# Buckets kept before idle (full) ones are forgotten: a forgotten bucket starts full again, which is what an
# idle one was anyway, so forgetting never throttles anyone.
MAX_BUCKETS = 100_000


class TokenBucket:
    """``capacity`` tokens, refilled at ``rate`` per second; a request takes one."""

    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.stamp = now

    def refill(self, now: float) -> float:
        """The tokens available at ``now`` (monotonic seconds)."""
        elapsed = now - self.stamp
        if elapsed > 0:
            self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
            self.stamp = now
        return self.tokens

    def take(self, now: float) -> bool:
        if self.refill(now) >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@dataclass(frozen=True, slots=True)
class Limit:
    """A bucket's shape: its refill rate and how many requests it lets through back to back."""

    rate: float
    capacity: float

    @classmethod
    def of(cls, rate: float, settings: Settings) -> Limit | None:
        """This process's share of ``rate`` requests/s shared by all front ends; None when the bucket is off."""
        if rate <= 0:
            return None
        share = rate / max(1, settings.throttle_frontends)
        # At least one token, so a share below one request per burst still lets requests through at its rate.
        return cls(share, max(1.0, share * settings.throttle_burst_seconds))


class Throttle:
    def __init__(self, settings: Settings, clock: Clock, *, max_buckets: int = MAX_BUCKETS) -> None:
        self._clock = clock
        self._account = Limit.of(settings.throttle_account_rate, settings)
        self._action = Limit.of(settings.throttle_action_rate, settings)
        self._queue = Limit.of(settings.throttle_queue_rate, settings)
        self._fifo = Limit.of(settings.throttle_fifo_rate, settings)
        self._fifo_high = Limit.of(settings.throttle_fifo_high_throughput_rate, settings)
        self._buckets: dict[Hashable, TokenBucket] = {}
        self._max_buckets = max_buckets

    def admit(self, account: str, action: str, queue: tuple[str, str, str] | None = None,
              fifo_high_throughput: bool | None = None) -> bool:
        """Take a token from every bucket the request counts against, or from none if any is empty.

        ``queue`` is (account, region, name) when the request names one; ``fifo_high_throughput`` says which
        FIFO quota a ``.fifo`` queue has (None: unknown, its quota is not applied to this request).
        """
        now = self._clock.monotonic()
        wanted: list[TokenBucket] = []
        if self._account is not None:
            wanted.append(self._bucket(("account", account), self._account, now))
        if self._action is not None:
            wanted.append(self._bucket(("action", account, action), self._action, now))
        if queue is not None:
            if self._queue is not None:
                wanted.append(self._bucket(("queue", queue), self._queue, now))
            if fifo_high_throughput is not None and action in FIFO_METERED_ACTIONS:
                fifo = self._fifo_high if fifo_high_throughput else self._fifo
                if fifo is not None:
                    wanted.append(self._bucket(("fifo", queue, action, fifo_high_throughput), fifo, now))
        for bucket in wanted:
            if bucket.refill(now) < 1.0:
                return False
        for bucket in wanted:
            bucket.tokens -= 1.0
        return True

    def _bucket(self, key: Hashable, limit: Limit, now: float) -> TokenBucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._max_buckets:
                self._forget_idle(now)
            bucket = self._buckets[key] = TokenBucket(limit.rate, limit.capacity, now)
        return bucket

    def _forget_idle(self, now: float) -> None:
        idle = [key for key, bucket in self._buckets.items() if bucket.refill(now) >= bucket.capacity]
        for key in idle:
            del self._buckets[key]
        if len(self._buckets) >= self._max_buckets:
            # Every bucket is in use: a flood of distinct keys. Starting them all afresh lets at most one
            # burst more through, where keeping them would let memory grow without bound.
            self._buckets.clear()

    def __len__(self) -> int:
        return len(self._buckets)


def throttled(protocol: str) -> SqsError:
    """SQS's answer to a throttled request, in the request's protocol."""
    if protocol == "json":
        return Throttling("Rate exceeded")
    return RequestThrottled("Request is throttled.")


class RequestThrottle:
    """What the pipeline asks: may this parsed request go on? Reads only cached queue metadata."""

    def __init__(self, throttle: Throttle, catalog: QueueCatalog, home_region: str) -> None:
        self._throttle = throttle
        self._catalog = catalog
        self._home_region = home_region

    def check(self, protocol: str, account: str, region: str | None, action: str, params: dict,
              path_queue_url: str | None) -> None:
        """Raise SQS's throttling error when the request is over any of its limits."""
        queue: tuple[str, str, str] | None = None
        high_throughput: bool | None = None
        url = params.get("QueueUrl") or path_queue_url
        if isinstance(url, str) and url:
            try:
                address = parse_queue_url(url, account)
            except SqsError:
                address = None  # the action answers for the bad URL itself
            if address is not None:
                queue_region = address.region or region or self._home_region
                queue = (address.account, queue_region, address.name)
                if address.name.endswith(".fifo"):
                    high_throughput = self._high_throughput(address.account, address.name, queue_region)
        if not self._throttle.admit(account, action, queue, high_throughput):
            raise throttled(protocol)

    def _high_throughput(self, account: str, name: str, region: str) -> bool | None:
        # Only the cache is read: a throttled request must never cost a DynamoDB call. Before the queue is
        # cached, its first request goes unmetered by the FIFO quota and the action's own lookup caches it.
        record = self._catalog.cached(account, name, region)
        if record is None:
            return None
        attributes = record.attributes
        return (attributes.get("DeduplicationScope") == "messageGroup"
                and attributes.get("FifoThroughputLimit") == "perMessageGroupId")


def build_request_throttle(settings: Settings, clock: Clock, catalog: QueueCatalog) -> RequestThrottle | None:
    """The pipeline's throttle, or None when throttling is turned off."""
    if not settings.throttle_enabled:
        return None
    return RequestThrottle(Throttle(settings, clock), catalog, settings.region)
