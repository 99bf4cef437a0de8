"""An event-source mapping's configuration and Lambda's rules for SQS sources.

Parameters are checked one by one first (their modelled constraints: ValidationException), then together on the
configuration they would make (Lambda's rules: InvalidParameterValueException), so a request that breaks any rule
changes nothing. The same checks serve CreateEventSourceMapping and UpdateEventSourceMapping: an update is checked
as the whole configuration it leaves.
"""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

from ferrymq.arn import parse_queue_arn
from ferrymq.push import destinations, filters
from ferrymq.push.errors import MappingParameterInvalid, MappingValidationError

MAX_BATCH = 10_000
MAX_FIFO_BATCH = 10
UNWINDOWED_BATCH = 10
MAX_WINDOW = 300
MIN_CONCURRENCY, MAX_CONCURRENCY = 2, 1000
MAX_URL_LENGTH = 2048
MAX_ARN_LENGTH = 1024
REPORT_FAILURES = "ReportBatchItemFailures"
DEFAULT_BATCH = 10

# Lambda's FunctionName pattern: a name, a partial ARN or an ARN, each with an optional version or alias.
_FUNCTION = re.compile(
    r"(?:arn:(?P<partition>aws[a-zA-Z-]*)?:lambda:)?(?P<region>[a-z]{2}(?:-gov)?-[a-z]+-\d:)?(?P<account>\d{12}:)?"
    r"(?:function:)?(?P<name>[a-zA-Z0-9_-]+)(?::(?P<qualifier>\$LATEST|[a-zA-Z0-9_-]+))?"
)
_FUNCTION_NAME_MAX = 140
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass(frozen=True, slots=True)
class MappingConfig:
    """What a mapping does: the queue, one target (a function's ARN or a URL) and how it batches."""

    queue_arn: str
    function_arn: str | None
    url: str | None
    batch_size: int = DEFAULT_BATCH
    window_seconds: int = 0
    report_failures: bool = False
    max_concurrency: int | None = None
    filters: tuple[str, ...] = ()
    enabled: bool = True

    @property
    def target(self) -> str:
        return self.function_arn or self.url or ""


def is_uuid(text: object) -> bool:
    return isinstance(text, str) and _UUID.fullmatch(text) is not None


def _int_in(params: dict[str, Any], name: str, member: str, low: int, high: int) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if value < low:
        raise MappingValidationError.at(value, member, f"Member must have value greater than or equal to {low}")
    if value > high:
        raise MappingValidationError.at(value, member, f"Member must have value less than or equal to {high}")
    return int(value)


def function_arn(name: str, region: str, account: str) -> str:
    """The ARN of the function ``name`` names (a name or partial ARN is in the caller's region and account)."""
    if len(name) > _FUNCTION_NAME_MAX:
        raise MappingValidationError.at(name, "functionName",
                                        f"Member must have length less than or equal to {_FUNCTION_NAME_MAX}")
    found = _FUNCTION.fullmatch(name)
    if found is None:
        raise MappingValidationError.at(name, "functionName", f"Member must satisfy regular expression pattern: "
                                        f"{_FUNCTION.pattern}")
    arn = (f"arn:{found['partition'] or 'aws'}:lambda:{(found['region'] or region + ':')}"
           f"{(found['account'] or account + ':')}function:{found['name']}")
    return arn + (f":{found['qualifier']}" if found["qualifier"] else "")


def check_url(url: str) -> str:
    """``url`` if it is an absolute http(s) URL, of ASCII without controls or spaces, carrying no credentials and
    naming its host plainly (no zone id, no IPv4 address in decimal, octal or hex): see ferrymq.push.destinations.
    Where the host resolves is checked by the caller, which may do I/O."""
    bad = MappingParameterInvalid("Destination Url must be an absolute http or https URL, at most "
                                  f"{MAX_URL_LENGTH} printable ASCII characters, without user information.")
    if not 0 < len(url) <= MAX_URL_LENGTH or not url.isascii() or any(c <= " " or c == "\x7f" for c in url):
        raise bad
    try:
        parts = urllib.parse.urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        raise bad from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise bad
    if parts.username is not None or parts.password is not None:
        raise bad
    try:
        destinations.parse(url)
    except destinations.DestinationRefused as exc:
        raise MappingParameterInvalid(str(exc)) from None
    return url


