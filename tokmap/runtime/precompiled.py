"""SentencePiece's precompiled charsmap normalizer and the Nmt normalizer, as HF tokenizers runs them.

The charsmap is embedded unchanged as a blob: a u32 little-endian trie size, a Darts double-array
trie over UTF-8 keys (u32 units), then the NUL-terminated replacement strings the trie's values
point into. tokenizers does not use SentencePiece's longest match: it walks extended grapheme
clusters, and a cluster under 6 bytes with any key as a prefix is replaced whole by the shortest
matching key's value; otherwise each code point is looked up alone (see CONFORMANCE §3).

Alignments follow tokenizers' NormalizedString::transform: each replacement char carries a change
(0 replace, 1 inserted, -k also removes k following chars), and a removal is charged to the last
emitted char, even one from an earlier cluster, so the offsets reproduce its quirks exactly.
"""

from __future__ import annotations

import struct
import sys
from threading import get_ident

from .. import mtok
from ..errors import FormatError


LEARN_TEXT = 256  # chars of a text from which its new chars are classified together (Precompiled._learn) ...
LEARN_IMPORT = 1 << 16  # ... once numpy is imported, or this many (a first short encode never imports it)


def _push_replacement(changes: list, old: str, new: str) -> None:
    changes.extend((c, 0) for c in new)
    diff = len(new) - len(old)
    if diff > 0:
        for j in range(len(changes) - diff, len(changes)):
            changes[j] = (changes[j][0], 1)
    elif diff < 0 and changes:
        c, k = changes[-1]
        changes[-1] = (c, k + diff)


class CharsMap:
    """Darts double-array common-prefix search over the embedded charsmap."""

    def __init__(self, blob: memoryview, path: str, section: str):
        def bad(msg):
            return FormatError(path, f"precompiled charsmap: {msg}", section=section)

        if len(blob) < 4:
            raise bad("shorter than its 4-byte header")
        (size,) = struct.unpack_from("<I", blob, 0)
        if size % 4 or 4 + size > len(blob) or size == 0:
            raise bad(f"trie size {size} does not fit the {len(blob)}-byte blob")
        self.units = blob[4:4 + size].cast("I")
        self.strings = bytes(blob[4 + size:])
        self.memo: dict[str, str | None] = {}

    def transform(self, s: str):
        """The replacement for the shortest key that is a prefix of s, or None."""
        hit = self.memo.get(s, 0)
        if hit != 0:
            return hit
        units = self.units
        nu = len(units)
        unit = units[0]
        pos = (unit >> 10) << ((unit & (1 << 9)) >> 6)
        res = None
        for b in s.encode("utf-8", "surrogatepass"):
            pos ^= b
            if pos >= nu:
                break
            unit = units[pos]
            if (unit & ((1 << 31) | 0xFF)) != b:
                break
            pos ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
            if (unit >> 8) & 1:
                if pos >= nu:
                    break
                off = units[pos] & 0x7FFFFFFF
                end = self.strings.find(b"\0", off)
                res = self.strings[off: end if end >= 0 else len(self.strings)].decode("utf-8", "replace")
                break
        if len(self.memo) < 1 << 16:
            self.memo[s] = res
        return res


    def transform_chars(self, cps) -> list:
        """transform(chr(cp)) for each code point of cps (a numpy int64 array), the trie walked
        for all of them at once in numpy: a first text of many new chars (every code point once,
        utf8seq.txt: 235K) pays ~1.5 us a char for the walk in Python."""
        import numpy as np

        units = np.frombuffer(self.units, dtype="<u4").astype(np.int64)
        nb = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)  # (surrogates: 3 bytes, as surrogatepass)
        lead = np.select([nb == 1, nb == 2, nb == 3], [cps, 0xC0 | cps >> 6, 0xE0 | cps >> 12], 0xF0 | cps >> 18)
        by = [lead] + [0x80 | (cps >> (6 * (nb - 1 - d))) & 0x3F for d in range(1, 4)]  # the UTF-8 bytes
        root = int(units[0])
        pos = np.full(len(cps), (root >> 10) << ((root & (1 << 9)) >> 6), dtype=np.int64)
        res = np.full(len(cps), -1, dtype=np.int64)
        live = np.arange(len(cps))
        for d in range(4):
            live = live[nb[live] > d]
            b = by[d][live]
            p = pos[live] ^ b
            ok = p < len(units)
            live, p, b = live[ok], p[ok], b[ok]
            unit = units[p]
            ok = (unit & ((1 << 31) | 0xFF)) == b
            live, p, unit = live[ok], p[ok], unit[ok]
            p ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
            leaf = ((unit >> 8) & 1).astype(bool)
            at, lp = live[leaf], p[leaf]
            inside = lp < len(units)
            res[at[inside]] = units[lp[inside]] & 0x7FFFFFFF  # (the first key that ends: the walk stops)
            live = live[~leaf]
            pos[live] = p[~leaf]
        out: list = [None] * len(cps)
        strings = self.strings
        for k in np.flatnonzero(res >= 0).tolist():
            off = int(res[k])
            end = strings.find(b"\0", off)
            out[k] = strings[off: end if end >= 0 else len(strings)].decode("utf-8", "replace")
        return out


