"""Lambda's errors for event-source mappings, as Lambda names them (FerryMQ's API mirrors Lambda's for these
calls, so clients catch the same exceptions). Not-found is :class:`ferrymq.errors.ResourceNotFound`."""

from __future__ import annotations

from ferrymq.errors import SenderError


class _LambdaError(SenderError):
    namespace = "com.amazonaws.lambda"


class MappingParameterInvalid(_LambdaError):
    """A parameter breaks one of the rules of event-source mappings."""

    code = "InvalidParameterValueException"
    query_code = "InvalidParameterValueException"


class MappingValidationError(_LambdaError):
    """A parameter is outside its modelled constraint (range, length, pattern, enum)."""

    code = "ValidationException"
    query_code = "ValidationException"

    @classmethod
    def at(cls, value: object, member: str, constraint: str) -> MappingValidationError:
        """Lambda's wording: ``1 validation error detected: Value 'V' at 'member' failed to satisfy ...``."""
        shown = str(value)
        if len(shown) > 256:
            shown = shown[:256] + "..."
        return cls(f"1 validation error detected: Value '{shown}' at '{member}' failed to satisfy constraint: "
                   f"{constraint}")


class MappingConflict(_LambdaError):
    """The mapping exists already, or another change to it came first."""

    code = "ResourceConflictException"
    query_code = "ResourceConflictException"
    status = 409
