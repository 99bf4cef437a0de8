"""Asserting on SQS errors the way clients see them, whichever wire protocol carried them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError


def expect_error(call: Callable[[], Any], query_code: str, status: int, *, json_code: str | None = None,
                 message: str | None = None) -> ClientError:
    """Run ``call`` and check the error: botocore reports the legacy query code on both protocols (on JSON
    it comes from the ``x-amzn-query-error`` header) and keeps the JSON ``__type`` as QueryErrorCode."""
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response["Error"]
    assert error["Code"] == query_code, caught.value.response
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == status, caught.value.response
    if json_code is not None and "QueryErrorCode" in error:
        assert error["QueryErrorCode"] == json_code
    if message is not None:
        assert message in error.get("Message", ""), error
    return caught.value
