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


def load(f, info, pattern: str):
    """The compiled pattern from split-step field `regex_bmp_code` (`info`), or None when the
    caller should compile `pattern` itself. FormatError when the stored code is damaged."""
    if not isinstance(info, dict) or sys.implementation.name != "cpython":
        return None
    try:
        import _sre
        from re import _constants
    except ImportError:
        return None
    here = (_constants.MAGIC, _sre.CODESIZE, sys.maxunicode, "%d.%d" % sys.version_info[:2])
    if (info.get("magic"), info.get("codesize"), info.get("maxunicode"), info.get("python")) != here:
        return None  # another engine's code: compile the text
    if info.get("pattern_crc32") != zlib.crc32(pattern.encode("utf-8", "surrogatepass")):
        return None  # code for some other text: the text is what the file means
    sid = mtok.BLOB_BASE + info.get("blob", -1)
    if not f.has(sid):
        raise FormatError(f.path, "split regex_bmp_code names a missing blob", section="meta")
    _dt, off, length, crc = f.sections[sid]
    words = f.view(sid, mtok.U32)
    if zlib.crc32(f._mv[off: off + length]) != crc:
        raise FormatError(f.path, "checksum mismatch (file corrupted)", section=mtok.section_name(sid), offset=off)
    code = words.tolist()
    if sys.byteorder != "little":
        code = [int.from_bytes(w.to_bytes(4, "little"), "big") for w in code]
    try:
        return _sre.compile(pattern, info["flags"], code, 0, {}, ())
    except (RuntimeError, TypeError, ValueError, OverflowError, KeyError) as e:  # "invalid SRE code"
        raise FormatError(f.path, f"split regex_bmp_code is not valid engine code ({e})",
                          section=mtok.section_name(sid), offset=off) from None
