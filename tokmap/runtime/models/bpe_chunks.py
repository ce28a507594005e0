"""One long piece (10^5 random letters, a CJK run, a minified file) merged as overlapping chunks.

The batch merge (bpe_batch.py) takes one rank per word per round, so a single long word costs a
round per distinct merge, and the heap merge a Python step per merge. Here the piece is cut into
chunks of STRIDE bytes that reach OVERLAP bytes into the next chunk; all chunks are
merged as the words of one batch, and neighbouring chunks are joined at a token they share.

Exactness. Sequential BPE (lowest rank first, leftmost on ties; tokenizers and tiktoken alike)
has two properties, shown in github/rust-gems' crates/bpe README ("Properties of BPE"):
  II   a contiguous run of the tokens BPE makes of a text is what BPE makes of that run's bytes
       (no merge crossed its edges, so the same merges happen in the same order);
  III  if e_0..e_i is BPE's result for text[a:c] and e_i..e_n for text[b:d], where e_i is the
       same token over the same bytes in both, then e_0..e_n is BPE's result for text[a:d].
Chunk k's result is exact BPE of its bytes. If chunks k and k+1 both hold a token with the same
id over the same bytes (inside their overlap), chunk k's tokens up to it and chunk k+1's from it
on are glued by III; gluing every neighbouring pair this way gives BPE of the whole piece. When
some pair shares no token, the two are merged again as one chunk; after RETRIES such rounds
(periodic text can keep chunks out of phase for long) None is returned and the caller merges the
piece as before: the result is exact either way, only the speed differs.

Cuts. Where the caller knows boundaries no merge crosses (byte-level BPE: bpe_cuts.py, between
two multi-byte chars), BPE of the piece is that of its parts joined there. A chunk boundary
whose place has such a cut within half a stride after it is moved onto the cut, and the two
chunks meet there without overlap (cut_chunk_bounds): nothing is glued there, and no symbol is
merged twice. Every code point in a row (utf8seq.txt) cuts at nearly every char boundary, so its
long pieces are merged with no overlap and no glue at all; Japanese prose cuts at about a fifth
of them, and its chunks mix both kinds of boundary. Cold calls over utf8seq.txt, min of 4
alternated rounds of 3 processes: Llama 3 75.1 -> 60.4 ms, Qwen3 85.7 -> 75.9, GPT-4o 76.0 ->
62.6 (with the chunks' bytes taken as they lie when they all meet, BPE._merge_ranges).

Several long pieces can share one batch (merge_pieces): their chunks lie back to back, a chunk
never crosses a piece's end, and there two neighbours keep all of their ids, as two pieces do.

Byte-level chunks start and end on UTF-8 character starts, so whole characters can be premerged
(premerge.premerge_chars) in a chunk as in any word. Character-level BPE (charbpe.py) chunks its
symbols, one per char, the same way; there a token's length is counted in chars.
"""

from __future__ import annotations

import numpy as np

from .textparts import ranges

STRIDE = 32  # symbols between chunk starts: a round costs O(all chunks), rounds ~ a chunk's merges
OVERLAP = 8  # symbols a chunk reaches into the next; BPE agrees again within a few tokens
# From WIDE_PIECE symbols on, chunks start WIDE_STRIDE apart. There a round's ~20 numpy calls are a
# small share of its cost, and half the boundaries halve the gluing and the chance that one of them
# shares no token, which costs a second glue of the whole piece (10^6 random letters at stride 32:
# 2 of 31K boundaries failed). cl100k and Llama 3 over 10^6 random letters: 140-153 against
# 166-171 ms; over 10^5, stride 32 stays ahead (13.9 against 14.8 ms).
WIDE_PIECE = 1 << 18
WIDE_STRIDE = 64
GLUE_CHUNKS = 2048  # boundaries glue() joins at a time (its arrays: ~30 bytes an id)
RETRIES = 4  # rounds of joining chunks that share no token before giving up (periodic text)
RUN_PROBE = 256  # symbols of a run merged in sequence to find the token it repeats (run_layout) ...
RUN_STRIDE = 64  # ... its chunks' starts at least this far apart ...
RUN_EDGE = 16  # ... and up to this many other symbols allowed at either end of it