class _Joining(Exception):
    """_Singles met a char that may share a cluster with its neighbours."""


class _Unmet(Exception):
    """_Singles, probing (Precompiled._unaligned), met a char it has not classified yet."""


class _Singles(dict):
    """cp -> what the charsmap makes of that char alone (str, or cp itself when nothing), for the
    chars that are always a cluster of their own next to one another: no rule of UAX #29 joins
    two of them (category Other, Control, LF, Extended_Pictographic, InCB Consonant, with no InCB
    flag: GB9-GB9c and GB11 each need an Extend, ZWJ, SpacingMark, Prepend or linker char, which
    are not among them, and CR is left out for GB3). A text of only such chars normalizes as one
    str.translate through this table. Any other char raises _Joining (it is not remembered)."""

    def __init__(self, pre: "Precompiled"):
        super().__init__()
        self.pre = pre

    def __missing__(self, cp):
        from .graphemes import CONTROL, EXT_PICT, INCB_CONSONANT, LF

        if self.pre._probe is not None and self.pre._probe == get_ident():
            raise _Unmet
        c = chr(cp)
        v = self.pre.graphemes.value(c)
        if v not in (0, CONTROL, EXT_PICT, INCB_CONSONANT, LF):
            raise _Joining
        r = self.pre.map.transform(c)
        self[cp] = out = cp if r is None else r
        return out


