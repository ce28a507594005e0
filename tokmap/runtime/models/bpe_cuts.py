"""Where byte-level BPE never merges across: cuts that split a long piece into independent parts.

Every symbol BPE makes is a merge result whose bytes are the stretch of the piece it covers. So
if no merge result occurs in the piece over a stretch s < j < e reaching across the boundary j,
no symbol ever spans j: no pair across j has a merge (its result would be such a stretch), the
merges on each side never touch the other, and each side ends as BPE of its own bytes (the
order of merges within a side is its own lowest-rank-first order). The ids of the piece are
then those of its parts, joined.

Such a stretch, if it is 3 bytes or longer, holds the window w[j-2:j+1] (when it starts at or
before j-2) or w[j-1:j+2] (when it starts at j-1); a 2-byte one is w[j-1:j+1] itself. So j can
be cut when neither window occurs inside any merge result and the pair is no 2-byte result.
The table holds exactly those facts for the boundaries worth testing: between the last byte of a
multi-byte character (a UTF-8 continuation byte) and the lead byte of the next, where text
without spaces (CJK, every code point in a row) has its only chance of a cut: each key is a
3-byte window, b0 << 16 | b1 << 8 | b2, taken from inside a merge result where it spans such a
continuation -> lead step, or 1 << 24 | b0 << 8 | b1 for a 2-byte merge result of that shape.
Llama 3 has ~7,000 keys; 10^6 random CJK ideographs cut at 98% of their boundaries, and every
code point in a row (utf8seq.txt) at 98%.

A window that reaches past the piece into its neighbour only makes a cut less likely: the test
stays on the safe side.

A window stands for every merge result holding it, so a boundary between two ideographs is left
whole when any token spans such a pair of bytes. The chars' own histories are finer (standalone):
what a char's edges can ever be while it merges alone (its edge bytes, what its first merge made,
its token) decides whether any merge can join it to its neighbour. Random ideographs under o200k:
the windows leave 16K parts of two or more chars; the histories cut all but 4 of them.
"""

from __future__ import annotations

import numpy as np

from ... import mtok
from ...errors import FormatError

TWO = 1 << 24  # the flag of a 2-byte result's key
UNKNOWN = -2  # a char's history not known (merged by the batch, not in closed form): no cut beside it


def window_keys(tb: np.ndarray, off: np.ndarray, result_ids: np.ndarray) -> np.ndarray:
    """The table (sorted distinct uint32 keys) from the merge results' bytes (tb: every token's
    bytes back to back, off: the n + 1 offsets; the exporter stores what this returns)."""
    res = np.unique(np.asarray(result_ids, dtype=np.int64))
    off = np.asarray(off, dtype=np.int64)
    lens = off[res + 1] - off[res]
    first = np.cumsum(lens) - lens
    b = np.asarray(tb, dtype=np.int64)[np.repeat(off[res] - first, lens) + np.arange(int(lens.sum()))]
    tok = np.repeat(np.arange(len(res)), lens)
    cont = (b & 0xC0) == 0x80
    lead = b >= 0xC0
    x, y, z = b[:-2], b[1:-1], b[2:]
    inside = tok[:-2] == tok[2:]
    three = (x << 16 | y << 8 | z)[inside & ((cont[:-2] & lead[1:-1]) | (cont[1:-1] & lead[2:]))]
    two_at = first[lens == 2]
    two = TWO | (b[two_at] << 8) | b[two_at + 1]
    two = two[cont[two_at] & lead[two_at + 1]]
    keys = np.sort(np.concatenate((three, two)))
    return keys[np.concatenate(([True], keys[1:] != keys[:-1]))].astype(np.uint32) if len(keys) else \
        keys.astype(np.uint32)


