"""Account ids, checked the one way the CLI and FerryMQ's own API both check them: 12 ASCII digits."""

from __future__ import annotations

ACCOUNT_ID_RULE = "an account id is 12 digits"


def is_account_id(text: str) -> bool:
    # isdigit() alone would take other scripts' digits ("١٢") too.
    return len(text) == 12 and text.isascii() and text.isdigit()
