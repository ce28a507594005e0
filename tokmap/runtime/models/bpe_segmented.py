"""BPE's cut path: many distinct pieces of multi-byte text (Japanese, Chinese, random ideographs)
cut where no merge can cross (bpe_cuts.py) and merged part by part. A part of one char takes what
that char alone merges to (bpe_cuts.CharIds: each distinct char merged once per tokenizer); the
other parts are merged once per distinct part, or come from the model's part_cache, and every
occurrence then takes its ids by numpy gathers (textparts.py).

Functions of the BPE model (bpe.py), imported on the first batch of multi-byte misses, so that
English and code never load them. Their tunables stay in bpe.py, read from there at each call.
"""

from __future__ import annotations

from itertools import chain, repeat
from operator import is_, is_not

import numpy as np

from . import bpe

# (textparts and bpe_cuts are imported in each function, at the call, as in the model's own
# methods: a test that patches one of their functions reaches every caller)


def segmented(model, texts: list[str], joined: str, n_chars: list[int] | None = None) -> list | None:
    """Each piece's ids where uncrossable boundaries (bpe_cuts.py) cut it into parts of at most
    BATCH_WORD bytes, else None there (None for all: no piece was cut). A part is merged
    as a word of its own (pure BPE: no whole-token shortcut, which a part is not owed); a
    part of one char takes what the char alone merges to, from model._chars (each distinct
    char merged once), the rest are merged in one batch. Parts of several chars are first cut
    to single chars where their chars' histories prove no merge crosses (standalone_cuts)."""
    from .bpe_cuts import CharIds, learn_chars
    from .textparts import byte_lengths, ranges

    raw = np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)
    blen = byte_lengths(raw, texts, n_chars)
    cps_all = np.frombuffer(joined.encode("utf-32-le"), dtype="<u4")
    bstart = np.cumsum(blen) - blen
    cuts, tested = model._cut_table().cuts(raw, bstart)
    if len(cuts) * bpe.CUT_SHARE < tested:
        return None
    owner_of_cut = np.searchsorted(bstart, cuts, side="right") - 1
    cut_here = np.zeros(len(texts), dtype=bool)
    cut_here[owner_of_cut] = True
    idx = np.flatnonzero(cut_here)
    if model._piece_hash is not None:  # a piece that is a token is that token, cuts or not
        found = model._whole_tokens(raw[np.repeat(cut_here, blen)], blen[idx])[0]
        cut_here[idx[found >= 0]] = False
    starts = np.sort(np.concatenate((bstart[cut_here], cuts[cut_here[owner_of_cut]])))
    if not len(starts):
        return None
    owner = np.searchsorted(bstart, starts, side="right") - 1
    ends = np.minimum(np.append(starts[1:], len(raw)), bstart[owner] + blen[owner])
    longest = np.zeros(len(texts), dtype=np.int64)
    np.maximum.at(longest, owner, ends - starts)
    fits = longest[owner] <= bpe.BATCH_WORD
    starts, ends, owner = starts[fits], ends[fits], owner[fits]
    if not len(starts):
        return None
    if model._chars is None:
        model._chars = CharIds()
    chars = model._chars
    char_at = np.cumsum((raw & 0xC0) != 0x80, dtype=np.int32)  # (int32: 4 bytes a byte, not 8)
    char_at -= 1  # the char each byte belongs to
    width = _widths(raw[starts])
    multi = np.flatnonzero(ends - starts != width)
    if len(multi) * bpe.STANDALONE_PARTS >= len(starts):
        # Parts the windows left whole, cut to single chars where their chars' histories allow.
        extra = standalone_cuts(model, raw, cps_all, char_at, starts[multi], ends[multi])
        if extra is None:
            return None
        if len(extra):
            starts = np.sort(np.concatenate((starts, extra)))
            owner = np.searchsorted(bstart, starts, side="right") - 1
            ends = np.minimum(np.append(starts[1:], len(raw)), bstart[owner] + blen[owner])
            width = _widths(raw[starts])
    one = np.flatnonzero(ends - starts == width)
    many = np.flatnonzero(ends - starts != width)
    cps = cps_all[char_at[starts[one]]].astype(np.int64)
    if not learn_chars(model, raw, cps, starts[one], width[one]):  # chars not met yet: each distinct one merged once
        return None
    row = chars.rows(cps)
    counts = np.zeros(len(starts), dtype=np.int64)
    counts[one] = chars.counts[row]
    if len(many):  # parts of several chars: each distinct one merged once (part_cache)
        many_ids = many_part_ids(model, raw, joined, cps_all, char_at, starts[many], ends[many], counts, many)
        if many_ids is None:
            return None
    # The one-char parts' ids in order: the first count ids of each one's row of chars.ids,
    # taken from the rows as one flat array; they fill every slot the other parts do not have
    # (rather than a destination computed per id). (Gathering the rows, then masking them to
    # their counts, made two arrays of 4 a part: 95K parts, 0.9 against 0.5-0.7 ms warm.)
    ones = chars.ids.ravel().take(ranges(row * 4, counts[one]))
    if len(many):
        dest = ranges((np.cumsum(counts) - counts)[many], counts[many])  # the multi-char parts' slots
        flat = np.empty(int(counts.sum()), dtype=np.uint32)  # (ids: uint32 as in the file; fresh pages cost)
        rest = np.ones(len(flat), dtype=bool)
        rest[dest] = False
        flat[rest] = ones
        flat[dest] = many_ids
    else:
        flat = ones
    per_piece = np.bincount(owner, weights=counts, minlength=len(texts)).astype(np.int64)
    done = np.zeros(len(texts), dtype=bool)
    done[owner] = True
    ids = flat.tolist()
    out: list = [None] * len(texts)
    at = 0
    for k, n in zip(np.flatnonzero(done).tolist(), per_piece[done].tolist()):
        if len(texts[k]) <= bpe.CACHE_PIECE:  # (the cache keeps it: a tuple)
            out[k] = tuple(ids[at:at + n])
        else:  # a list, and the whole list when it is all (10^6 ideographs: 2M ids not copied)
            out[k] = ids if n == len(ids) else ids[at:at + n]
        at += n
    return out


