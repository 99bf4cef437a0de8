"""FerryMQ's own access-key actions: create, list, disable, enable, rotate and delete keys, and list the accounts
that hold them. Admin keys only (:func:`.admin.admin_only`).

The keys live in the credentials table (:class:`~ferrymq.aws.credentials.CredentialStore`): a change that
takes a key's power away (disable, rotate, delete) reaches every front end within
``FERRYMQ_CREDENTIALS_RECHECK_SECONDS``. A secret is returned once, by the action that made it.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
from collections.abc import Callable
from typing import Any, TypeVar

from ferrymq.aws.credentials import MAX_TEMPORARY_SECONDS, Credential, CredentialStore
from ferrymq.bulkhead import off_loop
from ferrymq.errors import InvalidParameterValue, ResourceNotFound
from ferrymq.frontend.actions.admin import account_param, admin_only
from ferrymq.frontend.context import RequestContext
from ferrymq.frontend.message_checks import optional_int, require

T = TypeVar("T")

MAX_USER_NAME = 64
DEFAULT_PAGE = 1000


def _iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


def access_key(c: Credential, *, secret: bool = False, session_token: str | None = None) -> dict[str, Any]:
    """A key as the API shows it; its secret only when asked (the action that made it)."""
    return {
        "AccessKeyId": c.access_key_id,
        "SecretAccessKey": c.secret_access_key if secret else None,
        "SessionToken": session_token,
        "AccountId": c.account_id,
        "UserName": c.user_name,
        "Status": c.status,
        "Admin": c.admin,
        "CreatedAt": _iso(c.created_at),
        "Expiration": _iso(c.expires_at),
    }


def _user_name(params: dict[str, Any]) -> str:
    name = require(params, "UserName")
    if not 1 <= len(name) <= MAX_USER_NAME or not name.isprintable():
        raise InvalidParameterValue(
            f"Value {name!r} for parameter UserName is invalid. Reason: 1 to {MAX_USER_NAME} printable characters.")
    return name


async def _store(ctx: RequestContext, call: Callable[[CredentialStore], T]) -> T:
    """``call(store)`` on the metadata threads, for an admin caller."""
    store = admin_only(ctx).credentials
    return await off_loop(ctx.services.metadata, call, store)


async def create_access_key(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    admin_only(ctx)
    account = account_param(params, required=True)
    assert account is not None
    user = _user_name(params)
    is_admin = bool(params.get("Admin"))
    duration = optional_int(params, "DurationSeconds", 1, MAX_TEMPORARY_SECONDS)
    if duration is None:
        credential = await _store(ctx, lambda store: store.create(account, user, admin=is_admin))
        return {"AccessKey": access_key(credential, secret=True)}
    credential, token = await _store(
        ctx, lambda store: store.create_temporary(account, user, duration, admin=is_admin))
    return {"AccessKey": access_key(credential, secret=True, session_token=token)}


async def list_access_keys(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    admin_only(ctx)
    account = account_param(params)
    limit = optional_int(params, "MaxResults", 1, 1000) or DEFAULT_PAGE
    after = _decode_token(params["NextToken"]) if params.get("NextToken") else None
    keys = await _store(ctx, CredentialStore.list)
    if account is not None:
        keys = [c for c in keys if c.account_id == account]
    if after is not None:
        keys = [c for c in keys if _order(c) > after]
    result: dict[str, Any] = {"AccessKeys": [access_key(c) for c in keys[:limit]]}
    if len(keys) > limit:
        result["NextToken"] = _encode_token(_order(keys[limit - 1]))
    return result


def _order(c: Credential) -> tuple[str, str, str]:
    """Where a key stands in a listing (the store lists them in this order)."""
    return (c.account_id, c.user_name, c.access_key_id)


def _encode_token(position: tuple[str, str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(position)).encode()).decode()


def _decode_token(token: str) -> tuple[str, str, str]:
    try:
        position = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, binascii.Error):
        position = None
    if not (isinstance(position, list) and len(position) == 3 and all(isinstance(p, str) for p in position)):
        raise InvalidParameterValue("Invalid NextToken value.")
    return (position[0], position[1], position[2])


def _not_found(key_id: str) -> ResourceNotFound:
    return ResourceNotFound(f"The access key {key_id} does not exist.")


async def disable_access_key(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    admin_only(ctx)
    key_id = require(params, "AccessKeyId")
    if not await _store(ctx, lambda store: store.set_status(key_id, False)):
        raise _not_found(key_id)
    return {}


async def enable_access_key(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    admin_only(ctx)
    key_id = require(params, "AccessKeyId")
    if not await _store(ctx, lambda store: store.set_status(key_id, True)):
        raise _not_found(key_id)
    return {}


async def delete_access_key(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    admin_only(ctx)
    key_id = require(params, "AccessKeyId")
    if not await _store(ctx, lambda store: store.delete(key_id)):
        raise _not_found(key_id)
    return {}


async def rotate_access_key(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    admin_only(ctx)
    key_id = require(params, "AccessKeyId")
    new = await _store(ctx, lambda store: store.rotate(key_id))
    if new is None:
        raise _not_found(key_id)
    return {"AccessKey": access_key(new, secret=True), "DisabledAccessKeyId": key_id}


async def list_accounts(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    keys = await _store(ctx, CredentialStore.list)
    accounts: dict[str, list[Credential]] = {}
    for c in keys:
        accounts.setdefault(c.account_id, []).append(c)
    return {
        "Accounts": [
            {
                "AccountId": account,
                "Keys": len(held),
                "ActiveKeys": sum(c.active for c in held),
                "AdminKeys": sum(c.admin for c in held),
                "Users": sorted({c.user_name for c in held}),
            }
            for account, held in sorted(accounts.items())
        ]
    }
