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


def _merge_columns(keys: dict[int, tuple[int, int]], token_bytes: list[bytes], n: int):
    """(rank, left operand, right operand) of every merge, and each token's first and last byte
    (int64 arrays)."""
    k = np.fromiter(keys.keys(), dtype=np.uint64, count=len(keys))
    rank = np.fromiter((v[0] for v in keys.values()), dtype=np.int64, count=len(keys))
    left = (k >> np.uint64(32)).astype(np.int64)
    right = (k & np.uint64(0xFFFFFFFF)).astype(np.int64)
    first = np.array([t[0] if t else 0 for t in token_bytes[:n]], dtype=np.int64)
    last = np.array([t[-1] if t else 0 for t in token_bytes[:n]], dtype=np.int64)
    return rank, left, right, first, last


def _edge_minima(columns, n: int):
    """Per token: the lowest rank of a merge taking it as the right operand after a symbol ending
    in an ASCII byte / a continuation byte, and as the left operand before a symbol starting with
    an ASCII byte / a lead byte (columns: _merge_columns)."""
    rank, left, right, first, last = columns
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


def _edge_byte_minima(columns):
    """(sorted operand << 8 | byte keys, their lowest ranks) for each side: on the right, merges
    (s, Y) by s and Y's first byte; on the left, merges (X, s) by s and X's last byte. The finer
    form of _edge_minima, which takes the lowest over a whole kind of byte."""
    rank, left, right, first, last = columns
    out = []
    for key in (left << 8 | first[right], right << 8 | last[left]):
        order = np.lexsort((rank, key))  # by key, lowest rank first within one
        key, r = key[order], rank[order]
        head = np.concatenate(([True], key[1:] != key[:-1])) if len(key) else np.zeros(0, dtype=bool)
        out.append((key[head], r[head]))
    return out


def _byte_mask(table, operands: list[int], limits: list[int], base: int) -> int:
    """Bit b (0..63) set when every merge of operands[k] with a neighbour whose edge byte is
    base + b ranks above limits[k] (table: _edge_byte_minima's keys and ranks for that side)."""
    ukeys, umin = table
    q = (np.array(operands, dtype=np.int64)[:, None] << 8) | (base + np.arange(64, dtype=np.int64))[None, :]
    at = np.minimum(np.searchsorted(ukeys, q), max(len(ukeys) - 1, 0))
    low = np.where(ukeys[at] == q, umin[at], INF) if len(ukeys) else np.full(q.shape, INF)
    ok = (low > np.array(limits, dtype=np.int64)[:, None]).all(axis=0)
    return int(np.packbits(ok, bitorder="little").view("<u8")[0])


def atomic_char_table(keys: dict[int, tuple[int, int]], token_bytes: list[bytes], regular,
                      byte_ids: list[int]) -> tuple[bytes, bytes]:
    """The atomic_chars and atomic_edges sections (little-endian u64, ascending) for a byte-level
    BPE vocabulary.

    atomic_edges refines a kind of multi-byte neighbour to the neighbour's own edge byte, where
    the kind failed: the argument above holds word for word when "a symbol ending in a
    continuation byte" is "a symbol ending in byte b" (the left neighbour's last byte, which every
    symbol ending there ends with) and "starting with a lead byte" is "starting with byte b" (the
    right neighbour's first). A kind fails as soon as one byte of it does, and most do for a
    different byte than the neighbour's: of the CJK chars that Llama 3 could not start from their
    token in wagahai.txt, nearly 9 in 10 can start from it beside the neighbour they have. Each
    pair is `code_point << 1 | side, mask` (side 0: left, bit b for a neighbour ending in 0x80 +
    b; side 1: right, bit b for one starting with 0xC0 + b), for BMP chars and a side whose kind's
    flag is unset, when the mask has a bit; such a char is listed in atomic_chars even with no
    flag."""
    n = len(token_bytes)
    edge = by_byte = None
    entries, pairs = [], []
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
            columns = _merge_columns(keys, token_bytes, n)
            edge, by_byte = _edge_minima(columns, n), _edge_byte_minima(columns)
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
        masks = []
        if ord(ch) < 0x10000:
            limits = [top] + [st[2] for st in states]
            for side, bit, table, base in ((0, LEFT_MB, by_byte[1], 0x80), (1, RIGHT_MB, by_byte[0], 0xC0)):
                if not flags & bit:
                    mask = _byte_mask(table, [i] + [st[side] for st in states], limits, base)
                    if mask:
                        masks.append(((ord(ch) << 1) | side, mask))
        if flags or masks:
            entries.append((ord(ch) << 40) | (flags << 32) | i)
            pairs += masks
    table = np.array(sorted(entries), dtype="<u8").tobytes()
    return table, np.array([v for pair in sorted(pairs) for v in pair], dtype="<u8").tobytes()