def standalone_cuts(model, raw, cps, char_at, starts, ends) -> np.ndarray | None:
    """The byte offsets of every char but the first of each part raw[starts[k]:ends[k]] (of
    several chars) whose inner boundaries its chars' histories prove uncrossable
    (bpe_cuts.standalone), when most parts pass (random ideographs under o200k: 16,125 of 16,129
    distinct ones; where few do, prose with real two-char tokens, the test is not worth its cost:
    judged on the first STANDALONE_PROBE parts); None for a byte with no token."""
    from .bpe_cuts import standalone

    c0, c1 = char_at[starts], char_at[ends - 1] + 1
    k = bpe.STANDALONE_PROBE if len(starts) > 2 * bpe.STANDALONE_PROBE else len(starts)
    probe = standalone(model, raw, cps, starts[:k], c0[:k], c1[:k])
    if probe is None:
        return None
    if k < len(starts):  # (the probe's parts are not tested twice: the rest are, and joined to it)
        if np.count_nonzero(probe[0]) < k * bpe.STANDALONE_SHARE:
            return starts[:0]
        rest = standalone(model, raw, cps, starts[k:], c0[k:], c1[k:])
        if rest is None:
            return None
        probe = tuple(np.concatenate(pair) for pair in zip(probe, rest))
    ok, pos, n = probe
    keep = np.repeat(ok, n)
    keep[np.cumsum(n) - n] = False  # (each part's first char starts at a cut already)
    return pos[keep]


def _widths(lead: np.ndarray) -> np.ndarray:
    """The UTF-8 length of the char each lead byte starts (int64)."""
    return 1 + (lead >= 0xC0).astype(np.int64) + (lead >= 0xE0) + (lead >= 0xF0)


def cuts_pay(model, joined: str) -> bool:
    """Whether cutting is worth it, judged on the first PROBE_BYTES of the pieces (as one): at
    least 1/CUT_SHARE of the boundaries tested cut (Llama 3 cuts 18% of Japanese text's, and
    whole pieces merge as fast), and the chars repeat (every code point once, utf8seq.txt:
    merging each char alone costs more than merging the pieces in chunks). Only that much
    is encoded here: most texts that fail go on to _encode_whole, which encodes them all."""
    head = joined[:bpe.PROBE_BYTES].encode("utf-8")
    probe = np.frombuffer(head[:bpe.PROBE_BYTES], dtype=np.uint8)
    if len(head) == len(probe) and len(joined) <= bpe.PROBE_BYTES \
            and np.count_nonzero(probe >= 0xC0) < len(probe) * bpe.CUT_RARE_SHARE:
        # All of the pieces are in the probe, and multi-byte chars are rare in them: few pieces
        # would be cut, and the cut path's fixed costs (its tables, the code points, a second
        # batch) outweigh what cutting saves (cl100k over code.txt's 6.9K distinct pieces, 72
        # of them cut: ~5 ms for nothing). Where they are common (a CJK document), it pays.
        return False
    cuts, tested = model._cut_table().cuts(probe, np.zeros(1, dtype=np.int64))
    if not len(cuts) or len(cuts) * bpe.CUT_SHARE < tested:
        return False
    key = np.sort(probe[cuts].astype(np.int64) << 16 | probe.take(cuts + 1, mode="clip").astype(np.int64) << 8
                  | probe.take(cuts + 2, mode="clip"))
    distinct = 1 + np.count_nonzero(key[1:] != key[:-1])  # (3 bytes from each cut: its char, about)
    return distinct * 5 < len(cuts) * 4


