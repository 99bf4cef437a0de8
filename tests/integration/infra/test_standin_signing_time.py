"""The stand-in refuses requests signed outside AWS's ±15 minute window, and presigned URLs past their
``X-Amz-Expires``, with the refusal AWS sends in each protocol. Requests are signed by botocore itself, with its
clock moved (the stand-in, a real process, keeps the machine's)."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

import botocore.auth
import pytest
from botocore.exceptions import ClientError

from tests.integration.infra.processes import Started, child_env
from tests.integration.infra.test_standin_auth import PAIR, _client, _refusal, _standin

AMZ_DATE = r"\d{8}T\d{6}Z"


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    with _standin(tmp_path_factory.mktemp("timed"), child_env(**PAIR.environment())) as started:
        s3 = _client("s3", started, s3={"addressing_style": "path"}, signature_version="s3v4")
        s3.create_bucket(Bucket="timed-bucket")
        s3.put_object(Bucket="timed-bucket", Key="k", Body=b"v")
        yield started


@contextmanager
def _signing_clock(shift: timedelta) -> Iterator[None]:
    """botocore signs as if its clock were ``shift`` away from the machine's."""
    real = botocore.auth.get_current_datetime

    def shifted(*args: Any, **kwargs: Any) -> datetime:
        return real(*args, **kwargs) + shift

    with mock.patch("botocore.auth.get_current_datetime", shifted):
        yield


def _signed_at(shift: timedelta, call: Any) -> Any:
    with _signing_clock(shift):
        return call()


def _http_error(url: str) -> tuple[int, bytes]:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(url)
    return caught.value.code, caught.value.read()


def test_dynamodb_refuses_a_request_signed_400_days_ago_or_5_years_ahead(standin: Started) -> None:
    dynamodb = _client("dynamodb", standin)
    # given requests signed 400 days ago and 5 years ahead, then each is refused as AWS refuses it
    code, message, status = _refusal(lambda: _signed_at(timedelta(days=-400), dynamodb.list_tables))
    assert (code, status) == ("InvalidSignatureException", 400)
    assert re.fullmatch(rf"Signature expired: {AMZ_DATE} is now earlier than {AMZ_DATE} \({AMZ_DATE} - 15 min\.\)",
                        message), message
    code, message, status = _refusal(lambda: _signed_at(timedelta(days=5 * 365), dynamodb.list_tables))
    assert (code, status) == ("InvalidSignatureException", 400)
    assert re.fullmatch(
        rf"Signature not yet current: {AMZ_DATE} is still later than {AMZ_DATE} \({AMZ_DATE} \+ 15 min\.\)", message
    ), message
    # and within the window, either way, it is answered
    assert "TableNames" in _signed_at(timedelta(minutes=-10), dynamodb.list_tables)
    assert "TableNames" in _signed_at(timedelta(minutes=10), dynamodb.list_tables)


def test_kms_and_sts_refuse_a_request_signed_an_hour_off(standin: Started) -> None:
    kms, sts = _client("kms", standin), _client("sts", standin)
    code, message, status = _refusal(lambda: _signed_at(timedelta(hours=1), kms.list_keys))
    assert (code, status) == ("InvalidSignatureException", 400)
    assert message.startswith("Signature not yet current: ")
    # the query protocol's refusal
    code, message, status = _refusal(lambda: _signed_at(timedelta(hours=-1), sts.get_caller_identity))
    assert (code, status) == ("SignatureDoesNotMatch", 403)
    assert message.startswith("Signature expired: ")


def test_s3_refuses_a_skewed_request_with_request_time_too_skewed(standin: Started) -> None:
    s3 = _client("s3", standin, s3={"addressing_style": "path"})
    with pytest.raises(ClientError) as caught, _signing_clock(timedelta(minutes=-20)):
        s3.list_objects_v2(Bucket="timed-bucket")
    error = caught.value.response["Error"]
    assert (error["Code"], caught.value.response["ResponseMetadata"]["HTTPStatusCode"]) == ("RequestTimeTooSkewed", 403)
    assert error["Message"] == "The difference between the request time and the current time is too large."
    assert error["MaxAllowedSkewMilliseconds"] == "900000"
    assert re.fullmatch(AMZ_DATE, error["RequestTime"])


def test_a_presigned_url_works_for_its_x_amz_expires_and_not_after(standin: Started) -> None:
    s3 = _client("s3", standin, s3={"addressing_style": "path"}, signature_version="s3v4")

    def presigned(shift: timedelta, expires: int) -> str:
        with _signing_clock(shift):
            return str(s3.generate_presigned_url("get_object", Params={"Bucket": "timed-bucket", "Key": "k"},
                                                 ExpiresIn=expires))

    # given a URL signed 30 minutes ago to last an hour, then it still works (beyond the 15 minutes of a request)
    with urllib.request.urlopen(presigned(timedelta(minutes=-30), 3600)) as answer:
        assert answer.read() == b"v"
    # given one signed 10 minutes ago to last 60 seconds, then it has expired
    status, body = _http_error(presigned(timedelta(minutes=-10), 60))
    assert status == 403
    assert b"<Code>AccessDenied</Code><Message>Request has expired</Message><X-Amz-Expires>60</X-Amz-Expires>" in body
    # given one dated a day ahead, then it is not valid yet
    status, body = _http_error(presigned(timedelta(days=1), 3600))
    assert status == 403
    assert b"<Code>AccessDenied</Code><Message>Request is not yet valid</Message>" in body


@pytest.mark.parametrize(("expires", "message"), [
    ("604801", "X-Amz-Expires must be less than a week (in seconds) that is 604800"),
    ("-1", "X-Amz-Expires must be non-negative"),
    ("soon", "X-Amz-Expires should be a number"),
    (None, "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, "
           "X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters."),
])
def test_a_presigned_url_with_a_bent_x_amz_expires_is_refused(standin: Started, expires: str | None,
                                                                message: str) -> None:
    s3 = _client("s3", standin, s3={"addressing_style": "path"}, signature_version="s3v4")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "timed-bucket", "Key": "k"}, ExpiresIn=60)
    bent = re.sub(r"&?X-Amz-Expires=60", "" if expires is None else f"&X-Amz-Expires={expires}", url)
    status, body = _http_error(bent)
    assert status == 400
    assert (f"<Code>AuthorizationQueryParametersError</Code><Message>{message}</Message>").encode() in body


def test_a_signing_time_that_is_not_an_iso_8601_basic_date_is_refused(standin: Started) -> None:
    dynamodb = _client("dynamodb", standin)

    def bend_date(request: Any, **kwargs: Any) -> None:
        request.headers["X-Amz-Date"] = "yesterday"

    dynamodb.meta.events.register_last("before-send.dynamodb.ListTables", bend_date)
    code, message, status = _refusal(dynamodb.list_tables)
    assert (code, status) == ("IncompleteSignatureException", 400)
    assert message == "Date must be in ISO-8601 'basic format'. Got 'yesterday'."