class Precompiled:
    def __init__(self, f, step):
        from .graphemes import Graphemes

        sid = mtok.BLOB_BASE + step["charsmap"]
        self.map = CharsMap(f.view(sid, mtok.U8), f.path, mtok.section_name(sid))
        self.graphemes = Graphemes(f.view(mtok.BLOB_BASE + step["graphemes"], mtok.U32))
        self._busy = None
        self._singles = _Singles(self)
        self._kinds = _Kinds(self._singles)  # cp -> "s" (a _Singles char) or "j" (another)
        self._probe = None  # the thread whose _Singles lookups raise _Unmet at a char not met
        self._ascii = None  # _ascii_plan(), on the first ASCII text (False: none)

    def _changes(self, text: str, changes: list) -> bool:
        """Append the (char, change) pairs of text's clusters to changes; True if any was mapped."""
        transform = self.map.transform
        modified = False
        for g in self.graphemes.clusters(text):
            if len(g) == 1 or len(g.encode("utf-8", "surrogatepass")) < 6:
                r = transform(g)
                if r is not None:
                    modified = True
                    _push_replacement(changes, g, r)
                    continue
                if len(g) == 1:
                    changes.append((g, 0))
                    continue
            for c in g:
                r = transform(c)
                if r is not None:
                    modified = True
                    _push_replacement(changes, c, r)
                else:
                    changes.append((c, 0))
        return modified

    def _busy_regex(self):
        """Runs of chars other than the "plain" ASCII ones: those of category Any that the charsmap
        leaves alone. Two adjacent plain chars always have a cluster boundary between them and no
        rule looks back across one, so only the text around other chars needs the cluster walk."""
        import re

        plain = [chr(c) for c in range(0x80) if self.graphemes.value(chr(c)) == 0 and self.map.transform(chr(c)) is None]
        self._busy = re.compile("[^" + "".join(re.escape(c) for c in plain) + "]+") if plain else re.compile(".+", re.S)
        return self._busy

    def _ascii_plan(self):
        """(regex finding the ASCII chars the plan cannot take, or None; bytes.translate table, None
        when it changes nothing; deleted bytes) when some ASCII chars are clusters of their own
        (_Singles) that the charsmap keeps, deletes or maps to one ASCII char: an ASCII text of
        only those normalizes in one bytes.translate, where str.translate through _Singles costs
        ~50 ns a char (a short sentence's 2 us under botchan-unigram); False when none are."""
        import re

        table, deleted, other = bytearray(range(256)), bytearray(), []
        for cp in range(128):
            try:
                v = self._singles[cp]
            except _Joining:  # (CR: it joins an LF after it)
                other.append(cp)
                continue
            if type(v) is int:
                continue  # (cp itself: unchanged)
            if v == "":
                deleted.append(cp)
            elif len(v) == 1 and ord(v) < 128:
                table[cp] = ord(v)
            else:
                other.append(cp)
        if len(other) == 128:
            return False
        find = re.compile("[" + "".join(re.escape(chr(c)) for c in other) + "]") if other else None
        same = table == bytearray(range(256)) and not deleted  # (botchan-unigram's: ASCII stays)
        return find, None if same else bytes(table), bytes(deleted)

    def _unaligned(self, text: str) -> str:
        """normalize(text, False)'s text: one str.translate when every char is a cluster of its
        own (_Singles: ~30 ns a char, where the cluster walk costs ~1 us; Japanese, English with
        newlines); else the walk over the regions around the other chars (a run of them widened
        by two chars on the left and one on the right, as in normalize), the translate between.
        An ASCII text the ASCII plan takes: one bytes.translate (_ascii_plan)."""
        if text.isascii():
            plan = self._ascii if self._ascii is not None else self._set_ascii()
            if plan and (plan[0] is None or plan[0].search(text) is None):
                return text if plan[1] is None else text.encode("ascii").translate(plan[1], plan[2]).decode("ascii")
        joining = False
        if len(text) >= (LEARN_TEXT if "numpy" in sys.modules else LEARN_IMPORT):
            self._probe = get_ident()
            try:
                return text.translate(self._singles)
            except _Joining:
                joining = True  # (no second translate to find that out again)
            except _Unmet:
                self._learn(text)
            finally:
                self._probe = None
        if not joining:
            try:
                return text.translate(self._singles)
            except _Joining:
                pass
        import re

        kinds = text.translate(self._kinds)
        n = len(text)
        regions: list[list[int]] = []
        for m in re.finditer("j+", kinds):
            rs, re_ = max(0, m.start() - 2), min(n, m.end() + 1)
            if regions and rs <= regions[-1][1]:  # (overlapping or touching: one region)
                regions[-1][1] = re_
            else:
                regions.append([rs, re_])
        out, pos = [], 0
        for rs, re_ in regions:
            if rs > pos:
                out.append(text[pos:rs].translate(self._singles))
            changes: list = []
            self._changes(text[rs:re_], changes)
            out.extend(ch for ch, _k in changes)
            pos = re_
        out.append(text[pos:].translate(self._singles))
        return "".join(out)

    def _set_ascii(self):
        self._ascii = self._ascii_plan()
        return self._ascii

    def _learn(self, text: str) -> None:
        """Classify all of text's chars not met yet at once (numpy: their grapheme values and the
        trie walk), where each alone costs _Singles ~2-3 us (wagahai.txt's 3.1K distinct chars:
        ~8 ms; utf8seq.txt's 235K: ~0.6 s)."""
        import numpy as np

        from .bert import distinct_code_points
        from .graphemes import CONTROL, EXT_PICT, INCB_CONSONANT, LF

        kinds = self._kinds
        new = np.array([c for c in distinct_code_points(text, 1 << 21) if c not in kinds], dtype=np.int64)
        if not len(new):
            return
        v = self.graphemes.values(new)
        single = (v == 0) | (v == CONTROL) | (v == EXT_PICT) | (v == INCB_CONSONANT) | (v == LF)
        one = new[single].tolist()
        self._singles.update(zip(one, [c if r is None else r for c, r in zip(one, self.map.transform_chars(new[single]))]))
        kinds.update(zip(new.tolist(), np.where(single, "s", "j").tolist()))

    def normalize(self, text: str, want_align: bool):
        if not want_align:
            return self._unaligned(text), None
        busy = self._busy if self._busy is not None else self._busy_regex()
        n = len(text)
        # Regions to walk: each busy run widened by two chars on the left (so a removal is charged
        # to a char of the region, as tokenizers charges it to the previous char) and one on the
        # right (a Prepend absorbs the next char); plain text between regions passes unchanged.
        regions = []
        for m in busy.finditer(text):
            rs, re_ = max(0, m.start() - 2), min(n, m.end() + 1)
            if regions and rs <= regions[-1][1]:
                regions[-1][1] = max(regions[-1][1], re_)
            else:
                regions.append([rs, re_])
        if not regions:
            return text, None
        pieces, align = [], []
        modified = False
        pos = 0  # next char of text not yet emitted
        p = 0  # tokenizers' consumption pointer into the original (shifts after a leading removal)
        for rs, re_ in regions:
            if rs > pos:
                pieces.append(text[pos:rs])
                if want_align:
                    align.extend((q, q + 1) for q in range(p, p + rs - pos))
                p += rs - pos
            changes: list[tuple[str, int]] = []
            modified |= self._changes(text[rs:re_], changes)
            for ch, k in changes:
                pieces.append(ch)
                if k > 0:
                    a = (p - 1, p) if p >= 1 else (0, 0)
                else:
                    a = (p, p + 1) if p < n else (n, n)
                    p += 1 - k
                if want_align:
                    align.append(a)
            pos = re_
        if not modified:
            return text, None
        if pos < n:
            pieces.append(text[pos:])
            if want_align:
                align.extend((q, q + 1) if q < n else (n, n) for q in range(p, p + n - pos))
        return "".join(pieces), (align if want_align else None)