def many_part_ids(model, raw, joined, cps, char_at, starts, ends, counts, many):
    """The ids of the multi-char parts raw[starts[k]:ends[k]] back to back (uint32), their
    counts put in counts[many]; None for a byte with no token. Each distinct part once: from
    part_cache, or merged (pure BPE, no whole-token lookup) in one batch from its first
    occurrence's bytes; every occurrence then takes its ids by numpy gathers (textparts.py:
    o200k over 10^6 random ideographs, whose pairs are nearly all distinct, 585 -> 505 ms)."""
    from .textparts import distinct_parts, first_occurrences, spread, tuples

    cache = model.part_cache
    s_char, e_char = char_at[starts], char_at[ends - 1] + 1
    if not cache:  # nothing to look up: strings only for the parts remembered, if any
        return fresh_part_ids(model, raw, joined, cps, starts, ends, s_char, e_char, counts, many)
    distinct, inv = distinct_parts(joined, cps, s_char, e_char)
    got = list(map(cache.get, distinct))
    dlen = np.zeros(len(distinct), dtype=np.int64)
    dbeg = np.zeros(len(distinct), dtype=np.int64)  # where each distinct part's ids start in dflat
    miss = np.flatnonzero(np.fromiter(map(is_, got, repeat(None)), bool, len(got)))
    hit = np.flatnonzero(np.fromiter(map(is_not, got, repeat(None)), bool, len(got)))
    hits = [got[k] for k in hit.tolist()] if len(miss) else got
    hlen = np.fromiter(map(len, hits), np.int64, len(hits))
    dflat = [np.fromiter(chain.from_iterable(hits), np.uint32, int(hlen.sum()))]
    dlen[hit] = hlen
    dbeg[hit] = np.cumsum(hlen) - hlen
    if len(miss):
        first = first_occurrences(inv, len(distinct))
        got_m = model._merge_ranges(raw, starts[first[miss]], ends[first[miss]])
        if got_m is None:
            return None
        flat, mcounts = got_m
        dlen[miss] = mcounts
        dbeg[miss] = len(dflat[0]) + np.cumsum(mcounts) - mcounts
        dflat.append(flat.astype(np.uint32))
        if model._parts_kept(len(miss), len(inv), len(distinct)):
            if len(cache) + len(miss) > bpe.CACHE_MAX:
                cache.clear()
            cache.update(zip([distinct[k] for k in miss.tolist()],
                             tuples(flat, np.cumsum(mcounts) - mcounts, mcounts)))
    ids, counts[many] = spread(np.concatenate(dflat), dbeg, dlen, inv)
    return ids


def fresh_part_ids(model, raw, joined, cps, starts, ends, s_char, e_char, counts, many):
    """many_part_ids with an empty part_cache: every distinct part merged from one of its
    occurrences, and strings made only for the parts remembered (10^5 random ideographs
    under o200k: 16K parts, none remembered; line_profiler put 2.4 ms of the call on their
    strings and on looking each up in the empty cache). The cache being empty, what is
    remembered (at most PART_BATCH_REMEMBERED) never takes it past CACHE_MAX."""
    from .textparts import distinct_parts, part_strings, spread, tuples

    rep, inv = distinct_parts(joined, cps, s_char, e_char, strings=False)
    got = model._merge_ranges(raw, starts[rep], ends[rep])
    if got is None:
        return None
    flat, mcounts = got
    dbeg = np.cumsum(mcounts) - mcounts
    if model._parts_kept(len(rep), len(inv), len(rep)):
        keys = part_strings(joined, cps, s_char[rep], e_char[rep])
        model.part_cache.update(zip(keys, tuples(flat, dbeg, mcounts)))
    ids, counts[many] = spread(flat.astype(np.uint32), dbeg, mcounts, inv)
    return ids
