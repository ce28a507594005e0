"""WordPiece for many distinct words at once, with numpy (WordPiece's miss path on a long call).

The scalar path (wordpiece.py) looks each candidate up in a str -> id dict, and building that
dict from the vocabulary costs a first call ~6 ms for BERT's 30K tokens: a fifth of encoding a
250 KiB document. Here the words' UTF-8 bytes are one array, and a round takes every unfinished
word's candidates at once: the next piece starts where the last one ended and ends at any char
boundary, up to the longest token's length. All of them are hashed (bpe_batch.piece_hashes: edge
bytes and length), found in the file's sorted hash tables (every entry in the hash's bucket of
leading bits, so that tokens sharing a hash are all tried) and compared byte for byte with the
vocabulary. As in the
scalar loop, the longest candidate found is the word's next piece, and a word with a position
where none is found becomes one unk.

Tables: piece_hash lists every model token hashed whole (a word's first piece, and a word that
is a token); wordpiece_cont lists the tokens that start with continuing_subword_prefix, hashed
over their bytes after it (each later piece is the prefix + the text at that position).
"""

from __future__ import annotations

import numpy as np

from .bpe_batch import piece_hashes, same_bytes
from .textparts import byte_lengths, ranges, tuples

MAX_BUCKET = 64  # tokens in one hash bucket that the exporter allows (else it writes no tables)


def bucket_bits(n: int) -> int:
    """Leading hash bits that pick a table's bucket: 2-4 buckets an entry (BERT's 30K tokens: 2^16)."""
    return min(max(n.bit_length() + 1, 8), 24)


def bucket_starts(table: np.ndarray) -> np.ndarray:
    """Where each bucket starts in a sorted table (int64, one more than the buckets: the end)."""
    bits = bucket_bits(len(table))
    counts = np.bincount((table >> np.uint64(64 - bits)).astype(np.int64), minlength=1 << bits)
    return np.concatenate((np.zeros(1, dtype=np.int64), np.cumsum(counts)))


class TableError(ValueError):
    """A table's contents are not what the exporter writes; cont says which table."""

    def __init__(self, cont: bool, problem: str):
        super().__init__(problem)
        self.cont = cont


