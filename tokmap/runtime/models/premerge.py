"""Characters first, for the batch merge (bpe_batch.py): a multi-byte character's token in place
of its bytes before the rounds start.

Building a CJK character's token from its three bytes costs two rounds per distinct character.
`premerge_chars` puts the character's token in place of its bytes up front wherever the file's
atomic_chars section (proof: exporter/atomic_chars.py) says that sequential BPE would form it
before anything crosses its edges, for the kinds of neighbour it has in that word.
"""

from __future__ import annotations

import numpy as np


def bmp_index(table: np.ndarray) -> np.ndarray:
    """The atomic_chars entries of BMP code points by code point (0 where none), for premerge_chars:
    one gather instead of a binary search per multi-byte character (512 KiB, built once)."""
    out = np.zeros(0x10000, dtype=np.uint64)
    bmp = table[(table >> np.uint64(40)) < np.uint64(0x10000)]
    out[(bmp >> np.uint64(40)).astype(np.int64)] = bmp
    return out


def premerge_chars(sym: np.ndarray, raw: np.ndarray, lengths: np.ndarray, table: np.ndarray,
                   bmp: np.ndarray | None = None):
    """(symbols, lengths, raw, single) with each atomic character's bytes replaced by its token:
    raw and single (None when nothing changed) as merge() takes them. sym: the words'
    byte symbols (byte_ids[raw]); table: the atomic_chars entries, code_point << 40 | flags << 32 |
    id, ascending (flags: 1/2 ASCII/multi-byte neighbour on the left allowed, 4/8 on the right);
    bmp: bmp_index(table), optional. Every word holds at least one byte. Costs O(multi-byte chars)
    but for the word map and the final compaction."""
    lead = np.flatnonzero(raw >= 0xC0)
    if not len(lead) or not len(table):
        return sym, lengths, raw, None
    pad = np.concatenate((raw, np.zeros(4, dtype=np.uint8)))
    b0 = pad[lead].astype(np.int32)
    b1, b2 = pad[lead + 1].astype(np.int32) & 0x3F, pad[lead + 2].astype(np.int32) & 0x3F
    size = (b0 >= 0xE0).astype(np.int32)
    size += 2
    size += b0 >= 0xF0
    cp = np.where(size == 2, ((b0 & 0x1F) << 6) | b1, ((b0 & 0x0F) << 12) | (b1 << 6) | b2)
    astral = np.flatnonzero(size == 4)
    if len(astral):
        b3 = pad[lead[astral] + 3].astype(np.int32) & 0x3F
        cp[astral] = ((b0[astral] & 0x07) << 18) | (b1[astral] << 12) | (b2[astral] << 6) | b3
    if bmp is not None:
        entry = bmp[np.minimum(cp, 0xFFFF)]  # (astral ones are looked up below)
        if len(astral):
            entry[astral] = table[np.minimum(np.searchsorted(table, cp[astral].astype(np.uint64) << np.uint64(40)),
                                             len(table) - 1)]
    else:
        entry = table[np.minimum(np.searchsorted(table, cp.astype(np.uint64) << np.uint64(40)), len(table) - 1)]
    found = (entry >> np.uint64(40)).astype(np.int32) == cp
    if not found.any():
        return sym, lengths, raw, None
    flags = ((entry >> np.uint64(32)) & np.uint64(0xFF)).astype(np.int32)
    # Word edges by a byte map, not by each lead's word (a binary search each: Llama 3 over
    # wagahai.txt's distinct pieces, 9 ms of the 38): a char never crosses a word's end.
    starts = np.cumsum(lengths) - lengths
    edge = np.zeros(len(raw) + 1, dtype=bool)  # a word starts here, or the last one ends
    edge[starts] = True
    edge[-1] = True
    at_start = edge[lead]
    at_end = edge[np.minimum(lead + size, len(raw))]
    prev_ascii = pad[lead - 1] < 0x80  # lead 0 reads the padding, but is a word start anyway
    next_ascii = pad[lead + size] < 0x80
    left_ok = at_start | ((flags & np.where(prev_ascii, 1, 2)) != 0)
    right_ok = at_end | ((flags & np.where(next_ascii, 4, 8)) != 0)
    ok = np.flatnonzero(found & left_ok & right_ok)
    if not len(ok):
        return sym, lengths, raw, None
    lok, sok = lead[ok], size[ok]  # (gathered once: ~300K of them in wagahai.txt's pieces)
    keep = np.ones(len(sym), dtype=bool)
    for d in (1, 2, 3):
        keep[(lok + d)[sok > d]] = False
    idx = np.flatnonzero(keep)
    # Where each premerged char's lead lands once the continuation bytes are gone.
    sok -= 1
    at = lok - (np.cumsum(sok) - sok)
    out = sym[idx]
    out[at] = (entry[ok] & np.uint64(0xFFFFFFFF)).astype(out.dtype)
    single = np.ones(len(idx), dtype=bool)
    single[at] = False
    # (each word's bytes kept: a reduceat over the map, where a bincount wanted each lead's word)
    return out, np.add.reduceat(keep, starts, dtype=np.int64), raw[idx], single
