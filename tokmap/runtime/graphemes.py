"""Extended grapheme clusters (UAX #29) as HF tokenizers' Precompiled normalizer sees them.

tokenizers segments with unicode-segmentation 1.13.2, whose tables are Unicode 17.0.0; the exporter
embeds them (tools/gen_graphemes.py -> exporter/data/grapheme17.txt) as a u32 blob of runs
`(first_code_point << 8) | value`, value = category | 16 * InCB_Extend | 32 * InCB_Linker, with the
category numbering of that file. Only files whose normalizer needs clusters carry the table.
"""

from __future__ import annotations

from bisect import bisect_right

CR, CONTROL, EXTEND, EXT_PICT, INCB_CONSONANT, L, LF, LV, LVT, PREPEND, RI, SPACING, T, V, ZWJ = range(1, 16)
_INCB_EXTEND, _INCB_LINKER = 16, 32


class Graphemes:
    def __init__(self, runs):
        self.runs = runs  # memoryview of u32, sorted
        self.cache: dict[str, int] = {}

    def value(self, c: str) -> int:
        v = self.cache.get(c)
        if v is None:
            runs = self.runs
            k = bisect_right(runs, (ord(c) << 8) | 0xFF) - 1
            v = runs[k] & 0xFF if k >= 0 else 0
            self.cache[c] = v
        return v

    def values(self, cps):
        """value() of each code point of cps (a numpy int64 array), by one search of the runs."""
        import numpy as np

        runs = np.frombuffer(self.runs, dtype="<u4")
        k = np.searchsorted(runs, (cps << 8) | 0xFF, side="right") - 1
        return np.where(k >= 0, runs[np.maximum(k, 0)] & 0xFF, 0).astype(np.int64)

    def clusters(self, text: str) -> list[str]:
        """Split text into extended grapheme clusters (the crate's `graphemes(true)`)."""
        n = len(text)
        if n == 0:
            return []
        value = self.value
        out = []
        start = 0
        pv = value(text[0])
        pc = pv & 15
        # Running state for the rules that look back further than one char.
        conj_cons = pc == INCB_CONSONANT  # GB9c: a consonant, then only InCB Extend/Linker since
        conj_link = False  # ... and at least one linker among them
        ep_ext = pc == EXT_PICT  # GB11: ExtPict Extend* ends here
        ep_zwj = False  # GB11: ExtPict Extend* ZWJ ends here
        ri_run = 1 if pc == RI else 0
        for i in range(1, n):
            v = value(text[i])
            c = v & 15
            if pc == CR and c == LF:
                brk = False
            elif pc in (CONTROL, CR, LF) or c in (CONTROL, CR, LF):
                brk = True
            elif pc == L and c in (L, V, LV, LVT):
                brk = False
            elif pc in (LV, V) and c in (V, T):
                brk = False
            elif pc in (LVT, T) and c == T:
                brk = False
            elif c in (EXTEND, ZWJ) or c == SPACING or pc == PREPEND:
                brk = False
            elif c == INCB_CONSONANT:
                brk = not (conj_cons and conj_link)
            elif pc == ZWJ and c == EXT_PICT:
                brk = not ep_zwj
            elif pc == RI and c == RI:
                brk = ri_run % 2 == 0
            else:
                brk = True
            if brk:
                out.append(text[start:i])
                start = i
            # Update the look-back state with char i.
            if c == INCB_CONSONANT:
                conj_cons, conj_link = True, False
            elif v & _INCB_LINKER:
                conj_link = conj_link or conj_cons
            elif not v & _INCB_EXTEND:
                conj_cons = conj_link = False
            if c == EXT_PICT:
                ep_ext, ep_zwj = True, False
            elif c == EXTEND:
                ep_zwj = False
            elif c == ZWJ:
                ep_zwj, ep_ext = ep_ext, False
            else:
                ep_ext = ep_zwj = False
            ri_run = ri_run + 1 if c == RI else 0
            pv, pc = v, c
        out.append(text[start:])
        return out
