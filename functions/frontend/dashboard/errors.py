"""The last failed requests, for the dashboard's recent errors: bounded, and cheap to add to."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ferrymq.errors import SqsError

DEFAULT_CAPACITY = 200
# Enough of a message to tell failures apart; a client's input may be echoed in it at any length.
_MAX_MESSAGE = 300


@dataclass(frozen=True, slots=True)
class FailedRequest:
    at: float
    """When the request arrived, in seconds since the epoch."""
    account: str | None
    """None: the request failed before its signature was verified."""
    action: str | None
    code: str
    message: str
    request_id: str


class RecentErrors:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._entries: deque[FailedRequest] = deque(maxlen=max(1, capacity))

    def add(self, at: float, account: str | None, action: str | None, error: BaseException, request_id: str) -> None:
        if isinstance(error, SqsError):
            # The code an SDK shows its user (the query code, which the JSON protocol sends in x-amzn-query-error
            # and botocore reports), so the row can be matched with what the client logged.
            code, message = error.query_code, error.message or ""
        else:
            # An unexpected error's text is for the log, not for every key holder: its code says enough.
            code, message = "InternalFailure", "We encountered an internal error. Please try again."
        if len(message) > _MAX_MESSAGE:
            message = f"{message[:_MAX_MESSAGE]}..."
        self._entries.append(FailedRequest(at, account, action, code, message, request_id))

    def latest(self, account: str | None, limit: int) -> list[FailedRequest]:
        """Newest first; ``account`` None: every account's (and the unauthenticated ones)."""
        found: list[FailedRequest] = []
        for entry in reversed(self._entries):
            if account is None or entry.account == account:
                found.append(entry)
                if len(found) >= limit:
                    break
        return found
