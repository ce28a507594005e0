"""SentencePiece BPE merged by numpy: many short runs in one batch, a long run as glued chunks.

SentencePiece's BPE (spm.SentencePiece._bpe) is a Python heap merge, ~1-2 us a symbol: 10^6
random letters took 1.9 s under mistral-v3 (sentencepiece: 0.15 s), and a first call over
code.txt 1.5 s. The numpy batch merge (bpe_batch.BatchMerger) needs a merge table, which
SentencePiece's BPE has none of: `pair_table` derives one from the pieces (on first need, see
spm._table_for). Then a call's distinct short runs merge as the words of one batch
(merge_words), and a long run is cut into overlapping chunks (bpe_chunks.py) merged in one batch
and glued (merge_run; runs of one char: spm._bpe_run).

Why the table is SentencePiece's BPE. The heap merges the adjacent pair of symbols whose
concatenation is a kept piece (normal, user-defined or unused) with the highest score, the
leftmost of equal ones. Every symbol is a kept piece or a single char, so when every char of every
kept piece (but the user-defined symbols, see below) is itself a kept piece, the pairs that can
ever merge are exactly the splits of kept pieces into two kept pieces: the table lists each split
as (left id, right id) -> result, ranked by the result's score, highest first. Splits of one
result share its rank, and the batch merge takes equal ranks leftmost first, as the heap does.
Two different results with one score would need that rule across them, which a rank cannot give:
those results ("ties") get ranks apart, and a word holding any of their strings (so that they
could both be candidates) goes to the heap. Unless the ties are runs of one char merged after
every other result (mistral-v3's 2-16 U+2581 at -1e9, _last_block): they are left out of the
table and each run of that char is merged afterwards, by its length (PairTable._blocks). A word
holding a user-defined symbol (frozen by the heap) goes to the heap too, and the table is not
built where pieces are unused (resegmented after the merge: the caller's cut needs none) or a
score is NaN. Chunks glue as bpe_chunks.py says for sequential BPE with ranks; where they do not,
the run is left to the heap. Either way the ids are SentencePiece's.
"""

from __future__ import annotations

import numpy as np

from .bpe_batch import BatchMerger
from .bpe_chunks import merge_piece, worth_chunking

MAX_TIES = 64  # more results sharing a score than this: no table (words holding any go to the heap)


class PairTable:
    """The merge table pair_table derives, with the strings a word it merges must not hold: the
    tied results and the user-defined symbols."""

    def __init__(self, merger: BatchMerger, ties: list[str], user, block=None):
        self.merger, self.ties = merger, ties
        self.block = block  # (id of the char u, n -> ids of n u) when runs of u merge last (_last_block)
        self._block_ids: dict[int, tuple[int, ...]] = {}
        self.banned = sorted(set(ties) | set(user), key=len, reverse=True)
        # One scan of the words joined by NUL finds the words holding any (a NUL in a banned
        # string: each word is scanned for each string instead).
        self._rx = None
        if self.banned and not any("\0" in b for b in self.banned):
            import re

            self._rx = re.compile("|".join(map(re.escape, self.banned)))

    def merge(self, sym: np.ndarray, lengths: np.ndarray):
        """(ids, count per word) of the batch merge of these words, with runs of u merged last."""
        ids, counts = self.merger.merge(sym, lengths)
        ids = ids.astype(np.int64)
        if self.block is not None:
            ids, counts = self._blocks(ids, counts)
        return ids, counts

    def _blocks(self, ids: np.ndarray, counts: np.ndarray):
        """Each run of two or more single u symbols in a word replaced by the heap's ids of that
        many u (memoised by length)."""
        u, heap = self.block
        is_u = ids == u
        if not is_u.any():
            return ids, counts
        word = np.repeat(np.arange(len(counts)), counts)
        start = is_u.copy()
        start[1:] &= ~(is_u[:-1] & (word[1:] == word[:-1]))
        run = np.cumsum(start) - 1  # (each u symbol's run)
        length = np.bincount(run[is_u])
        if length.max() < 2:
            return ids, counts
        emit = np.ones(len(ids), np.int64)  # ids each symbol becomes
        first = np.flatnonzero(start)
        long = length >= 2
        emit[is_u & long[np.maximum(run, 0)]] = 0
        got = self._block_ids
        blocks = []
        for n in length[long].tolist():
            if n not in got:
                got[n] = tuple(heap(n))
            blocks.append(got[n])
        emit[first[long]] = [len(b) for b in blocks]
        out = np.repeat(ids, emit)
        at = np.cumsum(emit) - emit
        for k, b in zip(first[long].tolist(), blocks):
            out[at[k]:at[k] + len(b)] = b
        return out, np.bincount(word, weights=emit, minlength=len(counts)).astype(np.int64)

    def holds_banned(self, w: str) -> bool:
        return any(b in w for b in self.banned)

    def banned_words(self, words: list[str], n_chars: np.ndarray) -> np.ndarray:
        """Which words hold a banned string (bool per word)."""
        out = np.zeros(len(words), bool)
        if not self.banned:
            return out
        if self._rx is None:
            out[:] = [self.holds_banned(w) for w in words]
            return out
        at = [m.start() for m in self._rx.finditer("\0".join(words))]
        if at:
            starts = np.cumsum(n_chars + 1) - (n_chars + 1)  # each word's start in the joined text
            out[np.searchsorted(starts, at, side="right") - 1] = True
        return out


