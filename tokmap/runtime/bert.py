"""Runtime steps of the BERT family, driven by per-character tables embedded at export.

  CharMap    normalizer: each code point maps to itself, to a string, or to nothing (Lowercase,
             BertNormalizer's clean_text / CJK padding / accent stripping, StripAccents); every
             output char keeps the range of the char it came from, as NormalizedString does.
  Strip      normalizer: trims table whitespace at either end.
  CharSplit  pre-tokenizer: each char of a table is its own delimiter (BertPreTokenizer,
             Punctuation, WhitespaceSplit), then the split behaviour applies.
  wordpiece  decoder: tokenizers' WordPiece decode_chain.

Tables are JSON rows [start, end(, replacement)] in a blob, parsed once on first use; lookups go
through a memo dict so str.translate does the per-char work in C.
"""

from __future__ import annotations

import json
import re
import sys
from bisect import bisect_right
from itertools import islice
from threading import get_ident

from .. import mtok
from ..errors import FormatError
from .pretokenizers import SpanStep, apply_behavior


def _rows(f, blob: int) -> list:
    """The table's rows, checked: sorted, non-overlapping [start, end(, str|None)] code point ranges.
    A damaged table is refused naming its section rather than mis-normalizing."""
    sid = mtok.BLOB_BASE + blob
    try:
        rows = json.loads(bytes(f.view(sid, mtok.U8)).decode("utf-8"))
        if type(rows) is not list:
            raise ValueError("not a list of rows")
        prev = 0
        for r in rows:  # (exact type tests, no generator: BERT's ~5900 rows are checked on a first encode)
            if type(r) is not list or not 2 <= len(r) <= 3 or type(r[0]) is not int or type(r[1]) is not int \
                    or not prev <= r[0] < r[1] <= 0x110000 or (len(r) == 3 and r[2] is not None and type(r[2]) is not str):
                raise ValueError(f"bad row {r!r}")
            prev = r[1]
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        raise FormatError(f.path, f"character table: {e}", section=mtok.section_name(sid),
                          offset=f.sections[sid][1] if sid in f.sections else None) from None
    return rows


BULK_TEXT = 1 << 16  # chars of a text from which a memo's new chars are worked out together (_BulkMemo.translate)
BULK_MISSES = 512  # new chars a long text may meet one by one before the rest are worked out together


class _Unmet(Exception):
    """Raised through str.translate by a probing memo at a char it has not met (a ChainMemo) or
    past its budget of such chars (a _BulkMemo); not a LookupError, which translate takes for
    "keep the char"."""


def _probing(memo, text: str, probe):
    """text.translate(memo) with memo._probe set to probe, whose __missing__ then raises _Unmet
    where the probe says to stop; None when it stopped."""
    memo._probe = probe
    try:
        return text.translate(memo)
    except _Unmet:
        return None
    finally:
        memo._probe = None


class _BulkMemo(dict):
    """A translate table (cp -> value) filled on demand: one char at a time by _lookup (called
    from C by str.translate), or, for a long text with many new chars, all of them at once by fill."""

    _probe = None  # [new chars left] while translate probes a long text

    def translate(self, text: str) -> str:
        """text.translate(self). A long text meets its first BULK_MISSES new chars one by one;
        past them, all of its new chars are looked up together (fill) before the translate
        proper. One by one each costs a bisect and a call from C (~0.5 us): minilm over
        utf8seq.txt (235K distinct chars), a first call, 338 -> 244 ms with the normalizer's
        tables filled together, 318 -> 244 with the segmenter's."""
        if len(text) < BULK_TEXT:
            return text.translate(self)
        done = _probing(self, text, [BULK_MISSES])
        if done is not None:
            return done
        import numpy as np

        cps = np.array(distinct_code_points(text, 1 << 21), dtype=np.int64)
        if len(self) * 4 > len(cps):  # (else the few met are looked up again, to the same values)
            cps = cps[~np.fromiter(map(self.__contains__, cps.tolist()), bool, len(cps))]
        self.fill(cps)
        return text.translate(self)

    def __missing__(self, cp):
        probe = self._probe
        if probe is not None:
            probe[0] -= 1
            if probe[0] < 0:
                raise _Unmet
        v = self[cp] = self._lookup(cp)
        return v


