"""NFC/NFD/NFKC/NFKD exactly as HF tokenizers does them, with alignments.

HF runs these normalizers through the crate unicode-normalization-alignments
0.1.12 (Unicode 9.0 tables) and `NormalizedString::transform`.  This module
reproduces both from the table blob written by
`tokmap.exporter.norm_tables` (layout documented there), read in place from
a memoryview; the running Python's `unicodedata` is never consulted because
its Unicode version differs.

Alignment rule (mirrors the crate + `transform`): every output char carries a
change marker, 0 for "replaces the next input char", +1 for "inserted",
-n for "replaces the next input char and swallows n more".  Markers are
assigned in decomposition order (0 for a char's first piece, +1 for the
rest), travel with the pieces through canonical reordering, and a
composition of `a` and `b` gets `a + b - 1`.  Output chars are then matched
to input chars purely by position: a char with marker <= 0 takes the range
of the next unconsumed input char and consumes 1 - marker of them; a +1 char
takes the range of the last consumed one, or (0, 0) before any.  So after a
reordering the ranges follow the order of consumption, not the char's real
origin -- that is what HF reports, and tokmap must match it.

Speed: most text never needs work.  ASCII returns at once; otherwise a regex
over the form's "interesting" chars (non-zero ccc, decomposable, or for the
composing forms chars that can compose with a predecessor or are not
NFC-stable) finds the runs that need processing (in a long text, numpy over
the same class: _class_runs).  Every other char is
inert: it is its own normalization, and no reordering or composition can
cross it, so runs are processed independently (the composing forms also take
the inert char just before a run, which marks may compose with), and the
results are cached per run text.
"""

import re
import struct
import sys
from bisect import bisect_left, bisect_right
from itertools import compress

_MAGIC = b"TMKNORM\0"
_HEADER = struct.Struct("<8sHHI8sII")
_DIR = struct.Struct("<4sIII")
_FORM_BITS = {"NFD": 1, "NFC": 2, "NFKD": 4, "NFKC": 8}
_FORM_SECTIONS = {
    "NFD": (b"CCC_", b"CDEC"),
    "NFC": (b"CCC_", b"CDEC", b"COMP"),
    "NFKD": (b"CCC_", b"CDEC", b"KDEC"),
    "NFKC": (b"CCC_", b"CDEC", b"KDEC", b"COMP"),
}
# form -> (compatibility decomposition?, recompose?)
_FORM_MODE = {"NFD": (False, False), "NFC": (False, True),
              "NFKD": (True, False), "NFKC": (True, True)}

_S_BASE, _L_BASE, _V_BASE, _T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
_L_COUNT, _V_COUNT, _T_COUNT = 19, 21, 28
_N_COUNT = _V_COUNT * _T_COUNT
_S_COUNT = _L_COUNT * _N_COUNT

# Run results are cached by run text; real text repeats the same runs
# (a consonant + its marks, a Korean word).  This bound (also used for the
# composition-pair cache) keeps odd input from growing them without limit.
_SEG_CACHE_MAX = 1 << 15
_SEG_CACHE_KEY_MAX = 64

# Identity alignments are most of any alignment list, and building the
# tuples dominates the cost.  Tuples are immutable, so those for the first
# 32768 positions are built once (about 3 MB) and shared by slicing, which
# only copies pointers; longer texts build the rest.
_IDENT_MAX = 1 << 15
_ident = []


def _identity(a, b):
    """[(i, i + 1) for i in range(a, b)], shared where cached."""
    global _ident
    if not _ident:
        ints = list(range(_IDENT_MAX + 1))  # each int object shared by two tuples
        _ident = list(zip(ints, ints[1:]))
    if b <= _IDENT_MAX:
        return _ident[a:b]
    if a >= _IDENT_MAX:
        return list(zip(range(a, b), range(a + 1, b + 1)))
    out = _ident[a:]
    out.extend(zip(range(_IDENT_MAX, b), range(_IDENT_MAX + 1, b + 1)))
    return out


def _u32(mv, off, n, field):
    view = mv[off:off + 4 * n]
    if len(view) != 4 * n:
        raise ValueError(f"normalization blob: {field} at offset {off} runs past the end")
    if sys.byteorder == "little":
        return view.cast("I")
    import array  # big-endian hosts pay one copy; the format is little-endian
    a = array.array("I", view.tobytes())
    a.byteswap()
    return a


