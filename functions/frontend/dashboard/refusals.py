"""What the dashboard's API refuses, in the project's error hierarchy: each class carries its code and HTTP
status, and the API renders any SqsError as ``{"error": code, "message": ...}`` with that status."""

from __future__ import annotations

from ferrymq.errors import SenderError


class LoginRequired(SenderError):
    code = query_code = "LoginRequired"
    status = 401
    default_message = "Log in with an access key first."


class InvalidLogin(SenderError):
    code = query_code = "InvalidLogin"
    status = 401
    default_message = "The access key id or the secret key is wrong."


class Forbidden(SenderError):
    code = query_code = "Forbidden"
    status = 403


class InvalidCsrfToken(SenderError):
    code = query_code = "InvalidCsrfToken"
    status = 403
    default_message = "The request lacks this session's CSRF token."


class NotFound(SenderError):
    code = query_code = "NotFound"
    status = 404


class MethodNotAllowed(SenderError):
    code = query_code = "MethodNotAllowed"
    status = 405


class RequestTooLarge(SenderError):
    code = query_code = "RequestTooLarge"
    status = 413
    default_message = "The dashboard's requests are small."


class UnsupportedMediaType(SenderError):
    code = query_code = "UnsupportedMediaType"
    status = 415
    default_message = "The dashboard's API takes JSON only."


class MalformedJson(SenderError):
    code = query_code = "MalformedJson"
    status = 400
