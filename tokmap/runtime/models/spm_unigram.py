"""SentencePiece Unigram in numpy, for spm.py: many distinct runs decoded at once (words), and a
long text's run-by-run pass over them (follow).

words: a call's new runs (cut at each "\u2581", up to DP_CHARS chars) through one
unigram_batch.Lattice of the pieces the scalar lattice matches; Viterbi in double arithmetic over
the start positions, with _unigram_word's rules, gives each run its ids, slack and node scores.

follow: a whole text follows the score X its float32 lattice reaches, run by run: at a run's
start X is rebased to 0 past RESET, and the run's remembered ids hold when its scores stay within
RESET and its choices win by more than the float32 rounding at the magnitude it reaches; X then
moves by the run's node scores, summed in float32. Any other run is decoded from X in Python
(spm.py: _unigram), which sets X anew. Here X is one float32 cumulative sum over the runs' node
scores, a block of runs at a time: np.cumsum over float32 adds in order and rounds each sum to
float32, which is what the loop's f32(x + score) gives (its double sum of two floats, rounded to
float, equals the float sum: double rounding is harmless for an add). A block ends before the
first run whose X needs a rebase and at the first run that must be decoded; the next block
starts from there. The checks are the loop's own double arithmetic, elementwise.
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


# -- many distinct runs at once ------------------------------------------------------------------
DP_CHARS = 64  # runs up to this long go through words()' Viterbi steps; longer ones, the scalar lattice


def lattice(model):
    """unigram_batch.Lattice of the pieces the scalar lattice matches (model.pieces but the
    UNUSED ones), scored as its nodes are (user-defined: 0.1 x (bytes - 1), in float32); False
    when the pieces cannot be hashed apart."""
    from .spm import UNUSED, USER_DEFINED, f32
    from .unigram_batch import Lattice, Unusable

    types = model.types
    strings = [""] * model.n
    scores = np.array(model.scores.tolist(), dtype=np.float64)
    for s, pid in model.pieces.items():
        t = types[pid]
        if t != UNUSED:
            strings[pid] = s
            if t == USER_DEFINED:
                scores[pid] = f32(0.1 * (len(s.encode("utf-8")) - 1))
    scores[[k for k, s in enumerate(strings) if not s]] = 0.0  # (no piece: never a node)
    try:
        return Lattice.from_strings(strings, scores, model.max_len)
    except Unusable:
        return False


def words(model, lat, runs: list[str]) -> list:
    """spm.SentencePiece._unigram_word of each run (non-empty, at most DP_CHARS chars; a longer
    one gets None, for the caller to decode). The same lattice in double arithmetic: candidates
    and unk nodes from lat, the starts taken in order with every candidate relaxing its end node (the scalar loop
    visits starts, then lengths, in ascending order: a node's first candidate sets it, a greater
    one takes over and leaves the old best as second, another raises second), and each run's
    path, slack (its smallest winning margin / 2n) and node scores read back at once."""
    from .textparts import tuples
    from .unigram_batch import backtrack

    nw = len(runs)
    if not nw:
        return []
    _joined, nch, wstart, bad, (cs, cl, cid, cw, score) = lat.candidates(runs, model.unk_id, model.unk_score)
    bad |= nch > DP_CHARS
    keep = np.flatnonzero(~bad[cw])
    cs, cl, cid, cw, score = cs[keep], cl[keep], cid[keep], cw[keep], score[keep]
    start_node = cs + cw  # (run w's positions 0..nch[w]: nodes wstart[w] + w + 0..nch[w])
    local = (cs - wstart[cw]).astype(np.uint8)  # (< DP_CHARS: a radix sort)
    order = np.argsort(local, kind="stable")
    start_node, cid, score = start_node[order], cid[order], score[order]
    end_node = start_node + cl[order]
    total = int(nch.sum()) + nw
    heads = wstart + np.arange(nw)
    best = np.full(total, -np.inf)
    best[heads] = 0.0
    second = np.full(total, -np.inf)
    from_node = np.zeros(total, dtype=np.int64)
    node_id = np.zeros(total, dtype=np.int64)
    node_sc = np.zeros(total, dtype=np.float64)
    bounds = np.concatenate(([0], np.cumsum(np.bincount(local, minlength=DP_CHARS)))).tolist()
    for a, b in zip(bounds[:-1], bounds[1:]):
        if a == b:
            continue
        tn, sn, sc = end_node[a:b], start_node[a:b], score[a:b]
        val = best[sn] + sc  # (the scalar loop's sc + here, in double)
        old = best[tn]
        unset = old == -np.inf  # (every sum is finite: max_abs_score is)
        up = val > old
        second[tn] = np.where(unset, second[tn], np.where(up, old, np.maximum(second[tn], val)))
        w = np.flatnonzero(up)  # (an unset node's first candidate beats -inf)
        t = tn[w]
        best[t] = val[w]
        from_node[t] = sn[w]
        node_id[t] = cid[a:b][w]
        node_sc[t] = sc[w]
    good = np.flatnonzero(~bad)
    out: list = [None] * nw
    if not len(good):
        return out
    head = heads[good]
    pw, pn = backtrack(from_node, head, head + nch[good], np.arange(len(good)))
    counts = np.bincount(pw, minlength=len(good))
    starts = np.cumsum(counts) - counts
    margin = np.minimum.reduceat(best[pn] - second[pn], starts)
    slack = (margin / (2 * nch[good])).tolist()
    pid = node_id[pn]
    ids = tuples(pid, starts, counts)
    path = tuples(node_sc[pn], starts, counts)
    unk = model.unk_id
    if (pid == unk).any():  # runs with unknown pieces: byte fallback or their unks collapsed (_finish)
        with_unk = np.zeros(len(good), dtype=bool)
        with_unk[pw[pid == unk]] = True
        ends = (pn - head[pw]).tolist()
        for j in np.flatnonzero(with_unk).tolist():
            run = runs[int(good[j])]
            e = ends[starts[j]:starts[j] + counts[j]]
            ids[j] = tuple(model._finish([(run[s:t], i) for s, t, i in zip([0, *e[:-1]], e, ids[j])]))
    for slot, val in zip(good.tolist(), zip(ids, slack, path)):
        out[slot] = val
    return out