def read_changes(params: dict[str, Any], region: str, account: str) -> dict[str, Any]:
    """The configuration fields ``params`` name, each checked alone (missing parameters are not named)."""
    changes: dict[str, Any] = {}
    batch = _int_in(params, "BatchSize", "batchSize", 1, MAX_BATCH)
    if batch is not None:
        changes["batch_size"] = batch
    window = _int_in(params, "MaximumBatchingWindowInSeconds", "maximumBatchingWindowInSeconds", 0, MAX_WINDOW)
    if window is not None:
        changes["window_seconds"] = window
    if "ScalingConfig" in params:
        scaling = params["ScalingConfig"] or {}
        changes["max_concurrency"] = _int_in(scaling, "MaximumConcurrency", "scalingConfig.maximumConcurrency",
                                             MIN_CONCURRENCY, MAX_CONCURRENCY)
    if "FunctionResponseTypes" in params:
        types = params["FunctionResponseTypes"] or []
        if len(types) > 1 or any(t != REPORT_FAILURES for t in types):
            raise MappingValidationError.at(
                "[" + ", ".join(map(str, types)) + "]", "functionResponseTypes",
                f"Member must satisfy constraint: [Member must satisfy enum value set: [{REPORT_FAILURES}]]")
        changes["report_failures"] = bool(types)
    if "FilterCriteria" in params:
        found = (params["FilterCriteria"] or {}).get("Filters") or []
        if len(found) > filters.MAX_FILTERS:
            raise MappingParameterInvalid(f"The maximum number of filters is {filters.MAX_FILTERS}.")
        patterns = []
        for f in found:
            pattern = f.get("Pattern")
            if not isinstance(pattern, str):
                raise MappingParameterInvalid("Invalid filter pattern definition.")
            filters.parse_pattern(pattern)
            patterns.append(pattern)
        changes["filters"] = tuple(patterns)
    if params.get("Enabled") is not None:
        changes["enabled"] = bool(params["Enabled"])
    if params.get("FunctionName") is not None:
        changes["function_arn"] = function_arn(params["FunctionName"], region, account)
    if params.get("Destination") is not None:
        url = params["Destination"].get("Url")
        if url is None:
            raise MappingParameterInvalid("Destination must name a Url.")
        changes["url"] = check_url(url)
    return changes


def queue_of(arn: object) -> tuple[str, str, str]:
    """(region, account, name) of the queue ``arn`` names, or Lambda's error for anything else."""
    if not isinstance(arn, str) or len(arn) > MAX_ARN_LENGTH:
        raise MappingValidationError.at(arn, "eventSourceArn",
                                        f"Member must have length less than or equal to {MAX_ARN_LENGTH}")
    queue = parse_queue_arn(arn)
    if queue is None:
        raise MappingParameterInvalid("Unrecognized event source, must be kinesis, dynamodb stream or sqs.")
    return queue.region, queue.account, queue.name


def configure(base: MappingConfig | None, queue_arn: str, changes: dict[str, Any], *, fifo: bool) -> MappingConfig:
    """The configuration ``changes`` make of ``base`` (None: a new mapping of ``queue_arn``), if Lambda's rules
    allow it."""
    both = "function_arn" in changes and "url" in changes
    if base is None:
        if both or not ("function_arn" in changes or "url" in changes):
            raise MappingParameterInvalid("Exactly one of FunctionName or Destination must be given.")
        config = MappingConfig(queue_arn=queue_arn, function_arn=None, url=None)
    else:
        if both or ("function_arn" in changes and base.url) or ("url" in changes and base.function_arn):
            raise MappingParameterInvalid("A mapping's target cannot change between a function and a Destination; "
                                          "delete the mapping and create another.")
        config = base
    config = dataclasses.replace(config, **changes)
    if fifo:
        if config.batch_size > MAX_FIFO_BATCH:
            raise MappingParameterInvalid(f"Batch size for FIFO queues cannot be greater than {MAX_FIFO_BATCH}.")
        if config.window_seconds:
            raise MappingParameterInvalid("Batching window is not supported for FIFO queues.")
    elif config.batch_size > UNWINDOWED_BATCH and not config.window_seconds:
        raise MappingParameterInvalid("Maximum batch window in seconds must be greater than 0 if maximum batch "
                                      f"size is greater than {UNWINDOWED_BATCH}")
    return config
