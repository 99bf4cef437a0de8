"""A realistic usage log for the Spark job tests: several accounts and queues, every action kind, errors,
throttled and abusive clients, a late hour, some malformed lines and some lines delivered twice, written as
the front end (or Firehose) writes them.

Deterministic for a seed.  ``UsageLog.lines`` maps object key (relative to the usage prefix, e.g.
``dt=2026-11-21/hour=05/fe-a-....jsonl.gz``) to the text lines stored there.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, field
from datetime import datetime

from ferrymq.usage import schema

ACCOUNTS = ("111111111111", "222222222222", "333333333333", "444444444444")
ABUSIVE_KEY = "AKIAABUSIVE0000000"
THROTTLED_ACCOUNT = "444444444444"
KIB = 1024


@dataclass
class UsageLog:
    lines: dict[str, list[str]] = field(default_factory=dict)

    def add(self, key: str, line: str) -> None:
        self.lines.setdefault(key, []).append(line)

    def bodies(self) -> dict[str, bytes]:
        return {key: gzip.compress(("\n".join(lines) + "\n").encode()) for key, lines in self.lines.items()}

    def all_lines(self, date: str | None = None) -> list[tuple[str, str]]:
        return [(key, line) for key, lines in sorted(self.lines.items()) for line in lines
                if date is None or f"dt={date}/" in key]


def _queues(rng: random.Random) -> list[tuple[str, str, str]]:
    """(account, arn, sse) of every queue."""
    queues = []
    for account in ACCOUNTS:
        for name in ("orders", "emails", "jobs.fifo")[: 2 + ACCOUNTS.index(account) % 2]:
            queues.append((account, f"arn:aws:sqs:us-east-1:{account}:{name}", rng.choice(("none", "sqs", "kms"))))
    return queues


def _record(rng: random.Random, when: float, account: str | None, arn: str | None, sse: str, action: str,
            outcome: str = schema.SUCCESS, status: int = 200, key: str | None = None) -> dict:
    messages_in = entries_failed = bytes_in = messages_out = bytes_out = 0
    ok = outcome == schema.SUCCESS
    if action == "SendMessage":
        messages_in, bytes_in = 1, rng.choice((200, 3 * KIB, 70 * KIB, 256 * KIB))
    elif action == "SendMessageBatch":
        messages_in = rng.randint(2, 10)
        bytes_in = messages_in * rng.choice((100, 10 * KIB, 30 * KIB))
        entries_failed = rng.choice((0, 0, 0, 1)) if ok else 0
    elif action == "ReceiveMessage" and ok:
        messages_out = rng.choice((0, 0, 1, 5, 10))
        bytes_out = messages_out * rng.choice((150, 8 * KIB, 40 * KIB))
    elif action in ("DeleteMessage", "ChangeMessageVisibility"):
        messages_in = 1
    elif action in ("DeleteMessageBatch", "ChangeMessageVisibilityBatch"):
        messages_in = rng.randint(1, 10)
        entries_failed = rng.choice((0, 0, 2)) if ok else 0
    queue_type = None if arn is None else ("fifo" if arn.endswith(".fifo") else "standard")
    return {
        "v": 1, "ts": schema.format_ts(when), "request_id": f"{rng.getrandbits(64):016x}", "account": account,
        "access_key_id": key or (f"AKIA{account}" if account else None), "queue_arn": arn, "action": action,
        "outcome": outcome, "http_status": status, "messages_in": messages_in, "entries_failed": entries_failed,
        "bytes_in": bytes_in, "messages_out": messages_out, "bytes_out": bytes_out,
        "billable_units": schema.billable_units(bytes_in, bytes_out),
        "latency_ms": round(rng.uniform(0.2, 40.0), 3), "instance": rng.choice(("fe-a", "fe-b")),
        "queue_type": queue_type, "sse": sse if arn else "none",
        "kms_calls": 1 if sse == "kms" and arn and action in ("SendMessage", "ReceiveMessage") and rng.random() < 0.3
        else 0,
        "source_ip": f"198.51.100.{rng.randint(1, 254)}", "user_agent": "Boto3/1.44.5 test",
    }


MESSAGE_ACTIONS = ("SendMessage", "SendMessageBatch", "ReceiveMessage", "DeleteMessage", "DeleteMessageBatch",
                   "ChangeMessageVisibility", "ChangeMessageVisibilityBatch", "ReceiveMessage", "SendMessage")
QUEUE_ACTIONS = ("CreateQueue", "GetQueueUrl", "GetQueueAttributes", "SetQueueAttributes", "PurgeQueue",
                 "ListQueueTags", "DeleteQueue")
ERRORS = (("AWS.SimpleQueueService.NonExistentQueue", 400), ("InvalidParameterValue", 400),
          ("ReceiptHandleIsInvalid", 400), ("InternalFailure", 500))

MALFORMED = (
    "{not json",
    "[1, 2, 3]",
    '{"v": 2, "ts": "2026-11-21T01:00:00.000Z"}',
    "{\"v\": 1, \"ts\": \"2026-11-21T01:00:00.000Z\", \"request_id\": \"trunc",
)


def _malformed_variants(rng: random.Random, date: str) -> list[str]:
    base = _record(rng, datetime.fromisoformat(f"{date}T02:00:00+00:00").timestamp(), ACCOUNTS[0],
                   f"arn:aws:sqs:us-east-1:{ACCOUNTS[0]}:orders", "none", "SendMessage")
    missing = {k: v for k, v in base.items() if k != "request_id"}
    return [
        *MALFORMED,
        json.dumps(missing),
        json.dumps({**base, "http_status": "200"}),
        json.dumps({**base, "ts": "yesterday"}),
        json.dumps({**base, "billable_units": 1.5}),
        json.dumps({**base, "account": 111111111111}),
        # A record of another day in this day's partition.
        json.dumps({**base, "ts": "2026-10-31T23:59:59.000Z"}),
    ]


def generate(dates: tuple[str, ...], *, per_hour: int = 30, seed: int = 11, late_hour: tuple[str, int] | None = None,
             ) -> tuple[UsageLog, UsageLog]:
    """(the log as first uploaded, the late objects uploaded afterwards for ``late_hour`` = (date, hour))."""
    rng = random.Random(seed)
    queues = _queues(rng)
    log, late = UsageLog(), UsageLog()
    for date in dates:
        start = datetime.fromisoformat(f"{date}T00:00:00+00:00").timestamp()
        for hour in range(24):
            target = late if late_hour == (date, hour) else log
            key = f"dt={date}/hour={hour:02d}/fe-a-{int((start + hour * 3600) * 1000)}-000001.jsonl.gz"
            busy = per_hour * (3 if 9 <= hour < 17 else 1)
            for _ in range(busy):
                account, arn, sse = rng.choice(queues)
                when = start + hour * 3600 + rng.uniform(0, 3599.999)
                if rng.random() < 0.75:
                    action = rng.choice(MESSAGE_ACTIONS)
                elif rng.random() < 0.8:
                    action = rng.choice(QUEUE_ACTIONS)
                else:
                    action, arn, sse = "ListQueues", None, "none"
                outcome, status = (schema.SUCCESS, 200) if rng.random() < 0.9 else rng.choice(ERRORS)
                target.add(key, json.dumps(_record(rng, when, account, arn, sse, action, outcome, status)))
            if hour in (3, 14):
                # An abusive client: a burst of requests with a key that does not exist.
                for _ in range(60):
                    when = start + hour * 3600 + rng.uniform(0, 3599.999)
                    target.add(key, json.dumps(_record(rng, when, None, None, "none", "Unknown",
                                                       "InvalidClientTokenId", 403, key=ABUSIVE_KEY)))
            if hour == 10:
                # A client being throttled.
                account, arn, sse = next(q for q in queues if q[0] == THROTTLED_ACCOUNT)
                for _ in range(25):
                    when = start + hour * 3600 + rng.uniform(0, 3599.999)
                    target.add(key, json.dumps(_record(rng, when, account, arn, sse, "SendMessage", "RequestThrottled",
                                                       403)))
        for line in _malformed_variants(rng, date):
            log.add(f"dt={date}/hour=02/fe-b-{int(start * 1000)}-000009.jsonl.gz", line)
        # Delivered twice (a Firehose retry): the same lines again in another object of the same hour.
        first = f"dt={date}/hour=12/fe-a-{int((start + 12 * 3600) * 1000)}-000001.jsonl.gz"
        for line in log.lines[first][:15]:
            log.add(f"dt={date}/hour=12/fe-a-{int((start + 12 * 3600) * 1000)}-000002.jsonl.gz", line)
    return log, late
