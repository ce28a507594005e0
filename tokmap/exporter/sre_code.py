"""Export-time: a split pattern compiled into the code of CPython's regex engine (`_sre`).

`re.compile` of the pattern over original code points (`regex_bmp`) costs 4-11 ms, nearly all
of it in `re._compiler` building each huge character class into a bitmap code point by code
point. That is paid on the first long non-ASCII text of every process, a sizable part of a cold
encode. So the exporter also stores the engine code that `re.compile` produces, and the runtime
hands it to `_sre.compile` (what `re.compile` itself ends with) in well under a millisecond.

The code is private to one CPython engine version, so it is stored with what identifies that
version: the engine's MAGIC, its code word size, the Python minor version and sys.maxunicode.
The runtime uses it only when all of them match its own, and `_sre.compile` checks the code's
structure (jumps, groups, lengths) itself, raising on code it would not run safely; anything
else compiles `regex_bmp` from its text as before. See runtime/sre_load.py and docs/FORMAT.md.
"""

from __future__ import annotations

import sys
import zlib
from array import array

from ..runtime.sre_load import engine_id  # what the runtime checks is what is written


def compile_code(pattern: str) -> tuple[dict, bytes] | None:
    """(meta for the split step, the code as uint32 little-endian bytes), or None when this Python
    cannot say (not CPython, or code words wider than 32 bits) or the pattern has capture groups
    (the runtime only calls findall/finditer on group-free split patterns)."""
    eid = engine_id()
    if eid is None or eid["codesize"] != 4:
        return None
    from re import _compiler, _parser

    # These are the steps of re._compiler.compile(pattern, 0), up to its final _sre.compile call.
    parsed = _parser.parse(pattern, 0)
    if parsed.state.groups != 1 or parsed.state.groupdict:
        return None
    code = _compiler._code(parsed, 0)
    words = array("I", code)
    if sys.byteorder != "little":
        words.byteswap()
    return (dict(eid, flags=parsed.state.flags, pattern_crc32=zlib.crc32(pattern.encode("utf-8", "surrogatepass"))),
            words.tobytes())
