"""The one error hierarchy.

Each class carries how SQS reports it: ``code`` (the JSON protocol's ``__type`` short name), ``query_code``
(the legacy query-protocol code, also sent in the JSON protocol's ``x-amzn-query-error`` header), the HTTP
``status`` and whether the ``sender`` is at fault.  Renderers read these attributes, so the mapping lives here
and nowhere else.  Anything that is not a :class:`SqsError` renders as :class:`InternalError`.
"""

from __future__ import annotations

from typing import ClassVar


class SqsError(Exception):
    """Base of every error FerryMQ reports to a client."""

    code: ClassVar[str] = "InternalFailure"
    query_code: ClassVar[str] = "InternalFailure"
    status: ClassVar[int] = 500
    sender: ClassVar[bool] = False
    default_message: ClassVar[str] = ""
    # Where the query protocol words the default message differently from the JSON protocol.
    query_default_message: ClassVar[str | None] = None
    # Service-specific errors are namespaced ``com.amazonaws.sqs#``; common ones ``com.amazon.coral.service#``.
    namespace: ClassVar[str] = "com.amazonaws.sqs"

    def __init__(self, message: str | None = None) -> None:
        self.message = message if message is not None else self.default_message
        super().__init__(self.message)

    @property
    def json_type(self) -> str:
        return f"{self.namespace}#{self.code}"


class _CommonError(SqsError):
    """Errors common to all AWS query/JSON services, not SQS-specific."""

    namespace = "com.amazon.coral.service"


class SenderError(SqsError):
    """Base of errors caused by the request."""

    status = 400
    sender = True


# --- common AWS errors -------------------------------------------------------------------------------


class InternalError(_CommonError):
    """An unexpected failure inside FerryMQ; never carries internals."""

    code = "InternalFailure"
    query_code = "InternalFailure"
    status = 500
    default_message = "The request processing has failed because of an unknown error, exception or failure."


class ServiceUnavailable(_CommonError):
    """A dependency (storage worker, metadata store) cannot be reached right now."""

    code = "ServiceUnavailable"
    query_code = "ServiceUnavailable"
    status = 503
    default_message = "The request has failed due to a temporary failure of the server."


class NotLeader(ServiceUnavailable):
    """A storage worker was asked about a partition it does not serve (now); nothing was done.

    Its own ``code`` tells the front end, over the worker RPC, to look the partition's leader up again and
    retry; should one ever reach a client, it is the 503 of :class:`ServiceUnavailable`.
    """

    code = "NotLeader"

    def __init__(self, message: str | None = None, *, partition: int | None = None, worker: str | None = None) -> None:
        if message is None and partition is not None:
            message = f"Storage worker {worker or '?'} does not serve partition {partition}."
        super().__init__(message)


class StaleEpoch(ServiceUnavailable):
    """A replica spoke for a partition under an epoch older than the one it was sent to; nothing was done.

    Over the worker RPC its ``code`` tells a follower to learn the partition's current epoch before it
    fetches again; should one ever reach a client, it is the 503 of :class:`ServiceUnavailable`.
    """

    code = "StaleEpoch"


class SnapshotNeeded(ServiceUnavailable):
    """A follower asked for records the leader compacted away; nothing was done.

    Over the worker RPC its ``code`` tells the follower to copy the leader's state (SNAPSHOT) and fetch on
    from there; should one ever reach a client, it is the 503 of :class:`ServiceUnavailable`.
    """

    code = "SnapshotNeeded"


class InvalidAction(_CommonError, SenderError):
    """The action or operation requested is invalid."""

    code = "InvalidAction"
    query_code = "InvalidAction"


class MissingParameter(_CommonError, SenderError):
    """A required parameter was not supplied."""

    # SQS's own JSON type for it; clients see the query code through ``x-amzn-query-error``.
    code = "MissingRequiredParameterException"
    query_code = "MissingParameter"
    namespace = "com.amazonaws.sqs"


class InvalidParameterValue(_CommonError, SenderError):
    """A parameter value is out of range or malformed."""

    # SQS's own JSON type for it; clients see the query code through ``x-amzn-query-error``.
    code = "InvalidParameterValueException"
    query_code = "InvalidParameterValue"
    namespace = "com.amazonaws.sqs"


class ValidationError(_CommonError, SenderError):
    """The input fails to satisfy the constraints of the API."""

    code = "ValidationException"
    query_code = "ValidationError"


class MalformedQueryString(_CommonError, SenderError):
    """The query string or form body cannot be parsed."""

    code = "MalformedQueryString"
    query_code = "MalformedQueryString"
    status = 404