class _Memo(_BulkMemo):
    """cp -> translate value (str, None to delete, or cp itself), looked up by range once per cp."""

    def __init__(self, rows, hit, miss):
        super().__init__()
        self.starts = [r[0] for r in rows]
        self.ends = [r[1] for r in rows]
        self.vals = [hit(r) for r in rows]
        self.miss = miss
        self._bounds = None  # starts and ends as numpy arrays, for rows_of

    def rows_of(self, cps):
        """The row holding each code point of the int64 array cps, -1 where none does."""
        import numpy as np

        if self._bounds is None:
            self._bounds = (np.array(self.starts, dtype=np.int64), np.array(self.ends, dtype=np.int64))
        starts, ends = self._bounds
        k = np.searchsorted(starts, cps, side="right") - 1
        inside = k >= 0
        inside[inside] = cps[inside] < ends[k[inside]]
        k[~inside] = -1
        return k

    def fill(self, cps) -> None:
        """The values of the code points of the int64 array cps, as _lookup makes them."""
        k = self.rows_of(cps)
        inside = k >= 0
        out = cps[~inside].tolist()
        self.update(zip(out, out) if self.miss is None else dict.fromkeys(out, self.miss))
        cps_in = cps[inside].tolist()
        vals = list(map(self.vals.__getitem__, k[inside].tolist()))
        self.update(zip(cps_in, vals))
        for cp, v in zip(cps_in, vals):
            if v == "pad":  # (as _lookup makes it)
                self[cp] = f" {chr(cp)} "

    def _lookup(self, cp):
        k = bisect_right(self.starts, cp) - 1
        v = self.vals[k] if k >= 0 and cp < self.ends[k] else (cp if self.miss is None else self.miss)
        if v == "pad":  # handle_chinese_chars: the char with a space on each side
            v = f" {chr(cp)} "
        return v


class _LenMemo(dict):
    """cp -> chr(number of chars it becomes), from a _Memo."""

    def __init__(self, memo):
        super().__init__()
        self.memo = memo

    def __missing__(self, cp):
        v = self.memo[cp]
        v = chr(0 if v is None else 1 if isinstance(v, int) else len(v))
        self[cp] = v
        return v


_NOT_ONE = re.compile("[^\x01]")


def apply_memo(text: str, memo, chars=None):
    """memo.translate(text) (memo: a _BulkMemo), and the new text's set of chars (for the next
    step), faster.

    str.translate costs ~70 ns a char through a mapping; set(text) and str.replace are C loops
    several times quicker. When only a few of the distinct chars change and no replacement holds
    another changed char, one replace per changed char gives the same text as translate.
    chars=False: the text has too many distinct chars for the per-char look to pay; translate."""
    if chars is None:
        # (set(text) makes a str per wide char: each step of minilm over utf8seq.txt made one of
        # its 880K chars just to find them too many, 166 -> 93 ms a warm call with numpy's count)
        if len(text) >= BULK_TEXT and not text.isascii():
            cps = distinct_code_points(text, len(text) >> 4)
            chars = False if cps is None else set(map(chr, cps))
        else:
            chars = set(text)
            if len(chars) * 16 > len(text):
                chars = False
    if chars is False:
        return memo.translate(text), False
    changed = {}
    for c in chars:
        v = memo[ord(c)]
        if v is None:
            changed[c] = ""
        elif isinstance(v, int):
            if v != ord(c):
                changed[c] = chr(v)
        elif v != c:
            changed[c] = v
    if not changed:
        return text, chars
    new_chars = (chars - changed.keys()).union(*changed.values())
    # A lowercasing table that agrees with str.lower on every char present: one C pass. (lower()
    # is context-free except for final sigma, so a text holding U+03A3 never takes this.)
    if "\u03a3" not in chars and all(changed.get(c, c) == c.lower() for c in chars):
        return text.lower(), new_chars
    if len(changed) <= 32 and not any(k in v for c, v in changed.items() for k in changed if k != c):
        for c, v in changed.items():
            text = text.replace(c, v)
        return text, new_chars
    return memo.translate(text), new_chars


