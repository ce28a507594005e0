"""SentencePiece Unigram's run-by-run pass in numpy (spm.py's _unigram_follow for many runs).

A text's runs (cut at each "\u2581") are decoded once each and remembered with their node scores
(spm.py: _unigram_word); a whole text then follows the score X its float32 lattice reaches,
run by run: at a run's start X is rebased to 0 past RESET, and the run's remembered ids hold
when its scores stay within RESET and its choices win by more than the float32 rounding at the
magnitude it reaches; X then moves by the run's node scores, summed in float32. Any other run is
decoded from X in Python (spm.py: _unigram), which sets X anew.

Here X is one float32 cumulative sum over the runs' node scores, a block of runs at a time:
np.cumsum over float32 adds in order and rounds each sum to float32, as the Python loop's
f32(x + score) does (a double holds the exact sum of two floats' roundings: no double
rounding). A block ends before the first run whose X needs a rebase and at the first run that
must be decoded; the next block starts from there. The checks are the loop's own double
arithmetic, elementwise.
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter

import numpy as np

BLOCK = 512  # runs whose sums one cumsum takes at most ...
BLOCK_AFTER_FAIL = 16  # ... and after a run that had to be decoded (they come in clusters: code's
# runs of tied spaces), doubling with each block that passes whole


def follow(model, segs: list[str], parts: list, reset: float) -> list:
    """Each run's ids in order (a tuple or list each), as spm.SentencePiece._unigram_follow gives
    them; parts: (ids, slack, node scores) per run, from _unigram_cached."""
    n = len(segs)
    slack = np.fromiter(map(itemgetter(1), parts), dtype=np.float64, count=n)
    paths = list(map(itemgetter(2), parts))
    plen = np.fromiter(map(len, paths), dtype=np.int64, count=n)
    flat = np.fromiter(chain.from_iterable(paths), dtype=np.float32, count=int(plen.sum()))
    chars = np.fromiter(map(len, segs), dtype=np.float64, count=n)
    pend = np.cumsum(plen)
    pstart = pend - plen
    width = 1.001 * model.max_abs_score  # (the most a node moves the score, with its rounding)
    x = 0.0
    k = 0
    out: list = []
    block = BLOCK
    while k < n:
        if x < -reset or x > reset:
            x = 0.0  # (the rebase at the cut)
        b = min(n, k + block)
        a0 = int(pstart[k])
        sums = np.empty(int(pend[b - 1]) - a0 + 1, dtype=np.float32)
        sums[0] = x
        sums[1:] = flat[a0:int(pend[b - 1])]
        np.cumsum(sums, out=sums)
        xs = sums[pstart[k:b] - a0].astype(np.float64)  # X where each run starts
        over = np.flatnonzero(np.abs(xs[1:]) > reset)
        limit = int(over[0]) + 1 if len(over) else b - k  # (a rebase: the next block starts there)
        reach = 1.001 * np.abs(xs[:limit]) + chars[k:k + limit] * width
        holds = (reach < reset) & (slack[k:k + limit] > np.ldexp(1.0, np.frexp(reach)[1] - 24))
        fails = np.flatnonzero(~holds)
        m = int(fails[0]) if len(fails) else limit
        passed = m == limit
        if m:
            out.extend(map(itemgetter(0), parts[k:k + m]))
            x = float(sums[int(pend[k + m - 1]) - a0])
            k += m
        if passed:
            block = min(BLOCK, 2 * block)
        else:  # run k is decoded from X
            pieces, x = model._unigram(segs[k], x)
            out.append(model._finish(pieces))
            k += 1
            block = BLOCK_AFTER_FAIL
    return out
