"""Writing shapes as the query protocol's XML, with the legacy element names.

Text is escaped so that it survives an XML parser byte for byte: besides ``&``, ``<`` and ``>``, a carriage
return is written as ``&#xD;`` because XML parsers turn a literal CR (and CR LF) into LF.  A character XML 1.0
cannot carry at all, even as a reference (most C0 controls, a lone surrogate, U+FFFE), is written as U+FFFD: bodies
and attributes are held to SQS's character set, which is XML's, on the way in, so only what a client sent echoed
in an error's text (a batch entry's receipt handle) can hold one.  Lists and maps are
flattened as SQS writes them: ``<QueueUrl>a</QueueUrl><QueueUrl>b</QueueUrl>``,
``<Attribute><Name>k</Name><Value>v</Value></Attribute>``.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from ferrymq.protocol.model import BLOB, BOOLEAN, LIST, MAP, STRING, STRUCTURE, Shape

NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""A character no XML 1.0 document may hold."""
_NOT_PLAIN = re.compile("[^\t\n\u0020\u0021\u0023-\u0025\u0028-\u003b\u003d\u003f-\ud7ff\ue000-\ufffd"
                        "\U00010000-\U0010ffff]")
"""A character to escape or replace: one search tells plain text, as nearly all of it is, from the rest."""


def escape_text(text: str) -> str:
    """Escape ``text`` for element content (quotes too, as SQS does, so it is safe in attributes as well)."""
    if _NOT_PLAIN.search(text) is None:
        return text
    if NOT_XML.search(text) is not None:
        text = NOT_XML.sub("\ufffd", text)
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