def _u16(mv, off, n, field):
    view = mv[off:off + 2 * n]
    if len(view) != 2 * n:
        raise ValueError(f"normalization blob: {field} at offset {off} runs past the end")
    if sys.byteorder == "little":
        return view.cast("H")
    import array
    a = array.array("H", view.tobytes())
    a.byteswap()
    return a


class _DecompTable:
    """Sorted keys -> UTF-8 strings, searched in place."""

    __slots__ = ("keys", "ends", "data", "base", "tag")

    def __init__(self, mv, off, length, count, tag):
        keys_len = 4 * count
        ends_len = (2 * count + 3) & ~3
        if keys_len + ends_len > length:
            raise ValueError(
                f"normalization blob: section {tag} at offset {off}: {count} entries "
                f"need {keys_len + ends_len} bytes, section has {length}")
        self.tag = tag
        self.keys = _u32(mv, off, count, f"{tag} keys")
        self.ends = _u16(mv, off + keys_len, count, f"{tag} ends")
        self.base = off + keys_len + ends_len
        self.data = mv[self.base:off + length]
        if count and self.ends[count - 1] > len(self.data):
            raise ValueError(
                f"normalization blob: {tag} data end {self.ends[count - 1]} at offset "
                f"{self.base} exceeds its {len(self.data)} bytes")

    def get(self, cp):
        keys = self.keys
        i = bisect_left(keys, cp)
        if i == len(keys) or keys[i] != cp:
            return None
        start = self.ends[i - 1] if i else 0
        end = self.ends[i]
        if not start <= end <= len(self.data):
            raise ValueError(
                f"normalization blob: {self.tag} entry {i} range {start}..{end} at offset "
                f"{self.base} is invalid")
        try:
            return bytes(self.data[start:end]).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(
                f"normalization blob: {self.tag} entry {i} at offset {self.base + start} "
                f"is not UTF-8") from None


