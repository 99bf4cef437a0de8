"""The last failed requests, for the dashboard's recent errors: bounded, and cheap to add to."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
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
        self.added = 0
        """Errors added since the start: whether any came since a look."""

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
        self.added += 1

    def all(self) -> list[FailedRequest]:
        """Oldest first."""
        return list(self._entries)

    def latest(self, account: str | None, limit: int, more: Iterable[FailedRequest] = ()) -> list[FailedRequest]:
        """Newest first, with ``more`` (other processes' errors) among them; ``account`` None: every account's
        (and the unauthenticated ones)."""
        entries = sorted([*self._entries, *more], key=lambda e: e.at) if more else self._entries
        found: list[FailedRequest] = []
        for entry in reversed(entries):
            if account is None or entry.account == account:
                found.append(entry)
                if len(found) >= limit:
                    break
        return found
