"""Which multi-byte characters byte-level BPE always turns into their own token first ("atomic").

The runtime's batch merge (runtime/models/bpe_batch.py) spends most of its rounds on CJK and other
multi-byte text building each character's token out of its 2-4 bytes, one rank per round. For the
characters listed here it starts from the character's token instead; this module proves, per
character and per kind of neighbour, that sequential BPE reaches the same ids.

The argument. Let c be a multi-byte character whose bytes, merged alone, end as one token T, and
let p_0..p_(K-1) be the ranks merged in that solo run, from the state s_k (whose leftmost symbol is
x_k and rightmost z_k) to the next; R = max p_k. In a word, c's bytes sit between neighbours; a
merge "crosses" c's left edge when its right operand is c's current leftmost symbol and its left
operand a symbol ending just before c (whose last byte is then the last byte of the previous
character: ASCII, or a UTF-8 continuation byte), and likewise on the right (the right operand then
starts with the next character's first byte: ASCII, or a lead byte). Suppose, for the kinds of
neighbour at hand:
  (1) every merge crossing c's edges from state s_k ranks above p_k, and
  (2) every merge with T as an operand, on those edges, ranks above R.
Then, in the sequential run over the whole word (lowest rank first; equal ranks only ever share
their result, so a crossing merge never ties with one inside c):
  * c's internal merges happen exactly as in its solo run: while c is unfinished, its pending
    internal pair has rank p_k, below every crossing pair (1), so nothing crosses c's edges and
    the pairs inside c are ordered among themselves as when c is alone;
  * the rest of the word sees the same merges in the same order whether c starts as bytes or as T:
    every merge fired elsewhere while c is unfinished ranks at most some p_k <= R, and by (2) a pair
    with T ranks above R, so starting from T cannot pre-empt any of them; once c is finished both
    runs are in the same state.
So replacing c's bytes by T before merging changes no id. Replacing several characters follows by
applying this to one at a time: the conditions quantify over every possible neighbour symbol, so
they hold whatever the neighbours have become. A character at a word's edge has no neighbour on
that side, hence nothing to cross there.

The table is computed from the stored (pruned) merges, which are the ones the runtime uses.
Each entry is `code_point << 40 | flags << 32 | id`, ascending, where flags say for which neighbours
the proof holds: bit 0 an ASCII character on the left, bit 1 a multi-byte one on the left, bit 2
ASCII on the right, bit 3 multi-byte on the right. Characters for which it holds for no mix of
neighbours are left out.
"""

from __future__ import annotations

import numpy as np

INF = 1 << 62
LEFT_ASCII, LEFT_MB, RIGHT_ASCII, RIGHT_MB = 1, 2, 4, 8


def _edge_minima(keys: dict[int, tuple[int, int]], token_bytes: list[bytes], n: int):
    """Per token: the lowest rank of a merge taking it as the right operand after a symbol ending
    in an ASCII byte / a continuation byte, and as the left operand before a symbol starting with
    an ASCII byte / a lead byte."""
    k = np.fromiter(keys.keys(), dtype=np.uint64, count=len(keys))
    rank = np.fromiter((v[0] for v in keys.values()), dtype=np.int64, count=len(keys))
    left = (k >> np.uint64(32)).astype(np.int64)
    right = (k & np.uint64(0xFFFFFFFF)).astype(np.int64)
    first = np.array([t[0] if t else 0 for t in token_bytes[:n]], dtype=np.int64)
    last = np.array([t[-1] if t else 0 for t in token_bytes[:n]], dtype=np.int64)
    out = {}
    for name, operand, other, byte, lo, hi in (
            ("right_after_ascii", right, left, last, 0x00, 0x80),
            ("right_after_mb", right, left, last, 0x80, 0xC0),
            ("left_before_ascii", left, right, first, 0x00, 0x80),
            ("left_before_mb", left, right, first, 0xC0, 0x100)):
        b = byte[other]
        sel = (b >= lo) & (b < hi)
        m = np.full(n, INF, dtype=np.int64)
        np.minimum.at(m, operand[sel], rank[sel])
        out[name] = m
    return out


def _solo_states(data: bytes, byte_ids: list[int], keys: dict[int, tuple[int, int]]):
    """The solo run of data's bytes: [(leftmost, rightmost, rank merged next)] per state, and the
    final symbols."""
    syms = [byte_ids[b] for b in data]
    states = []
    while len(syms) > 1:
        best = None
        for j in range(len(syms) - 1):
            hit = keys.get((syms[j] << 32) | syms[j + 1])
            if hit is not None and (best is None or hit[0] < best[0]):
                best = (hit[0], j, hit[1])
        if best is None:
            break
        r, j, res = best
        states.append((syms[0], syms[-1], r))
        syms[j:j + 2] = [res]
    return states, syms


def atomic_char_table(keys: dict[int, tuple[int, int]], token_bytes: list[bytes], regular,
                      byte_ids: list[int]) -> bytes:
    """The atomic_chars section (little-endian u64, ascending) for a byte-level BPE vocabulary."""
    n = len(token_bytes)
    edge = None
    entries = []
    for i in regular:
        data = token_bytes[i]
        if len(data) < 2 or len(data) > 4:
            continue
        try:
            ch = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(ch) != 1:
            continue
        if edge is None:
            edge = _edge_minima(keys, token_bytes, n)
        states, final = _solo_states(data, byte_ids, keys)
        if final != [i] or not states:
            continue
        top = max(r for _x, _z, r in states)
        flags = 0
        for bit, name, side in ((LEFT_ASCII, "right_after_ascii", 0), (LEFT_MB, "right_after_mb", 0),
                                (RIGHT_ASCII, "left_before_ascii", 1), (RIGHT_MB, "left_before_mb", 1)):
            m = edge[name]  # side 0: the leftmost symbol of each state, 1: the rightmost
            if m[i] > top and all(m[st[side]] > st[2] for st in states):
                flags |= bit
        if flags:
            entries.append((ord(ch) << 40) | (flags << 32) | i)
    return np.array(sorted(entries), dtype="<u8").tobytes()