def pair_table(pieces: dict[str, int], scores, user=(), heap=None) -> PairTable | None:
    """The merge table of SentencePiece's BPE over `pieces` (kept piece -> id; scores: by id), or
    None where it would not be exact (see the top); user: the user-defined symbols; heap(text):
    SentencePiece's BPE ids of a text (_last_block's runs)."""
    # (a user-defined symbol's chars need not be pieces: a word holding it is refused, and no other
    # merge can make it)
    chars = set("".join(pieces.keys() - set(user) if user else pieces))  # (C-level: one join, one set)
    if not all(map(pieces.__contains__, chars)):
        return None
    got = _splits(pieces)
    if got is None:  # (pieces whose hashes collide: each split looked up by string)
        got = _splits_by_dict(pieces)
    left, right, results = got
    keys = (left.astype(np.uint64) << np.uint64(32)) | right.astype(np.uint64)
    order = np.argsort(keys)
    keys, results = keys[order], results[order]
    res_ids = np.unique(results)
    res_scores = np.asarray(scores, dtype=np.float64)[res_ids]
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
    strs = dict(zip(pieces.values(), pieces))  # id -> piece
    ties = [strs[i] for i in res_ids[tied].tolist()]
    rank_by_id = np.zeros(int(res_ids[-1]) + 1 if len(res_ids) else 0, np.int64)  # (ids: a direct map)
    rank_by_id[res_ids] = rank_of
    ranks = rank_by_id[results]
    block = None
    if ties and heap is not None and _last_block(ties, res_scores, tied, map(strs.__getitem__, res_ids[~tied].tolist())):
        # The tied results are one char's runs, merged after every other: left out of the table,
        # they are merged afterwards, run by run (PairTable._blocks).
        keep = ~np.isin(results, res_ids[tied])
        keys, ranks, results = keys[keep], ranks[keep], results[keep]
        block = (pieces[ties[0][0]], lambda n, u=ties[0][0]: heap(u * n))
        ties = []
    merger = BatchMerger(keys.astype("<u8").tobytes(), ranks.astype("<u4").tobytes(), results.astype("<u4").tobytes())
    return PairTable(merger, ties, user, block)


_HASH_B = 0x9E3779B97F4A7C15  # odd: invertible modulo 2^64


