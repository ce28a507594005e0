"""Pre-tokenizer steps, run in order over pieces.

A piece is (text, offs): `offs` is an int when the piece is an unchanged slice of the original text
starting there (the common case, costing nothing to track), or a list giving each char's original
(start, end) range once a step inserted or rewrote characters. Split patterns were compiled at
export into stdlib `re` over a class-translated copy of the text (see runtime/charclass.py), so
the regex module and the running Python's Unicode tables are never involved.
"""

from __future__ import annotations

import re
import sys

from .. import mtok
from ..errors import FormatError
from .charclass import TranslationMemo

NP_THRESHOLD = 1 << 16  # chars; above this numpy's vectorised translation pays for its import
# chars of one call from which the pattern over original code points is loaded (~1 ms from stored
# code, ~5 ms compiling py_pattern_bmp; once per process): below, the translated path costs less.
BMP_COMPILE_MIN = 1 << 16
# A text with more than one astral code point in this many chars takes the translated pattern:
# each astral one costs a stand-in and a re-cut piece in Python.
ASTRAL_SHARE = 64
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")

# CPython stores a str in the narrowest of 1, 2 or 4 bytes per char that holds all of its chars
# (PEP 393), and sys.getsizeof shows which: header + (len + 1) * width for a compact non-ASCII str.
_UCS1_BASE = sys.getsizeof("\xe9") - 2
_UCS2_BASE = sys.getsizeof("\u0100") - 4
_UCS4_BASE = sys.getsizeof("\U00010000") - 8


def bmp_only(text: str) -> bool:
    """Whether a non-ASCII str holds no code point above U+FFFF: from its size when that matches
    a 1- or 2-byte layout exactly (O(1)), else by counting UTF-16 units (a str with a cached UTF-8
    copy, or a subclass, has another size)."""
    n = len(text) + 1
    size = sys.getsizeof(text)
    if size == _UCS2_BASE + 2 * n or size == _UCS1_BASE + n:
        return True
    if size == _UCS4_BASE + 4 * n:
        return False
    return len(text.encode("utf-16-le", "surrogatepass")) == 2 * len(text)


def expand(offs, n: int) -> list[tuple[int, int]]:
    if isinstance(offs, int):
        return [(offs + i, offs + i + 1) for i in range(n)]
    return offs


def slice_offs(offs, s: int, e: int):
    return offs + s if isinstance(offs, int) else offs[s:e]


def apply_behavior(spans: list[tuple[int, int, bool]], behavior: str) -> list[tuple[int, int]]:
    """spans cover the text in order as (start, end, is_match); returns the kept (start, end)."""
    if behavior == "isolated":
        out = [(s, e) for s, e, _m in spans]
    elif behavior == "removed":
        out = [(s, e) for s, e, m in spans if not m]
    elif behavior == "merged_with_previous":
        out, prev_match = [], False
        for s, e, m in spans:
            if m and not prev_match and out:
                out[-1] = (out[-1][0], e)
            else:
                out.append((s, e))
            prev_match = m
    elif behavior == "merged_with_next":
        out, prev_match = [], False
        for s, e, m in reversed(spans):
            if m and not prev_match and out:
                out[-1] = (s, out[-1][1])
            else:
                out.append((s, e))
            prev_match = m
        out.reverse()
    elif behavior == "contiguous":
        out, prev_match = [], False
        for s, e, m in spans:
            if m == prev_match and out:
                out[-1] = (out[-1][0], e)
            else:
                out.append((s, e))
            prev_match = m
    else:
        raise ValueError(f"unknown split behavior {behavior!r}")
    return [(s, e) for s, e in out if s < e]


class SpanStep:
    """A step that cuts each piece into spans of itself (subclasses define `spans(text)`)."""

    def __call__(self, pieces):
        out = []
        for text, offs in pieces:
            for s, e in self.spans(text):
                out.append((text[s:e], slice_offs(offs, s, e)))
        return out