def _ascii_map(memo):
    """How the table maps an ASCII text, when every ASCII char becomes one ASCII char or none:
    str.lower (Lowercase, BertNormalizer without clean_text's deletions), else a bytes.translate
    (table, deleted bytes) pair; None when some ASCII char becomes more chars or a non-ASCII one.
    A short ASCII encode then pays one C call here, where apply_memo's char set and per-char
    look cost 1-3 us (botchan-wordlevel's Lowercase: 2.9 of a 14 us call)."""
    table, deleted = bytearray(range(256)), bytearray()
    for cp in range(128):
        v = memo[cp]
        if v is None:
            deleted.append(cp)
            continue
        if type(v) is str:
            if len(v) != 1:
                return None
            v = ord(v)
        if v >= 128:
            return None
        table[cp] = v
    if not deleted and table[:128] == bytes(range(128)).lower():
        return str.lower
    table, deleted = bytes(table), bytes(deleted)
    return lambda text: text.encode("ascii").translate(table, deleted).decode("ascii")


class CharMap:
    def __init__(self, f, step):
        self.f, self.blob = f, step["table"]
        self.memo = self.lens = None
        self.ascii = self.ascii_one = None  # (_ascii_map's, and whether it deletes nothing)

    def _memo(self):
        if self.memo is None:
            memo = _Memo(_rows(self.f, self.blob), lambda r: r[2], None)
            self.lens = _LenMemo(memo)
            self.ascii = _ascii_map(memo)
            self.ascii_one = self.ascii is not None and all(memo[cp] is not None for cp in range(128))
            self.memo = memo
        return self.memo

    def normalize_chars(self, text: str, chars):
        """Without alignments: (new text, its char set); `chars` is text's char set or None."""
        memo = self.memo if self.memo is not None else self._memo()
        if self.ascii is not None and text.isascii():
            new = self.ascii(text)
            return (text, chars) if new == text else (new, None)
        return apply_memo(text, memo, chars)

    def normalize(self, text: str, want_align: bool):
        memo = self._memo()
        if self.ascii_one and text.isascii():  # (one char for one: the identity alignment)
            new = self.ascii(text)
            return (text, None) if new == text else (new, None)
        new = memo.translate(text)
        if new == text:
            return text, None
        if not want_align:
            return new, None
        lens = text.translate(self.lens)
        if len(new) == len(text) and not lens.strip("\x01"):
            return new, None  # one char for one char: the identity alignment
        # Runs of one-for-one chars in bulk; deleted or expanded chars one by one.
        al, prev = [], 0
        for m in _NOT_ONE.finditer(lens):
            i = m.start()
            al.extend(zip(range(prev, i), range(prev + 1, i + 1)))
            al.extend([(i, i + 1)] * ord(lens[i]))
            prev = i + 1
        al.extend(zip(range(prev, len(text)), range(prev + 1, len(text) + 1)))
        return new, al


