"""A split pattern from the engine code stored at export (exporter/sre_code.py), without compiling.

`re.compile(regex_bmp)` costs 4-11 ms; `_sre.compile` of the stored code, which is what
`re.compile` ends with, well under one. The stored code serves only when it was made by this very
engine (MAGIC, code word size, Python minor version, sys.maxunicode), its section's crc32 holds
(a flipped bit inside a class bitmap would otherwise pass unnoticed), and it was made from this
pattern text (crc32 of the text). Otherwise the caller compiles the text: same pattern, slower.
"""

from __future__ import annotations

import sys
import zlib

from .. import mtok
from ..errors import FormatError


def engine_id() -> dict | None:
    """What stored code must have been made by to run here (the exporter writes this very dict),
    or None off CPython (no `_sre` code)."""
    if sys.implementation.name != "cpython":
        return None
    try:
        import _sre
        from re import _constants
    except ImportError:
        return None
    return {"magic": _constants.MAGIC, "codesize": _sre.CODESIZE, "maxunicode": sys.maxunicode,
            "python": "%d.%d" % sys.version_info[:2]}


def load(f, info, pattern: str, field: str = "regex_bmp_code", what: str = "split"):
    """The compiled pattern from split-step field `field` (`info`: regex_bmp_code, regex_full_code;
    `what` names the step in errors: normalizer patterns use this too), or None when the caller
    should compile `pattern` itself (or, for regex_full, do without it). FormatError when the
    stored code is damaged."""
    here = engine_id()
    if not isinstance(info, dict) or here is None or any(info.get(k) != v for k, v in here.items()):
        return None  # another engine's code: compile the text
    if info.get("pattern_crc32") != zlib.crc32(pattern.encode("utf-8", "surrogatepass")):
        return None  # code for some other text: the text is what the file means
    blob = info.get("blob")
    sid = mtok.BLOB_BASE + blob if type(blob) is int else None
    if sid is None or not f.has(sid):
        raise FormatError(f.path, f"{what} {field} names no blob of the file", section="meta")
    words = f.view(sid, mtok.U32)
    f.verify_section(sid)
    code = words.tolist()
    if sys.byteorder != "little":
        code = [int.from_bytes(w.to_bytes(4, "little"), "big") for w in code]
    import _sre

    try:
        return _sre.compile(pattern, info["flags"], code, 0, {}, ())
    except (RuntimeError, TypeError, ValueError, OverflowError, KeyError) as e:  # "invalid SRE code"
        raise FormatError(f.path, f"{what} {field} is not valid engine code ({e})",
                          section=mtok.section_name(sid), offset=f.sections[sid][1]) from None
