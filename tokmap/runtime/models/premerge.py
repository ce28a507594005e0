"""Characters first, for the batch merge (bpe_batch.py): a multi-byte character's token in place
of its bytes before the rounds start.

Building a CJK character's token from its three bytes costs two rounds per distinct character.
`premerge_chars` puts the character's token in place of its bytes up front wherever the file's
atomic_chars section (proof: exporter/atomic_chars.py) says that sequential BPE would form it
before anything crosses its edges, for the kinds of neighbour it has in that word, or, where a
kind fails, for the neighbour's own edge byte (the atomic_edges section).
"""

from __future__ import annotations

import numpy as np

PRESENT = 0x80  # bmp_index's flag byte: the code point has an entry (its flags are the low four bits)


def bmp_index(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The atomic_chars entries of BMP code points by code point, for premerge_chars: (flags,
    uint8: the entry's flags | PRESENT, 0 where there is none; ids, uint32), one gather each
    instead of a binary search per multi-byte character (320 KiB, built once)."""
    flags = np.zeros(0x10000, dtype=np.uint8)
    ids = np.zeros(0x10000, dtype=np.uint32)
    bmp = table[(table >> np.uint64(40)) < np.uint64(0x10000)]
    cp = (bmp >> np.uint64(40)).astype(np.int64)
    flags[cp] = ((bmp >> np.uint64(32)) & np.uint64(0x0F)).astype(np.uint8) | PRESENT
    ids[cp] = (bmp & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return flags, ids


def edge_index(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The atomic_edges pairs (u64: code_point << 1 | side, mask; keys ascending, BMP code points,
    side 0 or 1: the caller checked) as premerge_chars takes them: (row per code point, uint32,
    0 where none, one past U+FFFF too: astral chars clip there; left masks by row, as 64 bools a
    row: bit b of row r at r * 64 + b, one gather where a uint64 shift took four passes; right
    masks alike)."""
    key, mask = pairs[0::2], pairs[1::2]
    cp = (key >> np.uint64(1)).astype(np.int64)
    side = (key & np.uint64(1)).astype(bool)
    distinct = np.concatenate(([True], cp[1:] != cp[:-1])) if len(cp) else np.zeros(0, dtype=bool)
    row = np.cumsum(distinct)  # 1 .. chars, each pair's char (keys ascending: a char's pairs adjoin)
    row_of = np.zeros(0x10001, dtype=np.uint32)
    row_of[cp] = row
    n = int(row[-1]) + 1 if len(row) else 1
    left = np.zeros(n, dtype=np.uint64)
    right = np.zeros(n, dtype=np.uint64)
    left[row[~side]] = mask[~side]
    right[row[side]] = mask[side]
    return row_of, _bits(left), _bits(right)


def _bits(masks: np.ndarray) -> np.ndarray:
    """Each uint64 mask as 64 bools, bit b of mask r at r * 64 + b."""
    return np.unpackbits(masks.astype("<u8").view(np.uint8), bitorder="little").astype(bool)


def _entries(table: np.ndarray, cp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(flags, ids) of code points cp as bmp_index has them, by binary search in table."""
    entry = table[np.minimum(np.searchsorted(table, cp.astype(np.uint64) << np.uint64(40)), len(table) - 1)]
    flags = ((entry >> np.uint64(32)) & np.uint64(0x0F)).astype(np.uint8) | PRESENT
    flags[(entry >> np.uint64(40)).astype(np.int64) != cp] = 0
    return flags, (entry & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def premerge_chars(raw: np.ndarray, lengths: np.ndarray, table: np.ndarray, by_byte: np.ndarray,
                   bmp: tuple | None = None, edges: tuple | None = None):
    """(symbols, lengths, raw, single) with each atomic character's bytes replaced by its token:
    raw and single (None when nothing changed) as merge() takes them. by_byte: the symbol of each
    byte value (byte_ids), taken for the bytes kept only (Llama 3 over wagahai.txt: 1 MB of
    bytes, 370K kept; the symbols of every byte had been a gather over all); table: the
    atomic_chars entries, code_point << 40 | flags << 32 | id, ascending (flags: 1/2
    ASCII/multi-byte neighbour on the left allowed, 4/8 on the right); bmp: bmp_index(table),
    optional; edges: edge_index of the atomic_edges section, optional (with bmp only), for the
    chars whose neighbour's kind fails but whose neighbour's edge byte passes. Every word holds
    at least one byte, and raw is whole UTF-8 chars (a str's encoding), so a char's bytes never
    pass raw's end. Costs O(multi-byte chars) but for the word map and the final compaction.

    The arrays per char are bytes where they can be (flags, sizes, neighbours), and the bytes
    around each lead are read through shifted views of one padded copy of raw rather than index
    arrays lead + k: each temporary of ~300K chars (GPT-4o over wagahai.txt's distinct pieces:
    1 MB, 335K multi-byte chars) is a pass and, at 8 bytes a char, fresh pages. That call went
    19.5 -> 13.8 ms (min of 5, the captured arrays)."""
    lead = np.flatnonzero(raw >= 0xC0)
    if not len(lead) or not len(table):
        return by_byte.take(raw), lengths, raw, None
    pad = np.zeros(len(raw) + 5, dtype=np.uint8)  # pad[k + 1] = raw[k]: one byte before, four after
    pad[1:len(raw) + 1] = raw
    b0 = pad[1:][lead]
    size = np.add(b0 >= 0xE0, b0 >= 0xF0, dtype=np.uint8)
    size += 2
    # Most chars take three bytes (CJK): every code point is decoded as one, and those of two or
    # four bytes are decoded again below.
    cp = (b0 & 0x0F).astype(np.int32)
    cp <<= 6
    cp |= pad[2:][lead] & 0x3F
    cp <<= 6
    cp |= pad[3:][lead] & 0x3F
    two = np.flatnonzero(size == 2)
    if len(two):
        cp[two] = ((b0[two] & 0x1F).astype(np.int32) << 6) | (pad[2:][lead[two]] & 0x3F)
    astral = np.flatnonzero(size == 4)
    if len(astral):
        at4 = lead[astral]
        cp[astral] = ((b0[astral] & 0x07).astype(np.int32) << 18) | ((pad[2:][at4] & 0x3F).astype(np.int32) << 12) \
            | ((pad[3:][at4] & 0x3F).astype(np.int32) << 6) | (pad[4:][at4] & 0x3F)
    if bmp is not None:
        fl, idt = bmp
        flags = np.take(fl, cp, mode="clip")  # (astral ones read U+FFFF's: looked up below)
        if len(astral):
            flags[astral], astral_ids = _entries(table, cp[astral])
    else:
        flags, ids_all = _entries(table, cp)
    # Word edges by a byte map, not by each lead's word (a binary search each: Llama 3 over
    # wagahai.txt's distinct pieces, 9 ms of the 38): a char never crosses a word's end.
    starts = np.cumsum(lengths) - lengths
    edge = np.zeros(len(raw) + 1, dtype=bool)  # a word starts here, or the last one ends
    edge[starts] = True
    edge[-1] = True
    after = lead + size  # where the next char starts (at most len(raw))
    # Left: a word start, or the flag for the byte before (1: ASCII, 2: not); right: a word end,
    # or the flag for the byte after (4: ASCII, 8: not), here shifted down to 1 / 2.
    left = np.subtract(2, pad[lead] < 0x80, dtype=np.uint8)  # (pad[lead] = raw[lead - 1])
    left &= flags
    right = np.subtract(2, pad[1:][after] < 0x80, dtype=np.uint8)
    right &= flags >> 2
    left_ok = (left != 0) | edge[lead]
    right_ok = (right != 0) | edge[after]
    del left, right
    ok = left_ok & right_ok
    ok &= flags >= PRESENT
    if edges is not None:
        _by_neighbour(ok, left_ok, right_ok, edges, flags, cp, lead, after, pad)
    del left_ok, right_ok, after
    ok = np.flatnonzero(ok)
    if not len(ok):
        return by_byte.take(raw), lengths, raw, None
    lok, sok = lead[ok], size[ok]
    tok = np.take(idt, cp[ok], mode="clip") if bmp is not None else ids_all[ok]
    if bmp is not None and len(astral):  # (the astral ones' ids: those looked up above)
        big = np.flatnonzero(sok == 4)
        if len(big):
            tok[big] = astral_ids[np.searchsorted(astral, ok[big])]
    keep = np.ones(len(raw) + 2, dtype=bool)  # (two past the end: a 2-byte char's "third byte")
    keep[1:][lok] = False  # every char here has 2+ bytes; the third byte goes for 3+ (that of
    keep[2:][lok] = sok < 3  # a 2-byte char is the next char's first, or past the end: kept) ...
    four = np.flatnonzero(sok > 3)
    if len(four):
        keep[3:][lok[four]] = False  # ... and the fourth for 4
    idx = np.flatnonzero(keep[:len(raw)])
    # Where each premerged char's lead lands once the continuation bytes are gone: lok less
    # the continuation bytes of the chars before it. (In place over an int64 copy: a cumsum
    # casting the uint8 sizes on the fly took three times as long.)
    gone = sok.astype(np.int64)
    gone -= 1
    np.cumsum(gone, out=gone)  # up to and including each char's own ...
    # Each word's bytes kept: its length less the continuation bytes gone before its end, less
    # those before its start (the chars before each end by a binary search of the few words,
    # where a reduceat over the byte map passed every byte).
    before_end = np.concatenate(([0], gone))[np.searchsorted(lok, starts + lengths)]
    new_len = lengths - before_end
    new_len[1:] += before_end[:-1]
    gone -= sok
    gone += 1  # ... and without them
    at = lok - gone
    kept = raw[idx]
    out = by_byte.take(kept)
    out[at] = tok
    single = np.ones(len(idx), dtype=bool)
    single[at] = False
    return out, new_len, kept, single


def _by_neighbour(ok, left_ok, right_ok, edges, flags, cp, lead, after, pad) -> None:
    """Set ok for the chars whose kind of neighbour failed on a side (left_ok / right_ok: each
    side passed by its flags or a word edge) but whose neighbour's own edge byte passes there:
    edges = edge_index(...), bit b & 0x3F of a row's mask set when the proof holds beside a
    neighbour whose edge byte is b (a continuation byte on the left, a lead byte on the right)."""
    row_of, lmask, rmask = edges
    miss = np.flatnonzero(~ok & (flags >= PRESENT))
    if not len(miss):
        return
    row = np.take(row_of, cp[miss], mode="clip")  # (an astral char clips to the last entry: 0)
    has = np.flatnonzero(row)
    if not len(has):
        return
    miss = miss[has]
    row = row[has].astype(np.int64)
    row <<= 6
    prev, nxt = pad[lead[miss]], pad[1:][after[miss]]
    lok = left_ok[miss] | (((prev & 0xC0) == 0x80) & lmask[row + (prev & 0x3F)])
    rok = right_ok[miss] | ((nxt >= 0xC0) & rmask[row + (nxt & 0x3F)])
    ok[miss[lok & rok]] = True