def chunk_bounds(n: int, lead: np.ndarray | None, stride: int | None = None,
                 overlap: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the chunks of a piece of n symbols: chunk k from the first allowed start
    at or after k * stride to the one at or after (k + 1) * stride + overlap, the last to n
    (by default stride is STRIDE, or WIDE_STRIDE from WIDE_PIECE symbols on, and overlap OVERLAP).
    lead: the ascending positions where a chunk may start (UTF-8 char starts), None for any.
    (Starts on multiples of the stride keep text with a period dividing it in phase: "abab...".)"""
    if stride is None:
        stride = STRIDE if n < WIDE_PIECE else WIDE_STRIDE
    if overlap is None:
        overlap = OVERLAP
    lead = np.arange(n + 1) if lead is None else np.append(lead, n)  # (n: "the end")
    k = np.arange((n + stride - 1) // stride, dtype=np.int64)
    starts = lead[np.searchsorted(lead, k * stride)]
    ends = lead[np.searchsorted(lead, np.minimum((k + 1) * stride + overlap, n))]
    ends[-1] = n
    keep = ends > starts  # (a char longer than the stride could leave a chunk empty)
    return starts[keep], ends[keep]


def cut_chunk_bounds(n: int, lead: np.ndarray | None, cuts: np.ndarray, stride: int | None = None,
                     overlap: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """chunk_bounds, but where a cut (cuts: ascending positions inside the piece where no merge
    crosses, bpe_cuts.py) lies within half a stride after a boundary's place (k * stride), the
    two chunks meet there, without overlap: (starts, ends, free), free[b] True where chunk b + 1
    starts where chunk b ends at a cut. BPE of the piece is its parts' BPE joined at a cut, so
    there is nothing to glue, and the overlap's symbols are not merged twice."""
    if stride is None:
        stride = STRIDE if n < WIDE_PIECE else WIDE_STRIDE
    starts, ends = chunk_bounds(n, lead, stride, overlap)
    place = np.arange(1, len(starts), dtype=np.int64) * stride  # boundary b's place
    cut = np.append(cuts, n)[np.searchsorted(cuts, place)]  # the first cut at or after it
    free = cut < np.minimum(place + stride // 2, n)
    # (chunk b + 1 starts in [place, place + stride) unless chunk_bounds dropped an empty chunk
    # before it, a char longer than the stride: then no boundary moves)
    if free.any() and ((starts[1:] >= place) & (starts[1:] < place + stride)).all():
        starts[1:][free] = ends[:-1][free] = cut[free]
        return starts, ends, free
    return starts, ends, np.zeros(len(place), dtype=bool)


def run_layout(n: int, probe: list[int]):
    """(lead, chunk_bounds' stride and overlap) for a run of one symbol (n symbols, up to RUN_EDGE
    others at either end: "aaaa", spaces, Llama 2's "\u2581" before them), or None. probe: the
    lengths in symbols of the tokens sequential BPE makes of the run's first symbols (its head
    and RUN_PROBE more). BPE makes a run a few tokens, then one token over and over, then a few
    more (Llama 2's "a": 2, 8, 8, ..., 8, 4, 2, 1 chars; Gemma 3's spaces: 31s). Chunks that start
    only where those repeated tokens start (the phase the head sets), a multiple of their length
    P apart, and reach 4P into the next, make the same tokens where they overlap and glue; and
    within the run a chunk is only its length, so its callers merge each distinct length once
    (charbpe._merge_run, spm._bpe_run). Glued or not, the result is exact (see the top)."""
    mid = probe[2:-2] if len(probe) > 4 else probe
    period = max(sorted(set(mid)), key=mid.count) if mid else 0  # (the most common; the shortest of equals)
    if period < 1:
        return None
    phase = sum(probe[:len(probe) // 2]) % period
    lead = np.arange(phase, n, period)
    if phase:
        lead = np.concatenate(([0], lead))
    return lead, {"stride": period * -(-RUN_STRIDE // period), "overlap": 4 * period}


def char_starts(raw: np.ndarray) -> np.ndarray:
    """Positions in UTF-8 bytes where a character starts."""
    return np.flatnonzero((raw & 0xC0) != 0x80)


def worth_chunking(sym: np.ndarray, width: int = 1) -> bool:
    """Not for runs ("aaaa", spaces; sym: the piece's bytes or symbols): their batch rounds merge
    half the symbols at once, while chunks of a run can stay out of phase and fail to glue.
    width: the symbols of the piece's first char (its UTF-8 length, for bytes): worth it when more
    than half of the chars differ from the one before, so that a run of a multi-byte char (U+3000,
    the ideographic space: e3 80 80 ...) counts as a run too. Chunked, 10^5 of them under Llama 3
    failed to glue and were merged again as one chunk: 38 ms, against 20 for the rounds over the
    run. (Consecutive code points, utf8seq.txt, differ in one byte of each char: worth it.)"""
    return np.count_nonzero(sym[width:] != sym[:-width]) * 2 * width > len(sym)


def utf8_width(first_byte: int) -> int:
    """The UTF-8 length of the char a lead byte starts (1 for a byte that starts none)."""
    return 4 if first_byte >= 0xF0 else 3 if first_byte >= 0xE0 else 2 if first_byte >= 0xC0 else 1


def merge_piece(n: int, lead: np.ndarray | None, merge_chunks, tok_len: np.ndarray, **bounds) -> np.ndarray | None:
    """BPE ids of one long piece of n symbols (bytes, or chars for char-level BPE), or None.
    lead: where chunks may start (chunk_bounds). merge_chunks(starts, ends) merges the symbol
    ranges as the words of one batch: (ids back to back, count per range), or None. tok_len:
    every token's length in symbols. bounds: chunk_bounds' stride and overlap, when not its own.
    (merge_pieces of one piece.)"""
    return merge_pieces([n], [lead], merge_chunks, tok_len, **bounds)[0]


def merge_pieces(sizes: list[int], leads: list, merge_chunks, tok_len: np.ndarray, cuts: list | None = None,
                 **bounds) -> list:
    """BPE ids of several long pieces laid back to back (piece p: the sizes[p] symbols after the
    pieces before it), their chunks all merged in one batch: a batch round costs ~20 numpy calls
    whatever its size, so thirty pieces of 1-4 KB (Llama 3 over utf8seq.txt) cost the rounds of
    one. leads[p]: where piece p's chunks may start (chunk_bounds), in its own offsets. cuts[p]:
    where no merge crosses in piece p (bpe_cuts.py; None or empty for none): chunks meet there
    without overlap (cut_chunk_bounds). Chunks never cross a piece's end: there neighbours are
    joined as they are, as at a cut. Neighbours that share no token are merged again as one
    chunk, up to RETRIES times; a piece still left with such neighbours gets None (the caller
    merges it some other way), as do all when merge_chunks gives None."""
    starts, ends, owner, free_left, at = [], [], [], [], 0
    for p, (n, lead) in enumerate(zip(sizes, leads)):
        cut = cuts[p] if cuts is not None else None
        if cut is not None and len(cut):
            s, e, f = cut_chunk_bounds(n, lead, cut, **bounds)
        else:
            s, e = chunk_bounds(n, lead, **bounds)
            f = np.zeros(len(s) - 1, dtype=bool)
        starts.append(s + at)
        ends.append(e + at)
        owner.append(np.full(len(s), p, dtype=np.int64))
        free_left.append(np.concatenate(([True], f)))  # (a piece's first chunk: free of the one before)
        at += n
    starts, ends, owner = np.concatenate(starts), np.concatenate(ends), np.concatenate(owner)
    free_left = np.concatenate(free_left)  # whether chunk k starts where chunk k - 1 ends, with nothing to glue
    got = merge_chunks(starts, ends)
    for attempt in range(RETRIES + 1):
        if got is None:
            return [None] * len(sizes)
        ids, counts = got
        free = free_left[1:]
        if free.all():  # (every boundary at a cut or between pieces: the chunks' ids as they are)
            return _by_piece(ids, counts, owner, len(sizes), None)
        out, failed, kept = glue(ids, counts, tok_len, starts, ends, free)
        if out is None and attempt == RETRIES:  # the pieces glued so far are kept, the rest given up
            bad = np.zeros(len(sizes), dtype=bool)
            bad[owner[1:][failed]] = True
            keep = ~bad[owner]
            if not keep.any():
                return [None] * len(sizes)
            ids, counts = ids[np.repeat(keep, counts)], counts[keep]
            starts, ends, owner, free_left = starts[keep], ends[keep], owner[keep], free_left[keep]
            free_left[np.concatenate(([True], owner[1:] != owner[:-1]))] = True
            out, _failed, kept = glue(ids, counts, tok_len, starts, ends, free_left[1:])
            return _by_piece(out, kept, owner, len(sizes), bad)
        if out is not None:
            return _by_piece(out, kept, owner, len(sizes), None)
        # Chunk j joins chunk j + 1 where boundary j failed: each group becomes one chunk.
        group = np.concatenate(([0], np.cumsum(~failed)))
        first = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
        last = np.append(first[1:], len(group)) - 1
        redo = np.flatnonzero(last > first)
        new_starts, new_ends = starts[first], ends[last]
        again = merge_chunks(new_starts[redo], new_ends[redo])
        if again is None:
            return [None] * len(sizes)
        kept_as_is = np.repeat(first == last, last - first + 1)  # the chunks merged as they were
        new_counts = np.zeros(len(first), dtype=np.int64)
        new_counts[first == last] = counts[kept_as_is]
        new_counts[redo] = again[1]
        new_ids = np.empty(int(new_counts.sum()), dtype=np.int64)
        new_first = np.cumsum(new_counts) - new_counts  # each new chunk's first id
        as_is = np.flatnonzero(first == last)
        new_ids[ranges(new_first[as_is], new_counts[as_is])] = ids[np.repeat(kept_as_is, counts)]
        new_ids[ranges(new_first[redo], new_counts[redo])] = again[0]
        got, starts, ends, owner, free_left = (new_ids, new_counts), new_starts, new_ends, owner[first], \
            free_left[first]
    return [None] * len(sizes)  # (not reached: the last attempt returns above)


def _by_piece(out: np.ndarray, kept, owner: np.ndarray, n: int, bad) -> list:
    """glue's ids cut into each piece's (kept: each chunk's ids in out), None for a bad piece."""
    if n == 1:
        return [None if bad is not None and bad[0] else out]
    per_piece = np.bincount(owner, weights=kept, minlength=n).astype(np.int64)
    cut = np.split(out, np.cumsum(per_piece)[:-1])
    return [None if bad is not None and bad[p] else cut[p] for p in range(n)]


def glue(ids: np.ndarray, counts: np.ndarray, tok_len: np.ndarray, starts: np.ndarray,
         ends: np.ndarray, free: np.ndarray | None = None):
    """(the whole piece's ids, or None when some neighbouring chunks share no token; which
    boundaries share none; how many of each chunk's ids the first item holds) from each chunk's
    ids (back to back, counts per chunk; tok_len: byte length of every token id); the third is
    None without free. Boundary b lies between chunks b and b + 1; where free[b], chunk b + 1
    starts where chunk b ends (two pieces back to back) and both keep all of their ids there.

    Only the tokens inside an overlap are looked at: the chunks' symbols back to back are where
    their tokens' ends ascend, so two binary searches per boundary find them (a few per chunk),
    the shared ones are found by a binary search of one side's names among the other's, and
    each chunk's ids are cut by a mask that drops its few ids outside its glued span. Naming
    every token of every chunk, sorting the names, and keeping ids by a running sum of marks
    took about twice as long: the glue calls of cold calls over utf8seq.txt, replayed with equal
    outputs, min of 10 (alternated): Llama 3 21.1 -> 13.5 ms, Qwen3 14.5 -> 7.7, GPT-4o 22.3 -> 12.9.
    Many chunks are glued GLUE_CHUNKS boundaries at a time (_spans), so that one block's arrays
    serve the next instead of fresh pages for all at once (a page's first touch costs ~2.6 us on
    this VM): the second and third cold calls of 4 processes over utf8seq.txt, alternated,
    Llama 3 58.5-65 -> 55.9-64 ms (and one of 75.7), page faults 4.5-5.7K -> 3.2-3.3K; Qwen3
    70-77 -> 67-81 ms, 3.1-5.7K -> 3.5-4.3K; 10^6 random letters within noise."""
    n_chunks = len(counts)
    if n_chunks == 1:
        return ids, np.ones(0, dtype=bool), counts
    first = np.cumsum(counts) - counts  # chunk k's first id
    if n_chunks <= GLUE_CHUNKS + 1:
        failed, begin, end = _spans(ids, counts, first, tok_len, starts, ends, free)
    else:
        # Blocks of GLUE_CHUNKS boundaries, each with the chunks on both sides of them: a chunk
        # at a block's edge takes its begin from the block before (where it is last) and its end
        # from the block after (where it is first).
        failed = np.empty(n_chunks - 1, dtype=bool)
        begin, end = np.empty(n_chunks, dtype=np.int64), np.empty(n_chunks, dtype=np.int64)
        for a in range(0, n_chunks - 1, GLUE_CHUNKS):
            b = min(a + GLUE_CHUNKS, n_chunks - 1)  # chunks a..b, boundaries a..b - 1
            lo = int(first[a])
            f, bg, en = _spans(ids[lo:int(first[b] + counts[b])], counts[a:b + 1], first[a:b + 1] - lo, tok_len,
                               starts[a:b + 1], ends[a:b + 1], None if free is None else free[a:b])
            failed[a:b] = f
            begin[a + (a > 0):b + 1] = bg[(a > 0):] + lo
            end[a:b + (b == n_chunks - 1)] = en[:len(en) - (b < n_chunks - 1)] + lo
        end = np.maximum(end, begin)
    if failed.any():
        return None, failed, None
    keep = np.ones(len(ids), dtype=bool)
    keep[ranges(first, begin - first)] = False
    keep[ranges(end, first + counts - end)] = False
    return ids[keep], failed, (None if free is None else end - begin)


def _spans(ids: np.ndarray, counts: np.ndarray, first: np.ndarray, tok_len: np.ndarray, starts: np.ndarray,
           ends: np.ndarray, free: np.ndarray | None):
    """glue's work for two chunks or more: (which boundaries share no token, each chunk's first
    kept id, one past its last; both as indices into ids). first: each chunk's first id."""
    n_chunks = len(counts)
    failed = np.ones(n_chunks - 1, dtype=bool)
    size = ends - starts
    base = np.cumsum(size) - size  # where chunk k's symbols start, with the chunks back to back
    cend = np.cumsum(tok_len[ids], dtype=np.int64)  # where each token ends there (ascending)
    # Chunk b offers its tokens that start inside chunk b + 1 (those after the first one that
    # ends at or past that start), chunk b + 1 its tokens that end inside chunk b.
    a_from = np.searchsorted(cend, base[:-1] + (starts[1:] - starts[:-1])) + 1
    a_len = np.maximum(first[1:] - a_from, 0)
    b_len = np.maximum(np.searchsorted(cend, base[1:] + (ends[:-1] - starts[1:]), side="right") - first[1:], 0)
    bounds = np.arange(n_chunks - 1, dtype=np.int64)
    a, ba = ranges(a_from, a_len), np.repeat(bounds, a_len)
    b, bb = ranges(first[1:], b_len), np.repeat(bounds, b_len)
    # A token is named by (boundary, its end relative to chunk b + 1's start, id): equal names
    # are a shared token. Each side's names ascend (by boundary, then end), so chunk b + 1's
    # are looked up among chunk b's by one binary search, and the first found per boundary is
    # the leftmost shared token.
    name_a = (ba << 40) | ((cend[a] + (starts[:-1] - starts[1:] - base[:-1])[ba]) << 24) | ids[a]
    name_b = (bb << 40) | ((cend[b] - base[1:][bb]) << 24) | ids[b]
    at = np.minimum(np.searchsorted(name_a, name_b), max(len(name_a) - 1, 0))
    hit = np.flatnonzero(name_a[at] == name_b) if len(name_a) else at[:0]
    bound = bb[hit]
    leftmost = np.concatenate(([True], bound[1:] != bound[:-1]))[:len(bound)]
    hit, bound = hit[leftmost], bound[leftmost]
    failed[bound] = False
    if free is not None:  # (no shared token there: each side keeps all of its ids)
        failed[free] = False
    # Chunk k keeps its ids after the token it shares with chunk k - 1, up to and including the
    # one it shares with chunk k + 1 (none of them where those would cross: a chunk shorter than
    # its two overlaps).
    begin, end = first.copy(), first + counts
    end[bound] = a[at[hit]] + 1  # the shared token's index in chunk b's ids
    begin[bound + 1] = b[hit] + 1  # ... and in chunk b + 1's
    return failed, begin, np.maximum(end, begin)