class SerializationError(_CommonError, SenderError):
    """The JSON request body cannot be parsed."""

    code = "SerializationException"
    query_code = "SerializationException"


class UnsupportedProtocol(_CommonError, SenderError):
    """Neither the JSON nor the query protocol was recognised."""

    code = "UnknownOperationException"
    query_code = "InvalidAction"


class UnknownOperation(_CommonError, SenderError):
    """A query-protocol GET of a queue URL that names no action."""

    code = "UnknownOperationException"
    query_code = "UnknownOperationException"
    status = 404


class IncompleteSignature(_CommonError, SenderError):
    """The request signature does not conform to AWS standards."""

    code = "IncompleteSignature"
    query_code = "IncompleteSignature"


class MissingAuthenticationToken(_CommonError, SenderError):
    """The request carries no credentials at all."""

    code = "MissingAuthenticationTokenException"
    query_code = "MissingAuthenticationToken"
    status = 403


class InvalidClientTokenId(_CommonError, SenderError):
    """The access key ID is not known or disabled, or the session token does not go with it."""

    code = "InvalidClientTokenId"
    query_code = "InvalidClientTokenId"
    status = 403
    default_message = "The security token included in the request is invalid."


class SignatureDoesNotMatch(_CommonError, SenderError):
    """The signature computed from the secret key differs from the one sent."""

    code = "SignatureDoesNotMatch"
    query_code = "SignatureDoesNotMatch"
    status = 403


class ExpiredToken(_CommonError, SenderError):
    """The session token of temporary credentials is past its expiry."""

    code = "ExpiredTokenException"
    query_code = "ExpiredToken"
    status = 403
    default_message = "The security token included in the request is expired"


class RequestExpired(_CommonError, SenderError):
    """The request's timestamp is too far from the server's clock, or a presigned URL has expired."""

    code = "RequestExpired"
    query_code = "RequestExpired"


class AccessDenied(_CommonError, SenderError):
    """The caller is not allowed to perform the action on the resource."""

    code = "AccessDeniedException"
    query_code = "AccessDenied"
    status = 403


class Throttling(_CommonError, SenderError):
    """The caller exceeded its request rate."""

    code = "ThrottlingException"
    query_code = "Throttling"


class RequestEntityTooLarge(_CommonError, SenderError):
    """The request body is larger than the front end accepts; refused before it is read."""

    code = "RequestEntityTooLarge"
    query_code = "RequestEntityTooLarge"
    status = 413


class RequestTimeout(_CommonError, SenderError):
    """The client did not send the whole request body within the body timeout."""

    code = "RequestTimeout"
    query_code = "RequestTimeout"
    default_message = (
        "Your socket connection to the server was not read from or written to within the timeout period."
    )


# --- SQS errors --------------------------------------------------------------------------------------


class QueueDoesNotExist(SenderError):
    """The queue named in the request does not exist."""

    code = "QueueDoesNotExist"
    query_code = "AWS.SimpleQueueService.NonExistentQueue"
    default_message = "The specified queue does not exist."
    query_default_message = "The specified queue does not exist for this wsdl version."


class QueueDeletedRecently(SenderError):
    """A queue of that name was deleted less than 60 seconds ago."""

    code = "QueueDeletedRecently"
    query_code = "AWS.SimpleQueueService.QueueDeletedRecently"
    default_message = (
        "You must wait 60 seconds after deleting a queue before you can create another with the same name."
    )


class QueueNameExists(SenderError):
    """A queue of that name exists with different attributes."""

    code = "QueueNameExists"
    query_code = "QueueAlreadyExists"
    default_message = "A queue already exists with the same name and a different value for attribute."


class PurgeQueueInProgress(SenderError):
    """The queue was purged less than 60 seconds ago."""

    code = "PurgeQueueInProgress"
    query_code = "AWS.SimpleQueueService.PurgeQueueInProgress"
    status = 403


class InvalidAttributeName(SenderError):
    """An attribute name is not one SQS knows."""

    code = "InvalidAttributeName"
    query_code = "InvalidAttributeName"


class InvalidAttributeValue(SenderError):
    """An attribute value is out of range or malformed."""

    code = "InvalidAttributeValue"
    query_code = "InvalidAttributeValue"


class InvalidMessageContents(SenderError):
    """The message body holds characters outside SQS's allowed set."""

    code = "InvalidMessageContents"
    query_code = "InvalidMessageContents"


class ReceiptHandleIsInvalid(SenderError):
    """The receipt handle is malformed or does not belong to the queue."""

    code = "ReceiptHandleIsInvalid"
    query_code = "ReceiptHandleIsInvalid"
    status = 404

    @classmethod
    def naming(cls, handle: object) -> ReceiptHandleIsInvalid:
        return cls(f'The input receipt handle "{handle}" is not a valid receipt handle.')


