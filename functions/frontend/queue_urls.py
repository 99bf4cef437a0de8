"""Queue URLs: how they name a queue's region, account and name, in the forms SDKs and LocalStack users know.

Forms written (``FERRYMQ_QUEUE_URL_FORM``):

    host    <scheme>://sqs.<region>.<host>[:port]/<account>/<name>    as AWS (sqs.us-east-1.amazonaws.com) and
                                                                      LocalStack's default strategy write them
    path    <base>/queue/<region>/<account>/<name>                     LocalStack's path strategy: for endpoints
                                                                      that are IP addresses, which have no
                                                                      sub-domains to put the region in
    plain   <base>/<account>/<name>                                    what FerryMQ wrote before regions; queues
                                                                      of other regions than the home one get the
                                                                      path form, so no two regions share a URL
    auto    host for a DNS name, path for an IP address or ``localhost`` (whose sub-domains not every
            resolver answers)

Every form is read whatever the setting, with any host (clients reach us by many names), and so is a bare
queue name, which names the caller's queue in the request's region, as AWS resolves it.  A URL that names no
region (the plain form, a legacy ``queue.amazonaws.com`` URL) means the request's region.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from typing import NamedTuple
from urllib.parse import urlsplit

from ferrymq.arn import parse_queue_arn
from ferrymq.errors import InvalidAddress, InvalidParameterValue

FORMS = ("auto", "host", "path", "plain")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")


class QueueAddress(NamedTuple):
    region: str | None
    """None: the URL names no region (the request's is meant)."""
    account: str
    name: str


def queue_url(base: str, account: str, name: str, *, region: str, home_region: str, form: str = "plain") -> str:
    """The URL of queue ``name`` of ``account`` in ``region``, for a client that reached us at ``base``."""
    base = base.rstrip("/")
    if form == "auto":
        form = "path" if _is_address_or_localhost(urlsplit(base).hostname or "") else "host"
    if form == "host":
        parts = urlsplit(base)
        host = parts.netloc
        if _region_of_host(parts.hostname or "") is not None:
            # Reached at sqs.<some region>.<host>: name the queue's region in its place.
            host = host.split(".", 2)[2]
        prefix = f"{parts.scheme}://sqs.{region}.{host}{parts.path}"
        return f"{prefix}/{account}/{name}"
    if form == "plain" and region == home_region:
        return f"{base}/{account}/{name}"
    if form not in ("path", "plain"):
        raise ValueError(f"unknown queue URL form {form!r}; one of {', '.join(FORMS)}")
    return f"{base}/queue/{region}/{account}/{name}"


@functools.lru_cache(maxsize=4096)
def parse_queue_url(url: str, caller_account: str | None = None) -> QueueAddress:
    """The queue a QueueUrl names (any of the forms above, or a bare name of ``caller_account``'s).

    Cached: a request reads its QueueUrl three times (throttle, queue lookup, usage record) and clients name
    the same few queues over and over; a URL that is refused raises every time (exceptions are not cached)."""
    if caller_account is not None and url and "/" not in url:
        return QueueAddress(None, caller_account, url)
    # Split by hand: this runs on every request, and urlsplit costs more than all the rest together.
    host_region: str | None = None
    path = url
    scheme_end = url.find("://")
    if scheme_end >= 0:
        rest = url[scheme_end + 3 :]
        slash = rest.find("/")
        host, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
        if host.startswith("sqs.") or ".queue." in host:
            host_region = _region_of_host(host.rpartition("@")[2].partition(":")[0])
    path = path.partition("?")[0]
    segments = [p for p in path.split("/") if p]
    # The last segments name the queue; any before them are a base path (an API Gateway stage, a proxy's).
    region: str | None
    if len(segments) >= 4 and segments[-4] == "queue" and _REGION.match(segments[-3]):
        region, account, name = segments[-3], segments[-2], segments[-1]
    elif len(segments) >= 2:
        region, account, name = host_region, segments[-2], segments[-1]
    else:
        raise InvalidAddress(f"The address {url} is not valid for this endpoint.")
    if len(account) != 12 or not account.isdigit() or not account.isascii():
        raise InvalidAddress(f"The address {url} is not valid for this endpoint.")
    return QueueAddress(region, account, name)


def split_queue_url(url: str, caller_account: str | None = None) -> tuple[str, str]:
    """(account, name) named by a queue URL, whatever region it names."""
    address = parse_queue_url(url, caller_account)
    return address.account, address.name


def split_queue_arn(arn: str) -> tuple[str, str]:
    """(account, name) named by a queue ARN ``arn:aws:sqs:<region>:<account>:<name>``."""
    parsed = parse_queue_arn(arn)
    if parsed is None:
        raise InvalidParameterValue(f"Value {arn} for parameter ARN is invalid.")
    return parsed.account, parsed.name


def _region_of_host(host: str) -> str | None:
    """``us-west-1`` for ``sqs.us-west-1.amazonaws.com`` or ``us-west-1.queue.amazonaws.com``, else None."""
    labels = host.lower().split(".")
    if len(labels) >= 3 and labels[0] == "sqs" and _REGION.match(labels[1]):
        return labels[1]
    if len(labels) >= 3 and labels[1] == "queue" and _REGION.match(labels[0]):
        return labels[0]
    return None


def _is_address_or_localhost(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True
