"""What an action handler is given: the caller, where it reached us, and the services it may use."""

from __future__ import annotations

from dataclasses import dataclass

from ferrymq.aws.credentials import Credential
from ferrymq.aws.dedup_store import DedupStore
from ferrymq.aws.queue_store import QueueRecord
from ferrymq.bulkhead import Bulkhead
from ferrymq.clock import Clock
from ferrymq.errors import AccessDenied, MissingParameter, QueueDoesNotExist
from ferrymq.frontend.admin_services import AdminServices
from ferrymq.frontend.dispatch import Dispatcher
from ferrymq.frontend.encryption import MessageCipher
from ferrymq.frontend.metrics.recorder import FrontendMetrics
from ferrymq.frontend.queue_urls import parse_queue_url, queue_url
from ferrymq.metadata import policy
from ferrymq.metadata.catalog import QueueCatalog
from ferrymq.metadata.event_source_mappings import MappingStore
from ferrymq.settings import Settings


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    clock: Clock
    catalog: QueueCatalog
    dispatcher: Dispatcher
    dedup: DedupStore
    # Server-side encryption of message bodies and attributes; None: messages are stored as sent.
    cipher: MessageCipher | None = None
    # Where blocking DynamoDB calls run (ferrymq/bulkhead.py); None: the event loop's default threads.
    metadata: Bulkhead | None = None
    # What requests did, for /metrics and CloudWatch (functions/frontend/metrics); None: nothing is counted.
    metrics: FrontendMetrics | None = None
    # What FerryMQ's own actions use (keys, cluster registries, usage bucket); None: they answer unavailable.
    admin: AdminServices | None = None
    # Event-source mappings (push delivery); None: their actions answer unavailable.
    mappings: MappingStore | None = None


@dataclass(frozen=True, slots=True)
class RequestContext:
    services: Services
    credential: Credential
    base_url: str
    # Query protocol only: the queue named by the request path, when the request carries no QueueUrl.
    path_queue_url: str | None = None
    # The SQS action being served: what another account's queue policy has to allow.
    action: str = ""
    # The X-Amzn-Trace-Id header, which AWS keeps on sent messages as their AWSTraceHeader.
    trace_header: str | None = None
    # Whether the request arrived over TLS: the policy condition key aws:SecureTransport.
    secure_transport: bool = False
    # The client's address as the server reports the connection's peer (not the X-Forwarded-For header usage
    # records prefer, which any client can write): the policy condition key aws:SourceIp.
    source_ip: str | None = None

    @property
    def account(self) -> str:
        return self.credential.account_id

    @property
    def region(self) -> str:
        """The request's region: its SigV4 credential scope."""
        return self.credential.region or self.services.settings.region

    def url_of(self, queue: QueueRecord) -> str:
        settings = self.services.settings
        return queue_url(
            settings.queue_url_base or self.base_url,
            queue.account,
            queue.name,
            region=self.services.catalog.region_of(queue),
            home_region=settings.region,
            form=settings.queue_url_form,
        )

    async def queue(self, params: dict) -> QueueRecord:
        """The live queue a request's QueueUrl names, if the caller may perform this action on it.

        The URL's region, when it names one, else the request's, is the queue's.

        The owner account may do anything its queue's policy does not explicitly deny it; another account only
        what the policy allows it.  Whether another account's queue is missing or merely closed to the caller,
        the answer is the same AccessDenied.
        """
        url = params.get("QueueUrl") or self.path_queue_url
        if not url:
            raise MissingParameter("The request must contain the parameter QueueUrl.")
        account, name = (address := parse_queue_url(url, self.account))[1:]
        region = address.region or self.region
        if account == self.account:
            queue = await self.services.catalog.get(account, name, region)
            if "Policy" in queue.attributes and self._denied_to_owner(queue):
                raise AccessDenied(f"Access to the resource {url} is denied.")
            return queue
        denied = AccessDenied(f"Access to the resource {url} is denied.")
        try:
            queue = await self.services.catalog.get(account, name, region)
        except QueueDoesNotExist:
            raise denied from None
        if not self.permitted(queue):
            raise denied
        return queue

    def permitted(self, queue: QueueRecord) -> bool:
        """Whether the caller may perform this request's action on ``queue`` (decided from the cached record)."""
        if queue.account == self.account:
            # Without a policy (most queues) the owner's request costs this one lookup, and no parse.
            return "Policy" not in queue.attributes or not self._denied_to_owner(queue)
        caller = policy.Caller(self.account, self.credential.user_name)
        return policy.permits(queue.attributes.get("Policy"), caller, self.action, self.services.catalog.arn_of(queue),
                              self._facts())

    def _denied_to_owner(self, queue: QueueRecord) -> bool:
        """Whether an explicit Deny in the owner's own queue policy refuses it this request."""
        caller = policy.Caller(self.account, self.credential.user_name)
        return policy.denies(queue.attributes.get("Policy"), caller, self.action, self.services.catalog.arn_of(queue),
                             self._facts(), admin=self.credential.admin)

    def _facts(self) -> policy.RequestFacts:
        return policy.RequestFacts(now=self.services.clock.now(), source_ip=self.source_ip,
                                   secure_transport=self.secure_transport)