class _Kinds(dict):
    """cp -> "s" for a char of _Singles, "j" for any other (a translate that finds the others)."""

    def __init__(self, singles: _Singles):
        super().__init__()
        self.singles = singles

    def __missing__(self, cp):
        try:
            self.singles[cp]
            v = "s"
        except _Joining:
            v = "j"
        self[cp] = v
        return v


# Nmt: control chars dropped, some spaces and invisible chars mapped to ' ' (tokenizers' nmt()).
_NMT_DROP = frozenset(chr(c) for c in [*range(0x1, 0x9), 0xB, *range(0xE, 0x20), 0x7F, 0x8F, 0x9F])
_NMT_SPACE = frozenset(chr(c) for c in [0x9, 0xA, 0xC, 0xD, 0x1680, *range(0x200B, 0x2010), 0x2028, 0x2029,
                                        0x2581, 0xFEFF, 0xFFFD])


class Nmt:
    def __init__(self, f, step):
        pass

    def normalize(self, text: str, want_align: bool):
        if not any(c in _NMT_DROP or c in _NMT_SPACE for c in text):
            return text, None
        out, align = [], []
        for i, c in enumerate(text):
            if c in _NMT_DROP:
                continue
            out.append(" " if c in _NMT_SPACE else c)
            align.append((i, i + 1))
        return "".join(out), (align if want_align else None)