class Strip:
    def __init__(self, f, step):
        self.left, self.right = step["left"], step["right"]
        self.f, self.blob = f, step["table"]
        self.memo = None
        self.chars = None  # the table's whitespace as one str (str.strip's argument), when it is small

    def _is_ws(self, c):
        if self.memo is None:
            self._load()
        return self.memo[ord(c)]

    def _load(self):
        rows = _rows(self.f, self.blob)
        self.memo = _Memo(rows, lambda r: True, False)
        if sum(r[1] - r[0] for r in rows) <= 256:  # (Unicode White_Space: 25 chars)
            self.chars = "".join(chr(c) for r in rows for c in range(r[0], r[1]))

    def normalize(self, text: str, want_align: bool):
        if self.memo is None:
            self._load()
        chars = self.chars
        if chars is not None:  # (str.lstrip / rstrip: a C scan, not a Python test per char)
            s = len(text) - len(text.lstrip(chars)) if self.left else 0
            e = len(text.rstrip(chars)) if self.right else len(text)
            if e < s:
                e = s  # (a text of whitespace only: stripped from the left already)
        else:
            s, e = self._ends(text)
        if s == 0 and e == len(text):
            return text, None
        return text[s:e], ([(i, i + 1) for i in range(s, e)] if want_align else None)

    def _ends(self, text: str):
        s, e = 0, len(text)
        if self.left:
            while s < e and self._is_ws(text[s]):
                s += 1
        if self.right:
            while e > s and self._is_ws(text[e - 1]):
                e -= 1
        return s, e


_MARK = re.compile("\x01")


class CharSplit(SpanStep):
    def __init__(self, f, step):
        self.behavior = step["behavior"]
        self.f, self.blob = f, step["table"]
        self.memo = None

    def spans(self, text: str):
        if self.memo is None:
            self.memo = _Memo(_rows(self.f, self.blob), lambda r: "\x01", "\x00")
        marks = self.memo.translate(text)
        spans, prev = [], 0
        for m in _MARK.finditer(marks):
            s = m.start()
            if prev != s:
                spans.append((prev, s, False))
            spans.append((s, s + 1, True))
            prev = s + 1
        if prev != len(text):
            spans.append((prev, len(text), False))
        return apply_behavior(spans, self.behavior)


_CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
            (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def wordpiece_decoder(step):
    prefix, cleanup = step["prefix"], step["cleanup"]

    def clean(t: str) -> str:
        if cleanup:
            for a, b in _CLEANUP:
                t = t.replace(a, b)
        return t

    class Later(dict):
        """A token's text anywhere but first (the prefix taken off, or a space put before;
        cleaned), worked out once per distinct token: eleven replaces a token cost ~6 us (minilm
        over 1M ids of multi.txt: 6.5 of a 6.9 s decode), and tokens repeat."""

        def __missing__(self, t: str) -> str:
            v = self[t] = clean(t[len(prefix):] if t.startswith(prefix) else " " + t)
            return v

    later = Later()

    def run(tokens: list[str]) -> list[str]:
        if not tokens:
            return []
        return [clean(tokens[0]), *map(later.__getitem__, islice(tokens, 1, None))]

    return run


class _SegMemo(_BulkMemo):
    """cp -> " " (a removed delimiter), " c " (an isolated one) or cp itself, for `segmenter`."""

    def __init__(self, steps):
        super().__init__()
        self.steps = steps

    def _lookup(self, cp):
        v = cp
        for st in self.steps:
            if st.memo[cp] == "\x01":
                if st.behavior == "removed":
                    return " "
                v = f" {chr(cp)} "
        return v

    def fill(self, cps) -> None:
        """The values of the code points of the int64 array cps, as _lookup makes them: removed
        by any step wins, else isolated by any, else the char itself (each step's table marks
        its delimiters "\x01", every other char "\x00")."""
        removed = isolated = None
        for st in self.steps:
            hit = st.memo.rows_of(cps) >= 0
            if st.behavior == "removed":
                removed = hit if removed is None else removed | hit
            else:
                isolated = hit if isolated is None else isolated | hit
        if removed is not None:
            self.update(dict.fromkeys(cps[removed].tolist(), " "))
            if isolated is not None:
                isolated &= ~removed
            keep = ~removed if isolated is None else ~(removed | isolated)
        else:
            keep = ~isolated
        rest = cps[keep].tolist()
        self.update(zip(rest, rest))
        if isolated is not None:
            self.update((cp, f" {chr(cp)} ") for cp in cps[isolated].tolist())


def segmenter(steps):
    """One translate table doing a run of CharSplit steps at once, or None.

    Only for `removed` and `isolated` steps where ASCII ' ' is a removed delimiter: then a char
    that some step removes is gone whatever the order, one that a step isolates is its own piece,
    and `text.translate(table).split(" ")` less its empty strings are the pieces, all in C."""
    if not steps or not all(isinstance(s, CharSplit) and s.behavior in ("removed", "isolated") for s in steps):
        return None
    for s in steps:
        if s.memo is None:
            s.memo = _Memo(_rows(s.f, s.blob), lambda r: "\x01", "\x00")
    if not any(s.behavior == "removed" and s.memo[32] == "\x01" for s in steps):
        return None
    return _SegMemo(steps)


class NeedsContext(Exception):
    """Raised through str.translate by a `ChainMemo` for a char whose result depends on its
    neighbours; the caller then runs the steps one by one. (Not a LookupError: translate would
    take that for "leave the char as it is".)"""


FILL_TEXT = 256  # chars of a text from which ChainMemo.translate works out its new chars together
# Distinct chars above which it does not: a text of that many (utf8seq.txt: every code point once)
# soon holds a char that needs its neighbours, and the caller then takes the steps one by one
# anyway, where char by char translate had stopped at it (fill over utf8seq's 235K: 700 ms lost).
FILL_MOST = 1 << 14
# Chars a text seldom holds, tried in turn where a separator the table keeps is wanted (fill here,
# fastpath.Chunks between chunks): private use, noncharacters.
SEPARATOR_CANDIDATES = "\ue000\ue001\ufdd0\ufdd1\ufdd2\ufdd3"


def distinct_code_points(text: str, most: int) -> list[int] | None:
    """The distinct code points of text, or None when there are more than `most`. set(text) makes
    a str per char past Latin-1 (~55 ns each: 21 ms for wagahai.txt's 375K); a long text's code
    points are marked in numpy instead (~2 ms)."""
    if len(text) < 1 << 12 or (len(text) < 1 << 16 and "numpy" not in sys.modules) or text.isascii():
        chars = set(text)
        return list(map(ord, chars)) if len(chars) <= most else None
    import numpy as np

    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    seen = np.zeros(int(cps.max()) + 1, bool)
    seen[cps] = True
    return np.flatnonzero(seen).tolist() if np.count_nonzero(seen) <= most else None


class ChainMemo(dict):
    """cp -> what a run of per-char normalizers and then a `segmenter` make of it, so that one
    str.translate does the whole normalize + pre-tokenize of a short text (each step alone costs
    a translate, ~5 of them for BERT, most of a short call).

    Exact only where every step is per-char: CharMap tables, and NFD/NFKD, whose decompositions
    are per-char but whose canonical reordering can swap marks (ccc != 0) that came from two
    neighbouring chars. A char leaving such a mark that the later steps keep (BERT's strip_accents
    drops almost all of them) raises NeedsContext instead of being mapped."""

    def __init__(self, steps, seg):
        super().__init__()
        self.steps, self.seg, self.contextual = steps, seg, set()
        self._sep = None  # fill's separator, found on first use ("" when none serves)
        self._probe = None  # the thread whose translate stops at the first char not met (translate)

    def translate(self, text: str, steps_ok: bool = False) -> str:
        """text.translate(self). A long text is first translated probing: at the first char not
        met the probe stops, and all of the text's new chars are worked out together (fill)
        before the translate proper; a text whose chars are all met pays nothing more.
        steps_ok: the caller can take the steps one by one (it catches NeedsContext), which a
        text of more than FILL_MOST new chars then does at once: through the table each of them
        costs ~15 us, one at a time, where the steps' own tables look all of them up together
        (_BulkMemo.translate). minilm over utf8seq.txt went through 9K of its chars before one needed
        its neighbours: 316 -> 244 ms first call."""
        if len(text) < FILL_TEXT:
            return text.translate(self)
        done = _probing(self, text, get_ident())
        if done is not None:
            return done
        cps = distinct_code_points(text, FILL_MOST)
        if cps is not None:
            self.fill(cps)
        elif steps_ok:
            raise NeedsContext
        return text.translate(self)

    def __missing__(self, cp):
        if cp in self.contextual:
            raise NeedsContext
        if self._probe is not None and self._probe == get_ident():
            raise _Unmet
        s = chr(cp)
        for i, step in enumerate(self.steps):
            s = step.normalize(s, False)[0]
            norm = getattr(step, "norm", None)
            if norm is not None and any(norm.ccc(ord(c)) and self._kept(c, i + 1) for c in s):
                self.contextual.add(cp)
                raise NeedsContext
        seg = self.seg
        out = "".join(v if isinstance(v, str) else chr(v) for v in (seg[ord(c)] for c in s))
        v = cp if out == chr(cp) else out
        self[cp] = v
        return v

    def fill(self, cps) -> None:
        """Work out at once the code points of `cps` not met yet, as __missing__ would one by one:
        the steps run over them joined by a separator that every step keeps as it is (a
        starter, so no canonical reordering crosses it), and the results are cut apart there.
        Each char alone cost ~10 us through the steps (BERT over wagahai.txt, ~3,000 distinct
        chars: 31 ms of a ~170 ms first encode). Without a usable separator they are left to
        __missing__."""
        todo = [chr(cp) for cp in cps if cp not in self and cp not in self.contextual]
        if not todo:
            return
        sep = self._separator()
        if sep is None:
            return
        if sep in todo:  # (the separator itself is left to __missing__)
            todo.remove(sep)
        s, ctx = sep.join(todo), set()
        for i, step in enumerate(self.steps):
            s = step.normalize(s, False)[0]
            norm = getattr(step, "norm", None)
            if norm is not None:
                # The marks (canonical class != 0) that the later steps keep, among the distinct
                # chars made (BERT's accent stripping drops most: minilm keeps 96 of all Unicode's):
                # the chars whose result holds one need their neighbours.
                kept = {x for x in set(s) if norm.ccc(ord(x)) and self._kept(x, i + 1)}
                if kept:
                    parts = s.split(sep)
                    if len(parts) != len(todo):
                        return
                    ctx.update(c for c, part in zip(todo, parts) if not kept.isdisjoint(part))
        parts = s.translate(self.seg).split(sep)  # (the segmenter keeps the separator)
        if len(parts) != len(todo):
            return
        for c, out in zip(todo, parts):
            if c in ctx:
                self.contextual.add(ord(c))
            else:
                self[ord(c)] = ord(c) if out == c else out

    def _separator(self):
        """A char every step and the segmenter keep as it is, with canonical class 0, or None."""
        if self._sep is None:
            self._sep = ""
            for c in SEPARATOR_CANDIDATES:
                ok = self.seg[ord(c)] == ord(c)
                x = c
                for step in self.steps:
                    norm = getattr(step, "norm", None)
                    ok = ok and x == c and (norm is None or norm.ccc(ord(c)) == 0)
                    x = step.normalize(x, False)[0]
                if ok and x == c:
                    self._sep = c
                    break
        return self._sep or None

    def _kept(self, ch, start):
        for step in self.steps[start:]:
            ch = step.normalize(ch, False)[0]
        return bool(ch)


def chain_memo(normalizers: list, seg):
    """A ChainMemo for these normalizer steps before segmenter `seg`, or None when a step is not
    per-char (Strip, composing forms, SentencePiece steps)."""
    from .normalizers import UnicodeForm

    for st in normalizers:
        if not (isinstance(st, CharMap) or (isinstance(st, UnicodeForm) and st.form in ("NFD", "NFKD"))):
            return None
    return ChainMemo(list(normalizers), seg)
