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

from .. import mtok
from ..errors import FormatError


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


class Precompiled:
    def __init__(self, f, step):
        from .graphemes import Graphemes

        sid = mtok.BLOB_BASE + step["charsmap"]
        self.map = CharsMap(f.view(sid, mtok.U8), f.path, mtok.section_name(sid))
        self.graphemes = Graphemes(f.view(mtok.BLOB_BASE + step["graphemes"], mtok.U32))
        self._busy = None

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

    def normalize(self, text: str, want_align: bool):
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
