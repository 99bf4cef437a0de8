"""Writing shapes as the query protocol's XML, with the legacy element names.

Text is escaped so that it survives an XML parser byte for byte: besides ``&``, ``<`` and ``>``, a carriage
return is written as ``&#xD;`` because XML parsers turn a literal CR (and CR LF) into LF.  Lists and maps are
flattened as SQS writes them: ``<QueueUrl>a</QueueUrl><QueueUrl>b</QueueUrl>``,
``<Attribute><Name>k</Name><Value>v</Value></Attribute>``.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from ferrymq.protocol.model import BLOB, BOOLEAN, LIST, MAP, STRING, STRUCTURE, Shape

_SPECIAL = re.compile("[&<>\r\"']")


def escape_text(text: str) -> str:
    """Escape ``text`` for element content (quotes too, as SQS does, so it is safe in attributes as well)."""
    if _SPECIAL.search(text) is None:
        return text
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\r", "&#xD;")
        .replace('"', "&quot;")
        .replace("'", "&apos;")
    )


def scalar_text(value: Any, kind: str) -> str:
    if kind == STRING:
        return escape_text(value)
    if kind == BOOLEAN:
        return "true" if value else "false"
    if kind == BLOB:
        return base64.b64encode(value).decode("ascii")
    return str(int(value))


def write_structure(out: list[str], value: dict[str, Any], shape: Shape) -> None:
    """Append the members of ``value`` (a structure of ``shape``) in model order; absent and None are skipped."""
    for name, member in shape.members.items():
        item = value.get(name)
        if item is None:
            continue
        member_shape = member.shape
        tag = member.query_name
        kind = member_shape.kind
        if kind == LIST:
            element = member_shape.element
            assert element is not None
            if member.flattened:
                for entry in item:
                    _write_element(out, tag, entry, element)
            else:
                out.append(f"<{tag}>")
                for entry in item:
                    _write_element(out, member_shape.element_name, entry, element)
                out.append(f"</{tag}>")
        elif kind == MAP:
            if member.flattened:
                for key, entry in item.items():
                    _write_map_entry(out, tag, key, entry, member_shape)
            else:
                out.append(f"<{tag}>")
                for key, entry in item.items():
                    _write_map_entry(out, "entry", key, entry, member_shape)
                out.append(f"</{tag}>")
        else:
            _write_element(out, tag, item, member_shape)


def _write_element(out: list[str], tag: str, value: Any, shape: Shape) -> None:
    if shape.kind == STRUCTURE:
        out.append(f"<{tag}>")
        write_structure(out, value, shape)
        out.append(f"</{tag}>")
    elif shape.kind in (LIST, MAP):
        raise ValueError(f"SQS has no nested collection such as {shape.name}")
    else:
        out.append(f"<{tag}>{scalar_text(value, shape.kind)}</{tag}>")


def _write_map_entry(out: list[str], tag: str, key: str, value: Any, shape: Shape) -> None:
    key_shape, value_shape = shape.key, shape.value
    assert key_shape is not None and value_shape is not None
    out.append(f"<{tag}>")
    _write_element(out, shape.key_name, key, key_shape)
    _write_element(out, shape.value_name, value, value_shape)
    out.append(f"</{tag}>")
