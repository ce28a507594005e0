"""Runs of the split pattern's D{1,k} alternative, encoded whole (SplitStep.runs, FORMAT.md).

When the exporter proved that every maximal run of D chars (digits) splits into k-char pieces from
its start, the runtime may take such a run as one piece; its ids are then its k-char cuts' ids, as
the pattern's own pieces would have had. A run is remembered in the piece cache under its text,
which no piece of the pattern can equal (its pieces of D chars are at most k long).
"""

from __future__ import annotations

from itertools import chain

from .bpe import batch_pays

RUN_NUMPY = 4096  # chars; a longer run is cut by numpy (long_run_ids) ...
RUN_KEYS = 1 << 22  # ... when this many keys cover every cut its alphabet allows


def run_ids(model, runs) -> dict:
    """Each run the model's piece cache lacks -> the ids of its k-char cuts. runs: (k, set of runs)."""
    k, whole = runs
    cache, out, rest = model.piece_cache, {}, []
    for p in whole:
        if p not in cache:
            ids = long_run_ids(model, p, k) if len(p) >= RUN_NUMPY and batch_pays(len(p)) else None
            if ids is None:
                rest.append(p)
            else:
                out[p] = tuple(ids)
    if rest:  # the cuts of all the others encoded in one call, then each run's gathered
        cuts = [list(map(p.__getitem__, map(slice, range(0, len(p), k), range(k, len(p) + k, k)))) for p in rest]
        model.encode_pieces(list(chain.from_iterable(cuts)))
        for p, c in zip(rest, cuts):
            parts = list(map(cache.get, c))
            if None in parts:  # (the cache was emptied on the way)
                parts = list(map(model.encode_piece, c))
            out[p] = tuple(chain.from_iterable(parts))
    return out


def long_run_ids(model, p: str, k: int) -> list[int] | None:
    """The ids of one long run: its k-char cuts as integer keys over the run's own alphabet, each
    distinct cut encoded once (10^6 digits hold 1,000 distinct among 333,334; a str per cut costs
    ~0.2 us to make), the ids gathered by numpy; None when the alphabet is too big for a table of
    every possible cut (each cut is then a str)."""
    import numpy as np

    m = len(p) // k
    body = p[:m * k]
    size = 256 if body.isascii() else ord(max(body)) + 1
    chars = (np.frombuffer(body.encode("latin-1"), dtype=np.uint8) if size == 256 else
             np.frombuffer(body.encode("utf-32-le", "surrogatepass"), dtype=np.uint32))
    present = np.zeros(size, dtype=bool)
    present[chars] = True
    alphabet = np.flatnonzero(present)
    a = len(alphabet)
    if a ** k > RUN_KEYS:
        return None
    lut = np.zeros(size, dtype=np.int64)
    lut[alphabet] = np.arange(a)
    code = lut[chars].reshape(m, k)
    key = code[:, 0].copy()
    for j in range(1, k):
        key = key * a + code[:, j]
    seen = np.zeros(a ** k, dtype=bool)
    seen[key] = True
    distinct = np.flatnonzero(seen)
    index = np.zeros(a ** k, dtype=np.int64)
    index[distinct] = np.arange(len(distinct))
    which = index[key]
    letters = [chr(c) for c in alphabet.tolist()]
    texts = ["".join(letters[u // a ** (k - 1 - j) % a] for j in range(k)) for u in distinct.tolist()]
    model.encode_pieces(texts)
    got = list(map(model.piece_cache.get, texts))
    if None in got:  # (the cache was emptied on the way)
        got = list(map(model.encode_piece, texts))
    counts = np.fromiter(map(len, got), dtype=np.int64, count=len(got))
    flat = np.fromiter(chain.from_iterable(got), dtype=np.int64, count=int(counts.sum()))
    if (counts == 1).all():
        ids = flat[which].tolist()
    else:
        per = counts[which]
        starts = (np.cumsum(counts) - counts)[which]
        ids = flat[np.repeat(starts - (np.cumsum(per) - per), per) + np.arange(int(per.sum()))].tolist()
    if m * k < len(p):
        ids.extend(model.encode_pieces([p[m * k:]]))
    return ids