def _splits(pieces: dict[str, int]):
    """Every split of a piece into two pieces, as (left ids, right ids, result ids) int64 arrays in
    no particular order; None when two pieces' hashes collide. Polynomial hashes modulo 2^64 of
    every prefix and suffix of every piece come from one cumulative sum (each char weighted by
    B^-position), are looked up among the pieces' own hashes, and each candidate is then checked
    char by char, so a collision never counts. A Python pass over the splits (two dict lookups
    each) took ~0.1 s for Mistral's 32K pieces, on the first call that batch-merges."""
    from .bpe_batch import sorted_search
    from .textparts import ranges

    strs = list(pieces)
    ids = np.fromiter(pieces.values(), np.int64, len(strs))
    lens = np.fromiter(map(len, strs), np.int64, len(strs))
    if not len(strs) or int(lens.min()) < 1:
        return None
    cps = np.frombuffer("".join(strs).encode("utf-32-le", "surrogatepass"), "<u4").astype(np.uint64)
    starts = np.cumsum(lens) - lens
    top = int(lens.max()) + 1
    b_pow = np.full(top, _HASH_B, np.uint64)
    b_pow[0] = 1
    b_inv = np.full(top, pow(_HASH_B, -1, 1 << 64), np.uint64)
    b_inv[0] = 1
    with np.errstate(over="ignore"):
        b_pow, b_inv = np.cumprod(b_pow), np.cumprod(b_inv)  # (uint64 products wrap: modulo 2^64)
        pos = np.arange(len(cps), dtype=np.int64) - np.repeat(starts, lens)
        acc = np.zeros(len(cps) + 1, np.uint64)
        np.cumsum(cps * b_inv[pos], out=acc[1:])  # acc[j]: sum of c * B^-position before char j

        full = b_pow[lens - 1] * (acc[starts + lens] - acc[starts])
        order = np.argsort(full)
        table = full[order]
        if len(table) > 1 and bool((table[1:] == table[:-1]).any()):
            return None
        piece = np.flatnonzero(lens > 1)
        n_split = lens[piece] - 1
        owner = np.repeat(piece, n_split)
        k = ranges(np.ones(len(piece), np.int64), n_split)  # 1 .. len - 1 for each piece
        first, length = starts[owner], lens[owner]
        pre = (acc[first + k] - acc[first]) * b_pow[k - 1]

    def lookup(h):  # each hash's piece (index into strs), -1 for none
        if not len(h):
            return np.zeros(0, np.int64)
        at = np.minimum(sorted_search(table, h), len(table) - 1)  # (in ascending order: ~2x random probes)
        return np.where(table[at] == h, order[at], -1)

    # Prefixes first; the suffixes only of the splits whose prefix is a piece of that length.
    a = lookup(pre)
    c = np.flatnonzero(a >= 0)
    c = c[lens[a[c]] == k[c]]
    a, owner, k, first, length = a[c], owner[c], k[c], first[c], length[c]
    with np.errstate(over="ignore"):
        suf = (acc[first + length] - acc[first + k]) * b_pow[length - 1]
    b = lookup(suf)
    c = np.flatnonzero(b >= 0)
    c = c[lens[b[c]] == (length - k)[c]]
    a, b, owner, k, first, length = a[c], b[c], owner[c], k[c], first[c], length[c]
    # Char by char: the prefix against piece a, the suffix against piece b.
    bad = np.zeros(len(c), bool)
    for src, ref, n in ((first, starts[a], k), (first + k, starts[b], length - k)):
        differ = cps[ranges(src, n)] != cps[ranges(ref, n)]
        if differ.any():
            bad[np.repeat(np.arange(len(c)), n)[differ]] = True
    keep = ~bad
    return ids[a[keep]], ids[b[keep]], ids[owner[keep]]


def _splits_by_dict(pieces: dict[str, int]):
    """_splits by one Python pass over the splits, each half looked up in the dict."""
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
    return np.array(left, np.int64), np.array(right, np.int64), np.array(result, np.int64)


def _last_block(ties: list[str], res_scores: np.ndarray, tied: np.ndarray, others) -> bool:
    """Whether the tied results are runs of one char u (mistral-v3: 2-16 U+2581 at -1e9) that
    SentencePiece merges only after every other merge: one score, below every other result's,
    and no other result holds uu. Then a word's merges are the others' first, then the ties'
    over each run of single u symbols left (no other merge can start after one of theirs), and
    those depend on the run's length alone."""
    u = ties[0][0]
    if any(t.strip(u) for t in ties) or len(set(res_scores[tied].tolist())) != 1:
        return False
    if (~tied).any() and res_scores[~tied].min() <= res_scores[tied][0]:
        return False
    if u == "\0":
        return not any(u + u in p for p in others)
    return u + u not in "\0".join(others)  # (NUL between them: uu across two is no piece's)


def _symbols(text: str, pieces: dict[str, int], unk: int) -> np.ndarray:
    """Each char's piece id (unk where it is none), each distinct char looked up once (np.unique:
    10^6 random letters or CJK ideographs ~28 ms, against ~50 for a dict lookup per char)."""
    cps = np.frombuffer(text.encode("utf-32-le"), "<u4")
    chars, which = np.unique(cps, return_inverse=True)
    return np.array([pieces.get(chr(c), unk) for c in chars.tolist()], np.int32)[which]