class Tables:
    """A file's two WordPiece hash tables with the views they index, and where each bucket of
    leading hash bits starts in each (a lookup reads its bucket: no binary search). Bad contents
    raise TableError (the caller names the file and section): ids outside the vocabulary or
    offsets past its bytes, a table out of order or with more than MAX_BUCKET entries a bucket."""

    def __init__(self, whole: np.ndarray, cont: np.ndarray, tb: np.ndarray, off: np.ndarray, prefix: bytes):
        self.whole, self.cont, self.tb, self.off = whole, cont, tb, off
        self.prefix = np.frombuffer(prefix, dtype=np.uint8)
        lens = np.diff(off.astype(np.int64))
        self.longest_whole = self._longest(False, lens, 0)
        self.longest_cont = self._longest(True, lens, len(prefix))
        self._whole_first, self._cont_first = self._buckets(False), self._buckets(True)

    def _buckets(self, cont: bool) -> np.ndarray:
        """bucket_starts of one table, refused when a bucket holds more than MAX_BUCKET entries
        (a lookup tries every entry of its bucket) or the table is out of order."""
        table = self.cont if cont else self.whole
        first = bucket_starts(table)
        if len(table) and (int(np.diff(first).max()) > MAX_BUCKET or bool((table[1:] < table[:-1]).any())):
            raise TableError(cont, f"not a sorted hash table of at most {MAX_BUCKET} entries a bucket")
        return first

    def _longest(self, cont: bool, lens, skip: int) -> int:
        """The most bytes a token of the table matches (0 for an empty table)."""
        ids = ((self.cont if cont else self.whole) & np.uint64(0xFFFFFFFF)).astype(np.int64)
        if len(ids) and int(ids.max()) >= len(lens):
            raise TableError(cont, f"token id {int(ids.max())} outside the vocabulary")
        return max(int(lens[ids].max(initial=0)) - skip, 0)

    def find(self, cont: bool, raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """For each candidate raw[starts[k]:starts[k] + lengths[k]] (lengths >= 1), the id of the
        token that is exactly its bytes (cont: the prefix and its bytes), else -1."""
        try:
            return self._find(cont, raw, starts, lengths)
        except ValueError as e:
            raise TableError(cont, str(e)) from None

    def _find(self, cont: bool, raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        table, first = (self.cont, self._cont_first) if cont else (self.whole, self._whole_first)
        out = np.full(len(starts), -1, dtype=np.int64)
        if not len(table) or not len(starts):
            return out
        h = piece_hashes(raw, starts, lengths)
        b = (h >> np.uint64(32 - bucket_bits(len(table)))).astype(np.int64)
        lo = first[b]
        n = first[b + 1] - lo
        q = np.repeat(np.arange(len(starts)), n)  # the candidate of each entry tried
        e = table[ranges(lo, n)]
        same = np.flatnonzero((e >> np.uint64(32)) == h[q])
        q, e = q[same], e[same]
        ids = (e & np.uint64(0xFFFFFFFF)).astype(np.int64)
        skip = len(self.prefix) if cont else 0
        ok = same_bytes(self.tb, self.off, raw, starts[q], lengths[q], ids, skip)
        if skip and ok.any():  # (the prefix itself: the table's claim, checked)
            sel = np.flatnonzero(ok)
            head = self.tb[self.off[ids[sel]].astype(np.int64)[:, None] + np.arange(skip)]
            ok[sel] = (head == self.prefix).all(axis=1)
        out[q[ok]] = ids[ok]
        return out


def encode(words: list[str], tables: Tables, unk_id: int, max_chars: int) -> list[tuple[int, ...]]:
    """The ids of each word (all non-empty) as WordPiece splits it, a tuple per word."""
    raw = np.frombuffer("".join(words).encode("utf-8", "surrogatepass"), dtype=np.uint8)
    nbytes = byte_lengths(raw, words)
    nw = len(words)
    wstart = np.cumsum(nbytes) - nbytes
    wend = wstart + nbytes
    boundary = np.append((raw & 0xC0) != 0x80, True)  # where a char starts (and the end)
    unk = np.fromiter(map(len, words), dtype=np.int64, count=nw) > max_chars
    got_word, got_id = [], []  # each round's pieces: the word, the token id

    # Whole words first: most words of a text are tokens.
    active = np.flatnonzero(~unk)
    whole = tables.find(False, raw, wstart[active], nbytes[active])
    hit = whole >= 0
    got_word.append(active[hit])
    got_id.append(whole[hit])
    active = active[~hit]
    pos = wstart[active]
    cont = False
    while len(active):
        longest = tables.longest_cont if cont else tables.longest_whole
        span = np.minimum(wend[active] - pos, longest)
        cw = np.repeat(np.arange(len(active)), span)  # each candidate's word (index into active)
        ce = ranges(pos + 1, span)  # and where it ends
        keep = np.flatnonzero(boundary[ce])
        cw, ce = cw[keep], ce[keep]
        ids = tables.find(cont, raw, pos[cw], ce - pos[cw])
        f = np.flatnonzero(ids >= 0)
        # A word's candidates are in ascending end order: its last one found is the longest.
        last = f[np.append(cw[f][1:] != cw[f][:-1], True)] if len(f) else f
        has = np.zeros(len(active), dtype=bool)
        has[cw[last]] = True
        unk[active[~has]] = True
        got_word.append(active[cw[last]])
        got_id.append(ids[last])
        active, pos = active[cw[last]], ce[last]
        going = np.flatnonzero(pos < wend[active])
        active, pos = active[going], pos[going]
        cont = True

    word = np.concatenate(got_word)
    tid = np.concatenate(got_id)
    keep = np.flatnonzero(~unk[word])  # (pieces found before a position with none: dropped)
    word, tid = word[keep], tid[keep]
    order = np.argsort(word, kind="stable")  # (stable: each word's pieces stay in round order)
    counts = np.bincount(word, minlength=nw)
    out = tuples(tid[order], np.cumsum(counts) - counts, counts)
    for k in np.flatnonzero(unk).tolist():
        out[k] = (unk_id,)
    return out