class MessageNotInflight(SenderError):
    """The message named by the receipt handle is not in flight."""

    code = "MessageNotInflight"
    query_code = "AWS.SimpleQueueService.MessageNotInflight"
    default_message = "The message referred to isn't in flight."


class OverLimit(SenderError):
    """A queue limit, such as the number of in-flight messages, was reached."""

    code = "OverLimit"
    query_code = "OverLimit"
    status = 403


class EmptyBatchRequest(SenderError):
    """A batch request has no entries."""

    code = "EmptyBatchRequest"
    query_code = "AWS.SimpleQueueService.EmptyBatchRequest"


class TooManyEntriesInBatchRequest(SenderError):
    """A batch request has more than ten entries."""

    code = "TooManyEntriesInBatchRequest"
    query_code = "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"


class BatchEntryIdsNotDistinct(SenderError):
    """Two batch entries share an Id."""

    code = "BatchEntryIdsNotDistinct"
    query_code = "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"


class BatchRequestTooLong(SenderError):
    """The batch's messages together exceed the size limit."""

    code = "BatchRequestTooLong"
    query_code = "AWS.SimpleQueueService.BatchRequestTooLong"


class InvalidBatchEntryId(SenderError):
    """A batch entry Id breaks the Id rules."""

    code = "InvalidBatchEntryId"
    query_code = "AWS.SimpleQueueService.InvalidBatchEntryId"


class UnsupportedOperation(SenderError):
    """The operation is not supported for this queue (e.g. FIFO-only parameters)."""

    code = "UnsupportedOperation"
    query_code = "AWS.SimpleQueueService.UnsupportedOperation"


class InvalidAddress(SenderError):
    """The queue URL is not valid."""

    code = "InvalidAddress"
    query_code = "InvalidAddress"
    status = 404


class InvalidSecurity(SenderError):
    """The request was not made over HTTPS or did not use SigV4."""

    code = "InvalidSecurity"
    query_code = "InvalidSecurity"
    status = 403


class RequestThrottled(SenderError):
    """The request rate for the queue or account was exceeded."""

    code = "RequestThrottled"
    query_code = "RequestThrottled"
    status = 403


class ResourceNotFound(SenderError):
    """A referenced resource (such as a move task) does not exist."""

    code = "ResourceNotFoundException"
    query_code = "ResourceNotFoundException"
    status = 404


# --- KMS errors of server-side encryption (SendMessage, SendMessageBatch, ReceiveMessage) ----------------


class _KmsError(SenderError):
    """KMS refused what encrypting or decrypting messages needed; the message is KMS's own."""


class KmsAccessDenied(_KmsError):
    """FerryMQ may not use the queue's KMS key."""

    code = "KmsAccessDenied"
    query_code = "KMS.AccessDeniedException"


class KmsDisabled(_KmsError):
    """The queue's KMS key is disabled."""

    code = "KmsDisabled"
    query_code = "KMS.DisabledException"


class KmsInvalidKeyUsage(_KmsError):
    """The queue's KMS key cannot encrypt (an asymmetric or signing key, say)."""

    code = "KmsInvalidKeyUsage"
    query_code = "KMS.InvalidKeyUsageException"


class KmsInvalidState(_KmsError):
    """The queue's KMS key is in a state that forbids its use (pending deletion, pending import)."""

    code = "KmsInvalidState"
    query_code = "KMS.InvalidStateException"


class KmsNotFound(_KmsError):
    """The queue's KMS key (or alias) does not exist."""

    code = "KmsNotFound"
    query_code = "KMS.NotFoundException"


class KmsOptInRequired(_KmsError):
    """The KMS key's account has not opted in to the service."""

    code = "KmsOptInRequired"
    query_code = "KMS.OptInRequired"
    status = 403


class KmsThrottled(_KmsError):
    """KMS throttled the requests FerryMQ made for the queue's key."""

    code = "KmsThrottled"
    query_code = "KMS.ThrottlingException"


def error_for_code(code: str) -> type[SqsError]:
    """Map a ``code`` (as carried over the worker RPC) back to its class; unknown codes are internal."""
    return _BY_CODE.get(code, InternalError)


def _all_subclasses(cls: type[SqsError]) -> list[type[SqsError]]:
    out: list[type[SqsError]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


_BY_CODE: dict[str, type[SqsError]] = {
    c.code: c for c in _all_subclasses(SqsError) if not c.__name__.startswith("_") and c is not SenderError
}
