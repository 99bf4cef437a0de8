"""``ferrymq.client("sqs")``: a real boto3 SQS client aimed at FerryMQ, configured from its settings;
``ferrymq.client("ferrymq")``: a botocore client of FerryMQ's own API (cluster status, queue statistics, peek,
usage summaries, access keys), configured the same way.

FerryMQ's API is described as botocore data shipped inside this package (``ferrymq/data/ferrymq/<api
version>/``: the service model, paginators, waiters and an endpoint rule set that takes the endpoint given), so
SigV4, retries, paginators, waiters and modeled errors (``client.exceptions.AccessDenied``...) are botocore's
own. The client comes from a session whose data path includes that folder.

What the client gets, each unless the caller passes its own keyword argument (every boto3 ``client()``
argument passes through, ``config`` merged over the defaults below):

- endpoint: ``FERRYMQ_ENDPOINT_URL``, else ``http://FERRYMQ_HOST:FERRYMQ_PORT`` (``https`` when
  ``FERRYMQ_TLS`` is on or a certificate is named), a wildcard listening host being reached on loopback;
- region: ``FERRYMQ_REGION``, else ``AWS_DEFAULT_REGION``, else ``us-east-1``;
- credentials: explicit ``aws_access_key_id``/``aws_secret_access_key``, else boto3's standard chain
  (environment, profiles, container and instance roles), else the development key of the settings;
- TLS verification: with the local gateway's TLS on, its certificate (``FERRYMQ_TLS_CERT_FILE``, or the
  self-signed one ``ferrymq up`` keeps in ``<data dir>/tls/cert.pem``); otherwise boto3's own
  (system CAs, ``AWS_CA_BUNDLE``);
- retries in botocore's standard mode, and a read timeout above the longest long poll.

boto3 is imported when a client is made, not with this module: the package imports it eagerly to export
:func:`client`, and the storage workers, which import the package too, never need boto3.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ferrymq.destinations import is_fifo
from ferrymq.limits import MAX_WAIT_TIME_SECONDS
from ferrymq.settings import Settings

SUPPORTED_SERVICES = ("sqs", "ferrymq")

DATA_PATH = Path(__file__).resolve().parent / "data"
"""Botocore data of FerryMQ's own service (``ferrymq/<api version>/service-2.json`` and the rest)."""

# Where infra/tls.py writes the self-signed certificate of a local gateway with FERRYMQ_TLS on and no
# certificate named, relative to the data directory.
SELF_SIGNED_CERT = Path("tls") / "cert.pem"

# A gateway listening on every address is reached on loopback.
_WILDCARD_HOSTS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}

MAX_ATTEMPTS = 5
CONNECT_TIMEOUT_SECONDS = 5
# A long poll holds the response for up to 20 s; the read timeout must outlast it with room for the network.
READ_TIMEOUT_SECONDS = MAX_WAIT_TIME_SECONDS + 20
# Enough connections for a consumer's poller, extender and deleter and a producer's senders to share a client.
MAX_POOL_CONNECTIONS = 32


def client(service: str = "sqs", *, settings: Settings | None = None, session: Any = None, **kwargs: Any) -> Any:
    """A client for ``service`` (``"sqs"`` or ``"ferrymq"``) configured for FerryMQ.

    ``settings`` defaults to ``Settings.from_env()``; ``session`` to a new ``boto3.session.Session()`` (for
    ``"ferrymq"``, FerryMQ's data path is added to its loader); ``kwargs`` go to ``session.client`` and override
    what the settings give.
    """
    if service not in SUPPORTED_SERVICES:
        raise ValueError(f"unsupported service {service!r}: ferrymq.client supports {', '.join(SUPPORTED_SERVICES)}")
    import boto3
    from botocore.config import Config

    settings = settings or Settings.from_env()
    session = session or boto3.session.Session()
    if service == "ferrymq":
        add_data_path(session)
    endpoint = kwargs.pop("endpoint_url", None) or endpoint_url(settings)
    if "verify" not in kwargs:
        bundle = ca_bundle(settings, endpoint)
        if bundle is not None:
            kwargs["verify"] = str(bundle)
    if "aws_access_key_id" not in kwargs and "aws_secret_access_key" not in kwargs and (
        session.get_credentials() is None
    ):
        kwargs["aws_access_key_id"] = settings.dev_access_key
        kwargs["aws_secret_access_key"] = settings.dev_secret_key
    defaults = Config(
        retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        max_pool_connections=MAX_POOL_CONNECTIONS,
    )
    given = kwargs.pop("config", None)
    return session.client(
        service,
        endpoint_url=endpoint,
        region_name=kwargs.pop("region_name", None) or settings.region,
        config=defaults.merge(given) if given is not None else defaults,
        **kwargs,
    )


def add_data_path(session: Any) -> None:
    """Let ``session`` (boto3's or botocore's) load FerryMQ's service model; idempotent.

    The session gets a new loader rather than a longer search path: a loader caches the services it listed, so
    one that listed them before would go on not knowing FerryMQ's.
    """
    from botocore.loaders import Loader

    core = getattr(session, "_session", session)
    paths = core.get_component("data_loader").search_paths
    if str(DATA_PATH) not in paths:
        core.register_component(
            "data_loader", Loader(extra_search_paths=[str(DATA_PATH), *paths], include_default_search_paths=False)
        )


def endpoint_url(settings: Settings) -> str:
    """The URL clients reach the front end at."""
    if settings.endpoint_url:
        return settings.endpoint_url
    if settings.port == 0:
        raise ValueError(
            "FERRYMQ_PORT is 0 (a free port picked at start-up), so the endpoint is unknown: set "
            "FERRYMQ_ENDPOINT_URL to the endpoint `ferrymq up` printed"
        )
    host = _WILDCARD_HOSTS.get(settings.host, settings.host)
    if ":" in host:
        host = f"[{host}]"
    return f"{'https' if _local_tls(settings) else 'http'}://{host}:{settings.port}"


def ca_bundle(settings: Settings, endpoint: str) -> Path | None:
    """The certificate that makes a local HTTPS gateway trusted, or None to leave verification to boto3."""
    if not endpoint.startswith("https://") or not _local_tls(settings):
        return None
    return settings.tls_cert_file or settings.data_dir / SELF_SIGNED_CERT


def _local_tls(settings: Settings) -> bool:
    return settings.tls or settings.tls_cert_file is not None


def is_fifo_queue(queue_url: str) -> bool:
    """Whether ``queue_url`` (a queue URL or a bare name) names a FIFO queue, whose names end in ``.fifo``."""
    return is_fifo(queue_url.rstrip("/").rsplit("/", 1)[-1])