class CutTable:
    """The table as bitmaps. A tested boundary j has a continuation byte before it and a lead byte
    at it, so its two windows have fixed shapes: (cont, lead, any) for w[j-1:j+2] and (any, cont,
    lead) for w[j-2:j+1]. Each shape has 2^20 possible windows, a 128 KiB bitmap: a 2^24-bit map
    of every window (2 MiB) cost its fresh pages on each load (~1-3 ms) and cache misses on each
    test. Keys of neither shape can never be asked for. 2^16 flags hold the pairs."""

    def __init__(self, keys: np.ndarray):
        keys = keys.astype(np.int64)
        three = keys[keys < TWO]
        x, y, z = three >> 16, (three >> 8) & 0xFF, three & 0xFF
        after = ((x & 0xC0) == 0x80) & (y >= 0xC0)  # w[j-1:j+2]
        before = ((y & 0xC0) == 0x80) & (z >= 0xC0)  # w[j-2:j+1]
        self.after = _bitmap(_after_index(x[after], y[after], z[after]))
        self.before = _bitmap(_before_index(x[before], y[before], z[before]))
        self.pairs = np.zeros(1 << 16, dtype=bool)
        self.pairs[keys[keys >= TWO] & 0xFFFF] = True

    @staticmethod
    def _has(bitmap: np.ndarray, w: np.ndarray) -> np.ndarray:
        return ((bitmap[w >> 3] >> (w & 7).astype(np.uint8)) & 1).astype(bool)

    def cuts(self, raw: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, int]:
        """(ascending byte offsets j in raw, pieces back to back starting at `starts`, where a
        piece may be cut; how many boundaries were tested): a continuation byte before, a lead
        byte at j, not a piece's start, and neither window nor the pair a merge result holds."""
        j = np.flatnonzero((raw[1:] >= 0xC0) & ((raw[:-1] & 0xC0) == 0x80)) + 1
        if not len(j):
            return j, 0
        first = np.zeros(len(raw) + 1, dtype=bool)
        first[starts] = True
        j = j[~first[j]]
        # (j - 2 wraps to the buffer's end and j + 1 clips to it: a byte from outside the piece
        # in a window only makes a cut less likely)
        prev2 = raw.take(j - 2, mode="wrap").astype(np.int32)
        prev = raw[j - 1].astype(np.int32)
        here = raw[j].astype(np.int32)
        nxt = raw.take(j + 1, mode="clip").astype(np.int32)
        ok = ~self.pairs[(prev << 8) | here]
        ok &= ~self._has(self.before, _before_index(prev2, prev, here))
        ok &= ~self._has(self.after, _after_index(prev, here, nxt))
        return j[ok], len(j)


def _after_index(cont, lead, b):
    """Bit of the window (cont, lead, any byte) in CutTable.after."""
    return ((cont & 0x3F) << 14) | ((lead & 0x3F) << 8) | b


def _before_index(b, cont, lead):
    """Bit of the window (any byte, cont, lead) in CutTable.before."""
    return (b << 12) | ((cont & 0x3F) << 6) | (lead & 0x3F)


def _bitmap(bits: np.ndarray) -> np.ndarray:
    """2^20 bits (LSB first in each byte) with these set."""
    out = np.zeros(1 << 17, dtype=np.uint8)
    np.bitwise_or.at(out, bits >> 3, (1 << (bits & 7)).astype(np.uint8))
    return out


def load_table(f) -> CutTable:
    """The file's cut_windows section as a CutTable. A window missing from it would cut where a
    merge crosses (a wrong id, not a slow one), so the section's checksum is checked first, and
    keys out of order or range are refused."""
    sid = mtok.SECTION_CUT_WINDOWS
    f.verify_section(sid)
    keys = np.frombuffer(f.view(sid, mtok.U32), dtype="<u4")
    if len(keys) and (int(keys[-1]) > (TWO | 0xFFFF) or not (keys[1:] > keys[:-1]).all()):
        raise FormatError(f.path, "inconsistent file: entries out of range or not ascending",
                          section=mtok.section_name(sid), offset=f.sections[sid][1])
    return CutTable(keys)


class CharIds:
    """What BPE makes of each char alone (1-4 ids: at most one per byte), for the chars met so
    far: the parts of a cut piece are most often one char (~96% of 10^6 random ideographs), and
    text repeats its chars, so each distinct char is merged once per tokenizer. Also each char's
    history as it merges alone (left, right: BatchMerger.merge_chars with history), which
    standalone tests."""

    def __init__(self):
        # row + 1 in ids / counts by code point; 0: not met yet. Only up to the largest char met,
        # plus a last entry that stays 0 (clipped gathers land there): all of Unicode at int32,
        # 4.4 MB, was 0.1-1.1 ms of zeroing on each tokenizer's first cut call (a heap block, not
        # fresh pages), where random ideographs need 160 KB.
        self.row = np.zeros(1, dtype=np.int32)
        self.ids = np.zeros((0, 4), dtype=np.uint32)  # (ids are below 2^32: META checks vocab_size)
        self.counts = np.zeros(0, dtype=np.int64)
        self.left = np.zeros((0, 3), dtype=np.int64)
        self.right = np.zeros((0, 3), dtype=np.int64)

    def rows(self, cps: np.ndarray) -> np.ndarray:
        """Each char's row, -1 where it was not met yet."""
        got = np.take(self.row, cps, mode="clip")
        got -= 1
        return got.astype(np.int64)

    def add(self, cps: np.ndarray, flat: np.ndarray, counts: np.ndarray, left=None, right=None) -> None:
        """Remember distinct new chars cps, whose ids are flat (back to back, counts each), and
        their histories (left, right; None: UNKNOWN)."""
        n = len(cps)
        if left is None:
            left = right = np.full((n, 3), UNKNOWN, dtype=np.int64)
        self.left = np.concatenate((self.left, left))
        self.right = np.concatenate((self.right, right))
        block = np.zeros((n, 4), dtype=np.uint32)
        first = np.cumsum(counts) - counts
        at = np.repeat(np.arange(n), counts)
        block[at, np.arange(len(flat)) - first[at]] = flat
        base = len(self.counts)
        self.ids = np.concatenate((self.ids, block))
        self.counts = np.concatenate((self.counts, counts))
        top = int(cps.max()) + 2 if n else 0  # (the entry past the largest stays 0)
        if top > len(self.row):
            grown = np.zeros(top, dtype=np.int32)
            grown[:len(self.row)] = self.row
            self.row = grown
        self.row[cps] = np.arange(base + 1, base + n + 1, dtype=np.int32)


