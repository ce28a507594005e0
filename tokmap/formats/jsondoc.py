"""JSON source files (tokenizer.json, Tekken json) parsed into Python objects, with a SourceError
that names the file and the line for bytes that are not UTF-8, text that is not JSON, and (where
the caller asks) a \\uD800-\\uDFFF escape that is not half of a surrogate pair.

Python's json module takes such a lone escape and makes a str that cannot be encoded as UTF-8;
tokenizers (serde_json) refuses the file ("lone leading surrogate in hex escape"), and tokmap,
which writes every string as UTF-8, refuses it where the exporter would otherwise fail on it
later with a bare UnicodeEncodeError.
"""

from __future__ import annotations

import json
import re

from ..errors import SourceError

_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")  # the quick test: most files hold none
# Every \uD800-\uDFFF escape, in order, with each escaped backslash consumed on the way: "\\ud800"
# in a file is a backslash and the text "ud800", not an escape.
_ESCAPE = re.compile(rb"\\\\|\\u[dD]([89a-fA-F])[0-9a-fA-F]{2}")


def parse(path: str, data: bytes, lone_surrogates: bool = False):
    """The JSON document in data (the bytes of the file at path). lone_surrogates: accept a lone
    surrogate escape, as Python's json does (the caller then checks the strings it uses)."""
    try:
        doc = json.loads(data)
    except UnicodeDecodeError as e:
        raise SourceError(path, f"not UTF-8 ({e.reason} at byte {e.start})", line=_line(data, e.start)) from None
    except json.JSONDecodeError as e:
        raise SourceError(path, f"invalid JSON: {e.msg} (column {e.colno})", line=e.lineno) from None
    if not lone_surrogates:
        at = lone_surrogate(data)
        if at is not None:
            col = at - data.rfind(b"\n", 0, at)
            esc = data[at:at + 6].decode("ascii")
            raise SourceError(path, f"invalid JSON: lone surrogate escape {esc} (column {col}): a string must be "
                                    "Unicode text, and tokenizers refuses such a file too", line=_line(data, at))
    return doc


def lone_surrogate(data: bytes) -> int | None:
    """The offset of the first \\uD800-\\uDFFF escape in data (valid JSON) that is not a high one
    directly followed by a low one or that low one, or None."""
    if _SURROGATE.search(data) is None:
        return None
    waiting = -1  # the offset of a high surrogate escape whose low one must come next
    for m in _ESCAPE.finditer(data):
        kind = m.group(1)
        low = kind is not None and kind in b"cdefCDEF"
        if waiting >= 0:
            if low and m.start() == waiting + 6:
                waiting = -1
                continue
            return waiting
        if kind is None:  # an escaped backslash
            continue
        if low:
            return m.start()
        waiting = m.start()
    return waiting if waiting >= 0 else None


def _line(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def utf8_text(path: str, text: str, field: str) -> str:
    """text, when UTF-8 can store it (no lone surrogate, which Python's json lets through), else a
    SourceError naming the field: tokmap writes every string as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise SourceError(path, f"holds a lone surrogate (U+{ord(text[e.start]):04X} at char {e.start}), "
                                "which UTF-8 cannot store", field=field) from None
    return text
