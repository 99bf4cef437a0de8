"""What an action handler is given: the caller, where it reached us, and the services it may use."""

from __future__ import annotations

from dataclasses import dataclass

from ferrymq.aws.credentials import Credential
from ferrymq.aws.queue_store import QueueRecord
from ferrymq.clock import Clock
from ferrymq.errors import AccessDenied, MissingParameter
from ferrymq.settings import Settings
from functions.frontend.dispatch import Dispatcher
from functions.frontend.queue_urls import queue_url, split_queue_url
from functions.metadata.catalog import QueueCatalog


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    clock: Clock
    catalog: QueueCatalog
    dispatcher: Dispatcher


@dataclass(frozen=True, slots=True)
class RequestContext:
    services: Services
    credential: Credential
    base_url: str
    # Query protocol only: the queue named by the request path, when the request carries no QueueUrl.
    path_queue_url: str | None = None

    @property
    def account(self) -> str:
        return self.credential.account_id

    def url_of(self, queue: QueueRecord) -> str:
        base = self.services.settings.queue_url_base or self.base_url
        return queue_url(base, queue.account, queue.name)

    async def queue(self, params: dict) -> QueueRecord:
        """The live queue a request's QueueUrl names, checked against the caller's account."""
        url = params.get("QueueUrl") or self.path_queue_url
        if not url:
            raise MissingParameter("The request must contain the parameter QueueUrl.")
        account, name = split_queue_url(url)
        if account != self.account:
            raise AccessDenied(f"Access to the resource {url} is denied.")
        return await self.services.catalog.get(account, name)
