"""SentencePiece BPE over a long run that is not one char repeated: glued chunks, merged by numpy.

SentencePiece's BPE (spm.SentencePiece._bpe) is a Python heap merge, ~2 us a symbol: 10^6 random
letters took 1.9 s under mistral-v3, where sentencepiece takes 0.15 s. Such a run is cut into
overlapping chunks (bpe_chunks.py) that are all merged at once by the numpy batch merge
(bpe_batch.BatchMerger), which needs a merge table: SentencePiece's BPE has none, so `pair_table`
derives one from the pieces on the first such run (runs of one char: spm._bpe_run).

Why the table is SentencePiece's BPE. The heap merges the adjacent pair of symbols whose
concatenation is a kept piece (normal, user-defined or unused) with the highest score, the
leftmost of equal ones. Every symbol is a kept piece or a single char, so when every char of every
kept piece is itself a kept piece, the pairs that can ever merge are exactly the splits of kept
pieces into two kept pieces: the table lists each split as (left id, right id) -> result, ranked
by the result's score, highest first. Splits of one result share its rank, and the batch merge
takes equal ranks leftmost first, as the heap does. Two different results with one score would
need that rule across them, which a rank cannot give: those results ("ties") get ranks apart, and
a run holding any of their strings (so that they could both be candidates) is refused. So is a
run holding a user-defined symbol (frozen by the heap), and the table is not built where pieces
are unused (resegmented after the merge: the caller's cut needs none) or a score is NaN.
The chunks glue as bpe_chunks.py says for sequential BPE with ranks; where they do not, the
run is left to the heap. Either way the ids are SentencePiece's.
"""

from __future__ import annotations

import numpy as np

from .bpe_batch import BatchMerger
from .bpe_chunks import merge_piece, worth_chunking

MAX_TIES = 64  # more results sharing a score than this: no table (each is a substring scan per run)


class PairTable:
    """The merge table pair_table derives, with the strings of the tied results."""

    def __init__(self, merger: BatchMerger, ties: list[str]):
        self.merger, self.ties = merger, ties


def pair_table(pieces: dict[str, int], scores) -> PairTable | None:
    """The merge table of SentencePiece's BPE over `pieces` (kept piece -> id; scores: by id), or
    None where it would not be exact (see the top)."""
    chars = set().union(*pieces) if pieces else set()
    if not all(c in pieces for c in chars):
        return None
    get = pieces.get
    left, right, result = [], [], []
    for p, i in pieces.items():
        for k in range(1, len(p)):
            a = get(p[:k])
            if a is not None:
                b = get(p[k:])
                if b is not None:
                    left.append(a)
                    right.append(b)
                    result.append(i)
    keys = (np.array(left, np.uint64) << np.uint64(32)) | np.array(right, np.uint64)
    results = np.array(result, np.int64)
    order = np.argsort(keys)
    keys, results = keys[order], results[order]
    res_ids = np.unique(results)
    res_scores = np.array([scores[i] for i in res_ids.tolist()], np.float64)
    if np.isnan(res_scores).any():
        return None
    # Highest score first; tied results get ranks apart (ordered by id) and are listed.
    by_rank = np.lexsort((res_ids, -res_scores))
    rank_of = np.empty(len(res_ids), np.int64)
    rank_of[by_rank] = np.arange(len(res_ids))
    sorted_scores = res_scores[by_rank]
    tied = np.zeros(len(res_ids), bool)
    same = sorted_scores[1:] == sorted_scores[:-1]
    tied[by_rank[1:][same]] = True
    tied[by_rank[:-1][same]] = True
    if np.count_nonzero(tied) > MAX_TIES:
        return None
    strs = {i: p for p, i in pieces.items()}
    ties = [strs[i] for i in res_ids[tied].tolist()]
    ranks = rank_of[np.searchsorted(res_ids, results)]
    merger = BatchMerger(keys.astype("<u8").tobytes(), ranks.astype("<u4").tobytes(), results.astype("<u4").tobytes())
    return PairTable(merger, ties)


def merge_run(table: PairTable, w: str, pieces: dict[str, int], user, unk: int, tok_len: np.ndarray):
    """BPE ids of w as glued chunks merged by table (unknown chars: unk, one char each), or None
    when w holds a tied result or a user-defined symbol, is mostly runs of one char ("aaaa":
    spm._bpe_run's, or the heap's), or its chunks do not glue. tok_len: every id's length in chars."""
    if any(t in w for t in table.ties) or any(u in w for u in user):
        return None
    cps = np.frombuffer(w.encode("utf-32-le"), "<u4")
    if not worth_chunking(cps):
        return None
    # Each distinct char's id once (np.unique: 10^6 random letters or CJK ideographs ~28 ms,
    # against ~50 for a dict lookup per char).
    chars, which = np.unique(cps, return_inverse=True)
    sym = np.array([pieces.get(chr(c), unk) for c in chars.tolist()], np.int32)[which]
    merge = table.merger.merge

    def merge_chunks(starts, ends):
        lengths = ends - starts
        idx = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
        final, counts = merge(sym[idx], lengths)
        return final.astype(np.int64), counts

    return merge_piece(len(w), None, merge_chunks, tok_len)


def finish_ids(got: np.ndarray, w: str, tok_len: np.ndarray, unk: int, byte_fallback: bool,
               byte_ids: list[int]) -> list[int]:
    """spm.SentencePiece._finish of the glued ids of w (tok_len: every id's length in chars), where
    every unknown piece (unk) is one char: with byte fallback its UTF-8 bytes' ids, else a run
    of unknowns collapsed to one unk. In numpy: 10^6 random letters under a model without
    capitals, 957K tokens, took the per-token loop ~380 ms."""
    is_unk = got == unk
    if not is_unk.any():
        return got.tolist()
    if not byte_fallback:
        keep = np.ones(len(got), bool)
        keep[1:] = ~(is_unk[1:] & is_unk[:-1])
        return got[keep].tolist()
    from .textparts import ranges

    raw = np.frombuffer(w.encode("utf-8"), np.uint8)
    lead = np.append(np.flatnonzero((raw & 0xC0) != 0x80), len(raw))  # each char's first byte
    at = np.flatnonzero(is_unk)
    sizes = tok_len[got]
    char = (np.cumsum(sizes) - sizes)[at]  # each unknown's char
    first, width = lead[char], lead[char + 1] - lead[char]
    counts = np.ones(len(got), np.int64)
    counts[at] = width
    begin = np.cumsum(counts) - counts
    out = np.empty(int(counts.sum()), np.int64)
    known = np.flatnonzero(~is_unk)
    out[begin[known]] = got[known]
    out[ranges(begin[at], width)] = np.array(byte_ids, np.int64)[raw[ranges(first, width)]]
    return out.tolist()