class SplitStep(SpanStep):
    def __init__(self, f, step: dict):
        self.behavior = step["behavior"]
        self.invert = bool(step["invert"])
        self.literal = step.get("literal")
        if "literal" in step:
            self.regex = re.compile(re.escape(step["literal"]))
            self.index = self.blocks = None
        else:
            try:
                self.regex = re.compile(step["regex"])
            except re.error as e:
                raise FormatError(f.path, f"split regex does not compile: {e}", section="meta",
                                  offset=f.sections[mtok.SECTION_META][1]) from None
            self.index = f.view(mtok.BLOB_BASE + step["class_index"], mtok.U16)
            self.blocks = f.view(mtok.BLOB_BASE + step["class_blocks"], mtok.U8)
            for key, ok in (("class_index", len(self.index) == 0x1100), ("class_blocks", len(self.blocks) % 256 == 0)):
                if not ok:
                    sid = mtok.BLOB_BASE + step[key]
                    raise FormatError(f.path, f"{key} table has the wrong size", section=mtok.section_name(sid),
                                      offset=f.sections[sid][1])
            self._np = None
            self._memo = None
        # The pattern over original code points, for text without astral ones (exporter's
        # regex_compile.CompiledPattern.py_pattern_bmp); compiled on first use, "" in older files.
        self.bmp = step.get("regex_bmp") or ""
        self._bmp_code = step.get("regex_bmp_code")  # the same, compiled at export (sre_load.py)
        self._bmp_regex = None
        # The pattern over all code points, as engine code with guarded classes (exporter's
        # sre_code.py): exact on any text with no stand-ins. Serves only from the stored code
        # (None: not loaded yet; False: absent, or made by another engine).
        self.full = step.get("regex_full") or ""
        self._full_code = step.get("regex_full_code")
        self._full_regex = None if self.full and self._full_code is not None else False
        self._stand_ins: dict[int, str | None] = {}
        self._f = f
        # The pattern with its D{1,k} alternative as D++ (exporter's regex_compile._run_branch):
        # each run of D chars one match, which the model cuts into k-char pieces (absent: None).
        self.runs = step.get("runs")
        self._runs_regex = self._run_others = None
        # The exporter proved that the matches always cover the text back to back (regex_compile.tiles).
        self.tiles = step.get("tiles") is True
        # ... and where a text may be cut at a space (regex_compile.space_cut_unsafe; spacecut.py).
        self.space_cut = None
        cut = step.get("space_cut")
        if cut is not None:
            try:
                self.space_cut = bytes.fromhex(cut) if isinstance(cut, str) else None
            except ValueError:
                pass
            if self.space_cut is None or len(self.space_cut) != 32:
                raise FormatError(f.path, "split step's space_cut is not 64 hex digits", section="meta",
                                  offset=f.sections[mtok.SECTION_META][1])

    def run_others(self) -> bytes:
        """The bytes of a translated text's alphabet (chars < 256) outside the run class: deleting
        them counts the run class's chars (made on first use: one small compile)."""
        if self._run_others is None:
            member = self._compile(self.runs["set"]).fullmatch
            self._run_others = bytes(b for b in range(256) if member(chr(b)) is None)
        return self._run_others

    def runs_regex(self):
        """(the pattern with whole runs, a pattern matching the runs longer than k, k), compiled
        on first use (the whole pattern: a few ms, paid only by a text of runs)."""
        if self._runs_regex is None:
            r = self.runs
            self._runs_regex = (self._compile(r["regex"]), self._compile(f"{r['set']}{{{r['k'] + 1},}}"), r["k"])
        return self._runs_regex

    def _compile(self, pattern: str):
        try:
            return re.compile(pattern)
        except re.error as e:
            f = self._f
            raise FormatError(f.path, f"split runs regex does not compile: {e}", section="meta",
                              offset=f.sections[mtok.SECTION_META][1]) from None

    def bmp_regex(self):
        """The compiled py_pattern_bmp, None when the file has none: from the engine code stored at
        export when this Python can run it, else compiled here (4-11 ms once: its classes are
        bitmaps built code point by code point)."""
        if self._bmp_regex is None and self.bmp:
            from . import sre_load

            self._bmp_regex = sre_load.load(self._f, self._bmp_code, self.bmp)
        if self._bmp_regex is None and self.bmp:
            try:
                self._bmp_regex = re.compile(self.bmp)
            except re.error as e:
                f = self._f
                raise FormatError(f.path, f"split regex_bmp does not compile: {e}", section="meta",
                                  offset=f.sections[mtok.SECTION_META][1]) from None
        return self._bmp_regex

    def full_regex(self):
        """The compiled regex_full from its stored code, or None when the file or engine has none."""
        if self._full_regex is None:
            from . import sre_load

            self._full_regex = sre_load.load(self._f, self._full_code, self.full, "regex_full_code") or False
        return self._full_regex or None

    def np_tables(self):
        """(class_index, class_blocks) as numpy arrays over the map, made on first use."""
        if self._np is None:
            import numpy as np

            self._np = (np.frombuffer(self.index, dtype="<u2"), np.frombuffer(self.blocks, dtype=np.uint8))
        return self._np

    def translate(self, text: str) -> str:
        if self.index is None or text.isascii():
            return text
        if len(text) >= NP_THRESHOLD:
            from .charclass import translate_np

            return translate_np(text, *self.np_tables())
        if self._memo is None:
            # One memo per step: repeated non-ASCII chars become C-level dict hits in str.translate.
            self._memo = TranslationMemo(self.index, self.blocks)
        return text.translate(self._memo)

    def direct(self, text: str):
        """(compiled pattern over original code points, the text it runs on, positions of astral
        code points or None) when such a pattern may serve (non-ASCII text; loaded already, or text
        long enough to pay for loading it), else None. The full pattern (stored code) runs on the
        text itself: (regex, text, None). Without it, py_pattern_bmp: a text with a few astral code
        points runs with each replaced by a BMP stand-in of the same class (so the same length and
        the same matches); the pieces holding those positions are then cut from the text itself."""
        if text.isascii():
            return None
        if self._full_regex is not False and (self._full_regex is not None or len(text) >= BMP_COMPILE_MIN):
            full = self.full_regex()
            if full is not None:
                return full, text, None
        if not self.bmp or (self._bmp_regex is None and len(text) < BMP_COMPILE_MIN):
            return None
        if bmp_only(text):
            return self.bmp_regex(), text, ()
        n_astral = len(text.encode("utf-16-le", "surrogatepass")) // 2 - len(text)
        if n_astral * ASTRAL_SHARE > len(text):
            return None  # mostly astral text: the translated pattern, with no per-char Python work
        where = [m.start() for m in _ASTRAL.finditer(text)]
        out, prev = [], 0
        for p in where:
            c = self._stand_in(ord(text[p]))
            if c is None:
                return None
            out += (text[prev:p], c)
            prev = p + 1
        out.append(text[prev:])
        return self.bmp_regex(), "".join(out), where

    def _stand_in(self, cp: int) -> str | None:
        """A BMP code point in the same pattern class as cp (the class tables say which), or None."""
        if self._memo is None:
            self._memo = TranslationMemo(self.index, self.blocks)
        k = self._memo[cp]
        if k not in self._stand_ins:
            blocks, index, found = bytes(self.blocks), self._memo._index, None
            for b in range(256):  # the BMP's blocks; ASCII maps to itself, below any class byte
                at = blocks.find(k, index[b] << 8, (index[b] << 8) + 256)
                if at >= 0:
                    found = chr((b << 8) | (at & 0xFF))
                    break
            self._stand_ins[k] = found
        return self._stand_ins[k]

    def spans(self, text: str) -> list[tuple[int, int]]:
        if not text:
            return []
        direct = self.direct(text)
        regex, t = direct[:2] if direct is not None else (self.regex, self.translate(text))
        flag = not self.invert
        spans, prev = [], 0
        for m in regex.finditer(t):
            s, e = m.span()
            if prev != s:
                spans.append((prev, s, not flag))
            spans.append((s, e, flag))
            prev = e
        if prev != len(text):
            spans.append((prev, len(text), not flag))
        if self.behavior == "isolated" and not self.invert:
            return [(s, e) for s, e, _m in spans if s < e]
        return apply_behavior(spans, self.behavior)


class PrefixSpaceStep:
    """ByteLevel's add_prefix_space: a ' ' before every piece that does not start with one; the
    inserted space takes the original range of the char it attaches to."""

    def __call__(self, pieces):
        out = []
        for text, offs in pieces:
            if text.startswith(" ") or not text:
                out.append((text, offs))
            else:
                o = expand(offs, len(text))
                out.append((" " + text, [o[0]] + o))
        return out


def build(f, steps: list[dict]):
    out = []
    for step in steps:
        t = step["type"]
        if t == "split":
            out.append(SplitStep(f, step))
        elif t == "prefix_space":
            out.append(PrefixSpaceStep())
        elif t == "char_split":  # BertPreTokenizer, Punctuation, WhitespaceSplit
            from .bert import CharSplit

            out.append(CharSplit(f, step))
        elif t == "metaspace":
            from .metaspace import MetaspaceStep

            out.append(MetaspaceStep(f, step))
        elif t == "scripts":  # UnicodeScripts
            from .sp_pretokenizers import ScriptsStep

            out.append(ScriptsStep(f, step))
        else:
            raise FormatError(f.path, f"unknown pre-tokenizer step {t!r}", section="meta",
                              offset=f.sections[mtok.SECTION_META][1])
    return out
