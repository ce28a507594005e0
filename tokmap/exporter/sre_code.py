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

The pattern over all code points (`regex_full`) is stored only as code, with its classes rewritten
(`guard_astral`) so that astral code points cost nothing on BMP text. `re` lays out a class that
reaches past U+FFFF as a bitmap of its BMP members followed by its astral ranges, which the
engine compares one by one, so every BMP code point outside the bitmap would walk them all. The
rewrite keeps the bitmap, then adds a range U+0000-U+FFFF that answers "not in the class" at
once, then the astral ranges, largest first, with the engine's NEGATE op flipping the answer
between members and non-members. `_sre` runs a class's ops in order and returns on the first
range that holds the code point, so the class still holds exactly the same code points
(test_sre_code.py compares it with `re.compile` of the text on every plane).
"""

from __future__ import annotations

import sys
import zlib
from array import array

from ..runtime.sre_load import engine_id  # what the runtime checks is what is written


def compile_code(pattern: str, guard_astral: bool = False) -> tuple[dict, bytes] | None:
    """(meta for the split step, the code as uint32 little-endian bytes), or None when this Python
    cannot say (not CPython, or code words wider than 32 bits) or the pattern has capture groups
    (the runtime only calls findall/finditer on group-free split patterns). guard_astral: classes
    reaching past U+FFFF rewritten as the module docstring says."""
    eid = engine_id()
    if eid is None or eid["codesize"] != 4:
        return None
    from re import _compiler, _parser

    # These are the steps of re._compiler.compile(pattern, 0), up to its final _sre.compile call.
    parsed = _parser.parse(pattern, 0)
    if parsed.state.groups != 1 or parsed.state.groupdict:
        return None
    if guard_astral:
        plain = _compiler._optimize_charset

        def optimize(charset, iscased=None, fixup=None, fixes=None):
            out, hascased = plain(charset, iscased, fixup, fixes)
            if fixup is None and out is not charset:  # (the original list: BMP ops not all first)
                out = guard_astral_ranges(out)
            return out, hascased

        _compiler._optimize_charset = optimize  # for this one compile: the exporter is single-threaded
        try:
            code = _compiler._code(parsed, 0)
        finally:
            _compiler._optimize_charset = plain
    else:
        code = _compiler._code(parsed, 0)
    words = array("I", code)
    if sys.byteorder != "little":
        words.byteswap()
    return (dict(eid, flags=parsed.state.flags, pattern_crc32=zlib.crc32(pattern.encode("utf-8", "surrogatepass"))),
            words.tobytes())


TOP_RANGES = 8  # astral intervals tried first whatever their answer: the largest (emoji blocks, gaps)


def _astral(op, av) -> bool:
    from re._constants import LITERAL, RANGE

    return (op is LITERAL and av >= _BMP) or (op is RANGE and av[1] >= _BMP)


_BMP = 0x10000
_TOP = 0x10FFFF


def guard_astral_ranges(items: list) -> list:
    """A class's ops (re._compiler._optimize_charset's output: [NEGATE], its BMP members as a
    bitmap or a few ranges, then its astral LITERAL/RANGE ops) with the astral part replaced by
    U+0000-U+FFFF (answer: not a member) and every astral interval, largest first, each with its
    answer (NEGATE between answers that differ). Intervals of one answer are left out when the
    engine's closing FAILURE gives that answer. Ops in any other layout come back unchanged."""
    from re._constants import BIGCHARSET, CHARSET, LITERAL, NEGATE, RANGE

    k = next((i for i, (op, av) in enumerate(items) if _astral(op, av)), None)
    if k is None or not all(_astral(op, av) for op, av in items[k:]):
        return items
    head, tail = items[:k], items[k:]
    if any(op is NEGATE for op, _av in head[1:]) or any(op not in (NEGATE, CHARSET, BIGCHARSET, LITERAL, RANGE)
                                                        for op, _av in head):
        return items
    # `ok` is what a hit returns: True, or False after the leading NEGATE of a negated class. The
    # head answers `ok` for every listed BMP code point, so any other BMP one answers `not ok`.
    ok = not (head and head[0][0] is NEGATE)
    listed = sorted((max(av[0], _BMP), av[1]) if op is RANGE else (av, av) for op, av in tail)
    merged: list[list[int]] = []
    for a, b in listed:
        if merged and a <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    intervals, at = [], _BMP  # (first, last, answer) covering U+10000..U+10FFFF
    for a, b in merged:
        if a > at:
            intervals.append((at, a - 1, not ok))
        intervals.append((a, b, ok))
        at = b + 1
    if at <= _TOP:
        intervals.append((at, _TOP, not ok))
    first = sorted(intervals, key=lambda t: t[0] - t[1])[:TOP_RANGES]
    rest = [t for t in intervals if t not in first]
    # The rest: list the answer with fewer intervals; FAILURE answers the other one.
    listed_answer = sum(t[2] for t in rest) * 2 <= len(rest)
    out, answer = list(head), ok
    for a, b, want in [(0, _BMP - 1, not ok)] + first + [t for t in rest if t[2] == listed_answer]:
        if want != answer:
            out.append((NEGATE, None))
            answer = want
        out.append((RANGE, (a, b)))
    if answer != listed_answer:  # FAILURE returns `not answer`: it must be the unlisted answer
        out.append((NEGATE, None))
    return out