def merge_words(table: PairTable, words: list[str], n_chars: list[int], pieces: dict[str, int], unk: int,
                finish) -> list:
    """BPE ids of each word (distinct short runs) by one batch merge, None for a word holding a
    banned string (the caller's heap merges it). finish(ids, counts, text): spm's unknown-piece
    rule over the merged words back to back (finish_words)."""
    lengths = np.array(n_chars, np.int64)
    banned = table.banned_words(words, lengths)
    ok = np.flatnonzero(~banned)
    out: list = [None] * len(words)
    if not len(ok):
        return out
    if len(ok) < len(words):
        words = [words[k] for k in ok.tolist()]
        lengths = lengths[ok]
    text = "".join(words)
    ids, counts = table.merge(_symbols(text, pieces, unk), lengths)
    ids, counts = finish(ids, counts, text)
    from .textparts import tuples

    parts = tuples(ids, np.cumsum(counts) - counts, counts)
    if len(ok) == len(out):
        return parts
    for slot, val in zip(ok.tolist(), parts):
        out[slot] = val
    return out


def merge_run(table: PairTable, w: str, pieces: dict[str, int], unk: int, tok_len: np.ndarray):
    """BPE ids of w as glued chunks merged by table (unknown chars: unk, one char each), or None
    when w holds a banned string (a tied result or a user-defined symbol), is mostly runs of one
    char ("aaaa": spm._bpe_run's, or the heap's), or its chunks do not glue. tok_len: every
    id's length in chars."""
    if table.holds_banned(w):
        return None
    if not worth_chunking(np.frombuffer(w.encode("utf-32-le"), "<u4")):
        return None
    sym = _symbols(w, pieces, unk)
    merge = table.merger.merge

    def merge_chunks(starts, ends):
        lengths = ends - starts
        idx = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
        final, counts = merge(sym[idx], lengths)
        return final.astype(np.int64), counts

    got = merge_piece(len(w), None, merge_chunks, tok_len)
    if got is None or table.block is None:
        return got
    return table._blocks(got, np.array([len(got)]))[0]  # (the chunks glue by the other merges)


def finish_words(ids: np.ndarray, counts: np.ndarray, text: str, tok_len: np.ndarray, unk: int,
                 byte_fallback: bool, byte_ids: list[int]):
    """spm.SentencePiece._finish of each of several words merged back to back (ids, counts: per
    word; text: the words joined), where every unknown piece (unk) is one char: with byte
    fallback its UTF-8 bytes' ids, else a run of unknowns within a word collapsed to one unk.
    (ids, counts) after it. In numpy: 10^6 random letters under a model without capitals,
    957K tokens, took the per-token loop ~380 ms."""
    is_unk = ids == unk
    if not is_unk.any():
        return ids, counts
    if not byte_fallback:
        keep = np.ones(len(ids), bool)
        keep[1:] = ~(is_unk[1:] & is_unk[:-1])
        keep[np.cumsum(counts)[:-1]] = True  # (a word's first id: the word before is apart)
        word = np.repeat(np.arange(len(counts)), counts)
        return ids[keep], np.bincount(word[keep], minlength=len(counts)).astype(np.int64)
    from .textparts import ranges

    raw = np.frombuffer(text.encode("utf-8"), np.uint8)
    lead = np.append(np.flatnonzero((raw & 0xC0) != 0x80), len(raw))  # each char's first byte
    at = np.flatnonzero(is_unk)
    sizes = tok_len[ids]
    char = (np.cumsum(sizes) - sizes)[at]  # each unknown's char
    first, width = lead[char], lead[char + 1] - lead[char]
    per_id = np.ones(len(ids), np.int64)
    per_id[at] = width
    begin = np.cumsum(per_id) - per_id
    out = np.empty(int(per_id.sum()), np.int64)
    known = np.flatnonzero(~is_unk)
    out[begin[known]] = ids[known]
    out[ranges(begin[at], width)] = np.array(byte_ids, np.int64)[raw[ranges(first, width)]]
    word_ends = np.cumsum(counts)
    new_ends = np.concatenate(([0], np.cumsum(per_id)))[word_ends]
    return out, np.diff(np.concatenate(([0], new_ends)))