def learn_chars(model, raw: np.ndarray, cps: np.ndarray, pos: np.ndarray, width: np.ndarray,
                history: bool = False) -> bool:
    """Put the chars cps (code points, int64; each at byte pos of raw, width bytes long) that
    model._chars has not met into it, each distinct one merged once; with history, with their
    histories, and the histories of chars of up to 3 bytes met without one added (merged again).
    False when a byte has no token (the caller's scalar path knows what to do with it). (The
    histories cost: cl100k over 10^5 random ideographs, 0.7 of a 20 ms call for its 18K chars
    of one-char parts, which are never tested.)"""
    chars = model._chars
    rows = chars.rows(cps)
    new_at = np.flatnonzero(rows < 0)
    if len(new_at):
        new, at = _distinct(cps, new_at)
        got = model._merge_chars(raw, pos[at], width[at], history=history)
        if got is None:
            return False
        chars.add(new, *got)
    if history and len(rows) > len(new_at):
        redo = np.flatnonzero((rows >= 0) & (width <= 3))
        redo = redo[chars.left[rows[redo], 0] == UNKNOWN]
        if len(redo):
            old, at = _distinct(cps, redo)
            got = model._merge_chars(raw, pos[at], width[at], history=True)
            if got is None:
                return False
            at = chars.rows(old)
            chars.left[at], chars.right[at] = got[2], got[3]
    return True


def _distinct(cps: np.ndarray, where: np.ndarray):
    """(the distinct code points among cps[where], ascending; an index in cps of each)."""
    cp = cps[where]
    top = int(cp.max()) + 1  # (tables up to the largest char met, not all of Unicode)
    seen = np.zeros(top, dtype=bool)
    seen[cp] = True
    distinct = np.flatnonzero(seen)
    first = np.empty(top, dtype=np.int64)  # (read only where written)
    first[cp[::-1]] = where[::-1]  # (any occurrence will do: each is that char's bytes)
    return distinct, first[distinct]


def standalone(model, raw: np.ndarray, cps_all: np.ndarray, starts: np.ndarray, c0: np.ndarray, c1: np.ndarray):
    """(ok, pos, n) for parts of several chars that the windows could not cut (part k: chars
    c0[k] to c1[k] - 1 of cps_all, from byte starts[k] of raw): ok[k] when no merge can cross an
    inner boundary of part k by its chars' own histories; pos: each char's byte offset (all
    parts' chars in order; model._chars has met every one of them after this); n: each part's
    chars. None when a byte has no token.

    The part's own ends are cuts. While no merge has crossed one of its inner boundaries, every
    char in it merges as it would alone, so the symbols meeting at a boundary are then the last
    symbol char a ever is alone (CharIds.right) and the first symbol char b ever is (left). When
    no such pair is a merge at any inner boundary, no first crossing merge can happen: the part's
    ids are its chars' own, one after another. (A window of bytes stands for every symbol holding
    it, so the table cannot tell the symbols apart; the chars' histories can.)"""
    from .textparts import ranges

    n = (c1 - c0).astype(np.int64)  # chars in each part
    idx = ranges(c0, n)
    cps = cps_all[idx].astype(np.int64)
    width = 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)
    first_char = np.cumsum(n) - n
    at = np.cumsum(width) - width  # each char's byte offset from the first part's first char ...
    pos = at + np.repeat(starts - at[first_char], n)  # ... and from the text's start
    if not learn_chars(model, raw, cps, pos, width, history=True):
        return None
    chars = model._chars
    row = chars.rows(cps)
    inner = np.ones(len(idx), dtype=bool)
    inner[first_char + n - 1] = False  # (a part's last char: no boundary after it in the part)
    b = np.flatnonzero(inner)
    right = chars.right[row[b]]
    left = chars.left[row[b + 1]]
    batch = model._batch
    bad = (right[:, 0] == UNKNOWN) | (left[:, 0] == UNKNOWN)
    pr = np.repeat(right, 3, axis=1)  # every (last symbol, first symbol) pair: 9 a boundary
    pl = np.tile(left, (1, 3))
    q = np.flatnonzero(((pr >= 0) & (pl >= 0) & ~bad[:, None]).ravel())
    if len(q):
        hit = batch.codes(pr.ravel()[q], pl.ravel()[q], screen=len(q) >= 4096) < batch.nopair
        bad[q[hit] // 9] = True
    part = np.repeat(np.arange(len(starts)), n - 1)  # each boundary's part
    ok = np.ones(len(starts), dtype=bool)
    ok[part[bad]] = False
    return ok, pos, n