class UnicodeNormalizer:
    """Unicode 9.0 NFC/NFD/NFKC/NFKD over a table blob, HF-compatible."""

    def __init__(self, blob, stored=None):
        """stored(form) -> (scan, exact) compiled patterns, or None to build them (_pattern)."""
        self._stored = stored
        mv = memoryview(blob)
        if mv.ndim != 1 or mv.format not in ("B", "b", "c"):
            mv = mv.cast("B")
        self._mv = mv
        size = len(mv)
        if size < _HEADER.size:
            raise ValueError(f"normalization blob: header needs {_HEADER.size} bytes, blob has {size}")
        magic, version, nsec, total, uver, forms, _ = _HEADER.unpack_from(mv, 0)
        if magic != _MAGIC:
            raise ValueError(f"normalization blob: bad magic {magic!r} at offset 0")
        if version != 1:
            raise ValueError(f"normalization blob: unsupported format version {version} at offset 8")
        if total != size:
            raise ValueError(f"normalization blob: total size field {total} at offset 12 != blob size {size}")
        try:
            self.unicode_version = uver.rstrip(b"\0").decode("ascii")
        except UnicodeDecodeError:
            raise ValueError("normalization blob: unicode version at offset 16 is not ASCII") from None
        dir_end = _HEADER.size + _DIR.size * nsec
        if dir_end > size:
            raise ValueError(
                f"normalization blob: section directory ({nsec} entries) at offset "
                f"{_HEADER.size} runs past the end ({size} bytes)")
        self.sections = {}
        for i in range(nsec):
            at = _HEADER.size + i * _DIR.size
            tag, off, length, count = _DIR.unpack_from(mv, at)
            if off % 8:
                raise ValueError(f"normalization blob: section {tag!r} offset {off} (entry at {at}) is not 8-aligned")
            if off < dir_end or off + length > size:
                raise ValueError(
                    f"normalization blob: section {tag!r} offset {off} length {length} "
                    f"(entry at {at}) lies outside {dir_end}..{size}")
            if tag in self.sections:
                raise ValueError(f"normalization blob: duplicate section {tag!r} (entry at {at})")
            self.sections[tag] = (off, length, count)
        self.forms = set()
        for form, bit in _FORM_BITS.items():
            if forms & bit:
                for tag in _FORM_SECTIONS[form]:
                    if tag not in self.sections:
                        raise ValueError(
                            f"normalization blob: forms field at offset 24 lists {form} "
                            f"but section {tag!r} is missing")
                self.forms.add(form)

        self._ccc_runs = None
        if b"CCC_" in self.sections:
            off, length, count = self.sections[b"CCC_"]
            if count < 1 or 4 * count > length:
                raise ValueError(f"normalization blob: CCC_ count {count} at offset {off} does not fit {length} bytes")
            self._ccc_runs = _u32(mv, off, count, "CCC_ runs")
            if self._ccc_runs[0] >> 8:
                raise ValueError(f"normalization blob: first CCC_ run at offset {off} does not start at 0")
        self._cdec = self._kdec = None
        if b"CDEC" in self.sections:
            self._cdec = _DecompTable(mv, *self.sections[b"CDEC"], "CDEC")
        if b"KDEC" in self.sections:
            self._kdec = _DecompTable(mv, *self.sections[b"KDEC"], "KDEC")
        self._seconds = self._comp_keys = self._comp_vals = None
        if b"COMP" in self.sections:
            off, length, count = self.sections[b"COMP"]
            if length < 8:
                raise ValueError(f"normalization blob: COMP at offset {off} is shorter than its 8-byte header")
            m, n = struct.unpack_from("<II", mv, off)
            # m <= 256: keys hold the second's index in their low byte.
            if n != count or m > 256 or 8 + 4 * m + 8 * n > length:
                raise ValueError(
                    f"normalization blob: COMP sizes m={m} n={n} at offset {off} "
                    f"do not fit {length} bytes / count {count}")
            self._seconds = _u32(mv, off + 8, m, "COMP seconds")
            self._comp_keys = _u32(mv, off + 8 + 4 * m, n, "COMP keys")
            self._comp_vals = _u32(mv, off + 8 + 4 * m + 4 * n, n, "COMP results")

        # Lazily filled caches (small: one entry per distinct char / pair / run).
        self._dcache = ({}, {})   # [compat] char -> ((ccc, piece), ...)
        self._ccache = {}          # "ab" -> composite char or ""
        self._patterns = {}        # form -> compiled regex of interesting runs
        self._seg_cache = {form: {} for form in _FORM_BITS}
        self._ranges = {}          # exact pattern text -> (lo, hi, BMP table) or None (_exact_ranges)

    # -- table lookups ------------------------------------------------------

    def ccc(self, cp):
        runs = self._ccc_runs
        return runs[bisect_right(runs, (cp << 8) | 0xFF) - 1] & 0xFF

    def _pieces(self, ch, compat):
        """Full decomposition of `ch` as ((ccc, char), ...), cached."""
        cp = ord(ch)
        if _S_BASE <= cp < _S_BASE + _S_COUNT:
            si = cp - _S_BASE
            d = chr(_L_BASE + si // _N_COUNT) + chr(_V_BASE + (si % _N_COUNT) // _T_COUNT)
            if si % _T_COUNT:
                d += chr(_T_BASE + si % _T_COUNT)
        elif cp < 0x80:
            d = ch
        else:
            d = None
            if compat:
                d = self._kdec.get(cp)
            if d is None:
                d = self._cdec.get(cp)
            if d is None:
                d = ch
        res = tuple((self.ccc(ord(p)), p) for p in d)
        self._dcache[compat][ch] = res
        return res

    def _compose(self, a, b):
        """Primary composite of a+b, or "" (cached by the pair)."""
        key = a + b
        r = self._ccache.get(key)
        if r is not None:
            return r
        ia, ib = ord(a), ord(b)
        r = ""
        if _L_BASE <= ia < _L_BASE + _L_COUNT and _V_BASE <= ib < _V_BASE + _V_COUNT:
            r = chr(_S_BASE + ((ia - _L_BASE) * _V_COUNT + (ib - _V_BASE)) * _T_COUNT)
        elif (_S_BASE <= ia < _S_BASE + _S_COUNT and (ia - _S_BASE) % _T_COUNT == 0
              and _T_BASE < ib < _T_BASE + _T_COUNT):
            r = chr(ia + ib - _T_BASE)
        else:
            sec = self._seconds
            j = bisect_left(sec, ib)
            if j < len(sec) and sec[j] == ib:
                keys = self._comp_keys
                k = (ia << 8) | j
                i = bisect_left(keys, k)
                if i < len(keys) and keys[i] == k:
                    r = chr(self._comp_vals[i])
        if len(self._ccache) >= _SEG_CACHE_MAX:
            self._ccache.clear()
        self._ccache[key] = r
        return r

    # -- which chars need work ------------------------------------------------

    def _interesting_ranges(self, form):
        compat, compose = _FORM_MODE[form]
        ranges = []
        runs = self._ccc_runs
        for i in range(len(runs)):
            if runs[i] & 0xFF:
                end = (runs[i + 1] >> 8) if i + 1 < len(runs) else 0x110000
                ranges.append((runs[i] >> 8, end - 1))
        decomposable = list(self._cdec.keys)
        if compat:
            decomposable += list(self._kdec.keys)
        if compose:
            seconds = set(self._seconds)
            ranges += [(s, s) for s in seconds]
            # Hangul V and T jamo compose with a preceding L / LV syllable.
            ranges += [(_V_BASE, _V_BASE + _V_COUNT - 1), (_T_BASE + 1, _T_BASE + _T_COUNT - 1)]
            composites = set(self._comp_vals)
            kset = set(self._kdec.keys) if compat else ()
            for cp in self._cdec.keys:
                # A primary composite that starts with a plain starter comes
                # back unchanged from decompose+recompose (marker 0), so it is
                # inert unless compatibility mapping applies.
                if cp in composites and cp not in kset:
                    first = ord(self._cdec.get(cp)[0])
                    if self.ccc(first) == 0 and first not in seconds:
                        continue
                ranges.append((cp, cp))
            if compat:
                ranges += [(cp, cp) for cp in kset]
        else:
            ranges += [(cp, cp) for cp in decomposable]
            ranges.append((_S_BASE, _S_BASE + _S_COUNT - 1))
        ranges.sort()
        merged = []
        for lo, hi in ranges:
            if merged and lo <= merged[-1][1] + 1:
                if hi > merged[-1][1]:
                    merged[-1][1] = hi
            else:
                merged.append([lo, hi])
        return merged

    def pattern_texts(self, form):
        """(scan regex, exact regex) texts over runs of interesting chars (the exporter stores both,
        with their engine code, so that a runtime does not build them: see _pattern)."""
        bmp, exact = [], []
        for lo, hi in self._interesting_ranges(form):
            part = "\\U%08x" % lo if lo == hi else "\\U%08x-\\U%08x" % (lo, hi)
            exact.append(part)
            if lo <= 0xFFFF:
                hi = min(hi, 0xFFFF)
                bmp.append("\\U%08x" % lo if lo == hi else "\\U%08x-\\U%08x" % (lo, hi))
        # `re` turns the BMP part of a class into a constant-time bitmap
        # but tests astral ranges one by one for every char it scans.  So
        # the scan counts every astral char as interesting (one range to
        # test), and only runs that hold astral chars are rescanned with
        # the exact class.
        bmp.append("\\U00010000-\\U0010ffff")
        return "[" + "".join(bmp) + "]+", "[" + "".join(exact) + "]+"

    def _pattern(self, form):
        """(scan regex, exact regex), compiled once: from what the file stores when it does
        (`stored(form)`), else built here (~4 ms for the ranges, 2-12 ms to compile: paid by the
        first text with a non-ASCII char)."""
        pats = self._patterns.get(form)
        if pats is None:
            pats = self._stored(form) if self._stored is not None else None
            if pats is None:
                pats = tuple(map(re.compile, self.pattern_texts(form)))
            self._patterns[form] = pats
        return pats

    @staticmethod
    def _runs(text, start, scan, exact):
        """Spans of maximal runs of interesting chars from `start` on (a scan run with astral chars
        rescanned with the exact class). A long text skips this: normalize() classifies it whole
        with numpy (_class_runs), which gives the same runs."""
        for m in scan.finditer(text, start):
            s, e = m.span()
            if _ASTRAL.search(text, s, e) is None:
                yield s, e
            else:
                for m2 in exact.finditer(text, s, e):
                    yield m2.span()

    def _exact_ranges(self, exact):
        """The exact pattern's code point ranges as numpy arrays (lo, hi) and a table of the BMP
        (1 where a code point is in the class), once per pattern; None when its text is not
        pattern_texts()'s "[" ranges "]+" (then only the regex serves)."""
        got = self._ranges.get(exact.pattern, False)
        if got is False:
            got = self._ranges[exact.pattern] = _parse_class(exact.pattern)
        return got

    # -- the crate's algorithm on one run ----------------------------------------

    def _run(self, seg, compat, compose):
        """Normalize one run; return (text, relative positions or None if identity).

        Position d for an output char means input char d of the run (-1: the
        char before the run, which HF turns into (0, 0) at text start).
        """
        dcache = self._dcache[compat]
        buf = []           # (ccc, char, marker) in decomposition order
        ready = 0          # start of the block still open to reordering
        prev = 0
        unsorted = False
        for ch in seg:
            pieces = dcache.get(ch) or self._pieces(ch, compat)
            marker = 0
            for c, p in pieces:
                if c == 0:
                    if unsorted:
                        # Stable, as in the crate: equal classes keep text order.
                        buf[ready:] = sorted(buf[ready:], key=_ccc_key)
                        unsorted = False
                    ready = len(buf)
                elif c < prev:
                    unsorted = True
                prev = c
                buf.append((c, p, marker))
                marker = 1
        if unsorted:
            buf[ready:] = sorted(buf[ready:], key=_ccc_key)

        if compose:
            out = _recompose(buf, self._compose)
        else:
            out = [(p, m) for _, p, m in buf]

        chars = []
        rel = []
        pos = 0
        for p, m in out:
            chars.append(p)
            if m > 0:
                rel.append(pos - 1)
            else:
                rel.append(pos)
                pos += 1 - m
        text = "".join(chars)
        if text == seg and rel == list(range(len(seg))):
            return seg, None
        return text, rel

    # -- public API ------------------------------------------------------------

    def normalize(self, text, form, want_alignments=False):
        """Return (normalized text, per-output-char (start, end) or None).

        Alignments are code-point ranges of `text`, as HF's Python API
        reports them for this normalizer alone.  When nothing changes, the
        very `text` object is returned (`out is text`), and the alignments,
        if asked for, are the identity; callers may test that instead of
        comparing lists.
        """
        mode = _FORM_MODE.get(form)
        if mode is None:
            raise ValueError(f"unknown normalization form {form!r}")
        if form not in self.forms:
            raise ValueError(f"normalization blob has no tables for {form}")
        if text.isascii():
            return text, _identity(0, len(text)) if want_alignments else None
        if len(text) == 1:
            # One char (bert.ChainMemo asks char by char) is its own run: no scan for interesting
            # chars, whose regex costs ~14 ms to build -- a third of a BERT encode of en.txt on a
            # freshly loaded tokenizer, which otherwise never needs it.
            out, rel = self._run(text, *mode)
            if rel is None:
                return text, _identity(0, 1) if want_alignments else None
            return out, [(d, d + 1) if d >= 0 else (0, 0) for d in rel] if want_alignments else None
        scan, exact = self._patterns.get(form) or self._pattern(form)
        if len(text) >= (NP_RUNS_MIN if "numpy" in sys.modules else NP_RUNS_MIN_IMPORT) \
                and (ranges := self._exact_ranges(exact)) is not None:
            starts, ends = _class_runs(text, *ranges)
            if not len(starts):
                return text, _identity(0, len(text)) if want_alignments else None
            if not want_alignments:
                return self._text_of_runs(text, starts, ends, form, *mode), None
            runs = zip(starts.tolist(), ends.tolist())
        else:
            first = scan.search(text)
            runs = () if first is None else self._runs(text, first.start(), scan, exact)
        if not runs:
            return text, _identity(0, len(text)) if want_alignments else None
        compat, compose = mode
        cache = self._seg_cache[form]
        pieces = []
        aligns = [] if want_alignments else None
        last = 0
        for s, e in runs:
            if compose and s:
                s -= 1  # the inert char before the run may take its marks
            seg = text[s:e]
            r = cache.get(seg)
            if r is None:
                r = self._run_remembered(seg, cache, compat, compose)
            out, rel = r
            if rel is None:
                continue  # unchanged: stays in the pending plain stretch
            if s > last:
                pieces.append(text[last:s])
                if aligns is not None:
                    aligns += _identity(last, s)
            pieces.append(out)
            if aligns is not None:
                if s:
                    aligns.extend([(s + d, s + d + 1) for d in rel])
                else:
                    aligns.extend([(d, d + 1) if d >= 0 else (0, 0) for d in rel])
            last = e
        if not pieces:
            return text, _identity(0, len(text)) if want_alignments else None
        if last < len(text):
            pieces.append(text[last:])
            if aligns is not None:
                aligns += _identity(last, len(text))
        return "".join(pieces), aligns

    def _run_remembered(self, seg, cache, compat, compose):
        """_run(seg), kept in cache (a form's run cache) when seg is short enough to be a key."""
        r = self._run(seg, compat, compose)
        if len(seg) <= _SEG_CACHE_KEY_MAX:
            if len(cache) >= _SEG_CACHE_MAX:
                cache.clear()
            cache[seg] = r
        return r

    def _text_of_runs(self, text, starts, ends, form, compat, compose):
        """normalize()'s text, without alignments, from its runs (starts, ends: numpy arrays from
        _class_runs): the runs are cut and deduplicated by C-level maps, each distinct run text is
        looked up (or normalized) once, and only the runs that change cost a step of Python each.
        multi.txt has 60K runs of 1.5K distinct texts, 10K of them changing. normalize() of it,
        the first call of a process (whose runs all miss the cache), against normalize's loop over
        every run: 61.8-63.0 -> 51.1-53.3 ms; later calls, 26-29 ms either way (4 processes)."""
        if compose:
            import numpy as np

            starts = np.maximum(starts - 1, 0)  # the inert char before a run may take its marks
        starts, ends = starts.tolist(), ends.tolist()
        segs = list(map(text.__getitem__, map(slice, starts, ends)))
        cache = self._seg_cache[form]
        changed = {}  # run text -> its normalized text, for the runs that change
        for seg in dict.fromkeys(segs):
            r = cache.get(seg)
            if r is None:
                r = self._run_remembered(seg, cache, compat, compose)
            if r[1] is not None:
                changed[seg] = r[0]
        pieces, last = [], 0
        for k in compress(range(len(segs)), map(changed.__contains__, segs)):
            if starts[k] > last:
                pieces.append(text[last:starts[k]])
            pieces.append(changed[segs[k]])
            last = ends[k]
        if not pieces:
            return text
        if last < len(text):
            pieces.append(text[last:])
        return "".join(pieces)


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
# chars of a text from which normalize() finds its runs with numpy instead of the scan regex (~7 ns a
# char, and `re` tests an astral char against each astral range of the exact class in turn; the runs
# of NFC, regex against numpy: en.txt 2.0 -> 0.12 ms, code.txt 6.2 -> 0.7, wagahai.txt 2.4 -> 0.7,
# multi.txt 56 -> 14, utf8seq.txt's 177K astral chars 12 -> 1) ...
NP_RUNS_MIN = 4096
NP_RUNS_MIN_IMPORT = 1 << 16  # ... or from this many while numpy is not imported yet (~110 ms)
RUN_BLOCK = 1 << 15  # chars _class_runs classifies at a time (1 << 16: utf8seq.txt 2.6 against 1.8 ms)
_RANGE = re.compile(r"\\U([0-9a-f]{8})(?:-\\U([0-9a-f]{8}))?")


def _parse_class(pattern):
    """(lo, hi, bmp): numpy arrays of the ranges in a pattern_texts() exact pattern, ascending and
    disjoint, and the BMP's membership table (uint8 per code point, 1 in a range); None for any
    other text (a file may store what it likes: the regex then decides)."""
    if not (pattern.startswith("[") and pattern.endswith("]+")):
        return None
    body, pos, lo, hi = pattern[1:-2], 0, [], []
    for m in _RANGE.finditer(body):
        a = int(m.group(1), 16)
        b = int(m.group(2) or m.group(1), 16)
        if m.start() != pos or b < a or (hi and a <= hi[-1]):
            return None
        lo.append(a)
        hi.append(b)
        pos = m.end()
    if pos != len(body) or not lo:
        return None
    import numpy as np

    lo, hi = np.array(lo, dtype=np.uint32), np.array(hi, dtype=np.uint32)
    edge = np.zeros(0x10001, dtype=np.int32)  # +1 where a BMP range starts, -1 after it ends
    bmp = np.flatnonzero(lo < 0x10000)
    np.add.at(edge, lo[bmp], 1)
    np.add.at(edge, np.minimum(hi[bmp], 0xFFFF) + 1, -1)
    return lo, hi, (np.cumsum(edge[:0x10000]) > 0).astype(np.uint8)


def _class_runs(text, lo, hi, bmp):
    """(starts, ends): numpy arrays of the maximal runs in text of chars in the ranges [lo[k], hi[k]]
    (bmp: the BMP's membership table): only the chars from lo[0] up are looked at, a BMP one in
    the table, an astral one by a binary search. The text is taken RUN_BLOCK chars at a time, and
    runs cut at a block's edge are joined: each block's arrays fit in the CPU's cache and reuse
    the memory the one before freed, where arrays of the whole text (4 bytes a char as UTF-32, 8
    per candidate index) are first touched page by page. Alone, on a fresh process (3 each,
    alternated with the whole-text version): multi.txt 36-38 -> 23-25 ms, utf8seq.txt 6.0-6.4 ->
    1.8-1.9, wagahai.txt 5.9-6.2 -> 1.4-1.5, code.txt 2.7-2.9 -> 1.5-1.8. Within Qwen3's cold
    encode of utf8seq.txt (second and third calls of a process, which reuse memory the first one
    freed): 74-77 -> 69-72 ms, 7.4-8.0K -> 2.6-4.1K page faults; wagahai.txt and multi.txt within noise."""
    import numpy as np

    lo0, got_s, got_e = lo[0], [], []
    for a in range(0, len(text), RUN_BLOCK):
        cps = np.frombuffer(text[a:a + RUN_BLOCK].encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        cand = np.flatnonzero(cps >= lo0)
        if not len(cand):
            continue
        c = cps.take(cand)
        inside = bmp.take(np.minimum(c, 0xFFFF)).view(bool)
        astral = np.flatnonzero(c > 0xFFFF)
        if len(astral):
            x = c.take(astral)
            k = np.searchsorted(lo, x, side="right")  # (>= 1: x >= lo[0]; k - 1 is the range at or below x)
            inside[astral] = x <= hi.take(k - 1)
        pos = cand[inside]
        if len(pos):
            brk = np.flatnonzero(pos[1:] != pos[:-1] + 1)  # a run ends where the next char is not next to it
            got_s.append(np.concatenate((pos[:1], pos.take(brk + 1))) + a)
            got_e.append(np.concatenate((pos.take(brk), pos[-1:])) + (a + 1))
    if not got_s:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts, ends = np.concatenate(got_s), np.concatenate(got_e)
    edge = np.flatnonzero(starts[1:] == ends[:-1])  # a run across a block's edge: its two halves joined
    if len(edge):
        starts, ends = np.delete(starts, edge + 1), np.delete(ends, edge)
    return starts, ends


def _ccc_key(item):
    return item[0]


def _recompose(buf, compose):
    """The crate's Recompositions state machine over decomposed (ccc, char, marker).

    Kept step for step (including when a blocked starter flushes the
    buffered marks) because the emitted order decides the alignments.
    """
    out = []
    composee = None        # (char, marker)
    last_ccc = None        # ccc of the last mark buffered after composee
    pending = []           # uncomposed marks after composee
    for c, ch, m in buf:
        if composee is None:
            if c:
                out.append((ch, m))   # leading non-starter: emitted as is
            else:
                composee = (ch, m)
            continue
        if last_ccc is None:
            r = compose(composee[0], ch)
            if r:
                composee = (r, composee[1] + m - 1)
                continue
            if c == 0:
                out.append(composee)
                composee = (ch, m)
                continue
            pending.append((ch, m))
            last_ccc = c
        elif last_ccc >= c:
            if c == 0:     # blocked starter: flush and start over from it
                out.append(composee)
                out.extend(pending)
                pending = []
                composee = (ch, m)
                last_ccc = None
            else:
                pending.append((ch, m))
                last_ccc = c
        else:
            r = compose(composee[0], ch)
            if r:
                composee = (r, composee[1] + m - 1)
                continue
            pending.append((ch, m))
            last_ccc = c
    if composee is not None:
        out.append(composee)
    out.extend(pending)
    return out
