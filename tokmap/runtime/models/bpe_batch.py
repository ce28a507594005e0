"""Byte-pair merging for many words at once, with numpy (the miss path of the piece cache).

Scalar BPE pays a Python loop step per pair lookup. Here all words of a batch are one flat symbol
array; a round is a fixed handful of numpy passes that merges, in every unfinished word, its
lowest-ranked adjacent pair. Only the pairs next to a merge are looked up again (searchsorted on
the sorted u64 keys), so the lookups total O(merges) and a round costs O(live symbols).

Exactness. tokenizers and tiktoken merge, in each word, the lowest-ranked pair, leftmost first,
one at a time. A round here takes the word's lowest rank r and merges its leftmost occurrence;
further (non-overlapping, left to right: "a a a a" -> "aa aa") occurrences of r are merged in the
same round only when r is *monotone*: every merge that takes r's result as an operand ranks after
r. Then merging cannot create a pair that outranks the remaining occurrences, so the sequential
algorithm would take exactly those next. Whether a merge is monotone is decided from the table
itself: the full all-splits table of cl100k has 22% non-monotone merges, but the exporter keeps only
merges that can fire, and of those none are non-monotone in cl100k, o200k or gpt2, 72 in Llama 3.

Whole pieces first. Most distinct words of prose are themselves tokens (71% of en's in cl100k).
`whole_tokens` finds those in bulk through the file's piece_hash section (a sorted array of
hash32 << 32 | id), checks each candidate's bytes against the piece, and leaves only the rest to
the merge rounds.

Characters first: the caller may start the words from their characters' tokens (premerge.py);
merge() then takes the symbols as they come, with `single` saying which are still bytes.

Long words. Once a round merges about one pair a word, in words of ONE_LEN slots or more (Japanese
pieces), the rounds go one merge a word (_rounds_one): each word's lowest pair, leftmost of equal
ones, which is the sequential algorithm's next merge by definition.
"""

from __future__ import annotations

import numpy as np

from ... import mtok

INF = np.int64(1 << 62)  # nonmono_bitmap's "no merge takes this id"
NOPAIR = (1 << 31) - 2  # the code of a pair that is no merge (narrow codes; wide: WIDE_NOPAIR)
BOUND = (1 << 31) - 1  # the code after a word's last symbol (no pair)
WIDE_NOPAIR, WIDE_BOUND = (1 << 62) - 2, (1 << 62) - 1
IDLE_SHARE = 3  # slots are compacted once 1/IDLE_SHARE of them are dead or in finished words
EAGER_SHARE = 8  # a round merging 1/EAGER_SHARE of the symbols or more cuts its partners out at once
SKIP_MOST = 16  # dead slots in a row a neighbour lookup may step over before the next round compacts
FINISH_WORDS = 8  # live words at or below which the caller's scalar merge finishes them ...
FINISH_SYMBOLS = 512  # ... when they hold at most this many symbols; more, and the rounds go on while
# each merges in bulk (bpe.SLOW_ROUND, as a long piece's rounds do), the scalar merge taking the rest
ONE_LEN = 6  # slots a live word at or above which the rounds go one merge a word (_rounds_one) ...
ONE_SHARE = 4  # ... once a round merged at most 1 + 1/ONE_SHARE pairs a word (narrow codes only)
ONE_IDLE = 2  # _rounds_one compacts once 1/ONE_IDLE of the slots are dead or in finished words
# (cl100k's cold call over 10^5 random letters, 3125 chunks, min of 6 in two alternated runs: 1/2
# 16.0 / 16.7 ms, 1/3 16.0 / 16.4, 1/4 17.1 / 17.0, 1/6 17.5 / 16.5: no share does better.)
HASH_MIX = 0x9E3779B97F4A7C15  # odd multipliers that spread a word's key into the high 32 bits
HASH_MIX2 = 0xBF58476D1CE4E5B9
KEY_MIX = np.uint64(HASH_MIX)  # pair keys times it: their top bits pick a hash_filter slot
SCREEN_SYMBOLS = 1 << 16  # a batch merge of this many symbols screens its pair lookups (_search_screened)
# ... if the table has at most this many merges: Gemma 3's 515K would set ~40% of the filter's
# slots, and screening its 17K parts of wagahai.txt took the merge from 10.4 to 15.2 ms.
SCREEN_KEYS = 1 << 18


def piece_hashes(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """32-bit hash (as uint64) of each word raw[starts[k]:starts[k] + lengths[k]] (all lengths >= 1),
    from its length and its first and last four bytes only (edge_keys), so that it costs the same
    for any length: h = ((key ^ length * MIX) * MIX2 mod 2^64) >> 32. Words that share those bytes
    and length collide, which costs the lookup a miss, never an error (whole_tokens compares every
    candidate's bytes). The exporter hashes the vocabulary with this same function; numpy's
    unsigned arithmetic wraps mod 2^64."""
    return _mixed(edge_keys(raw, starts, lengths), lengths)


def edge_keys(raw: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each word's first bytes (little-endian, low 32 bits) | its last bytes (from the end, high
    32), the edge byte repeated in words under four bytes. Given the length, a word of at most
    EDGE_WHOLE bytes is the only one with its key: its bytes are all in it."""
    starts = starts.astype(np.int64)
    last = starts + lengths - 1
    key = np.zeros(len(starts), dtype=np.uint64)
    for j in range(4):
        head = raw[np.minimum(starts + j, last)].astype(np.uint64)
        tail = raw[np.maximum(last - j, starts)].astype(np.uint64)
        key |= (head << np.uint64(8 * j)) | (tail << np.uint64(32 + 8 * j))
    return key


def _mixed(key: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    n = len(key)
    h = (key ^ (lengths.astype(np.uint64) * np.full(n, HASH_MIX, dtype=np.uint64))) * np.full(n, HASH_MIX2,
                                                                                              dtype=np.uint64)
    return h >> np.uint64(32)


EDGE_WHOLE = 8  # bytes: edge_keys holds a word this long whole

FILTER_BITS = 20  # hash prefix bits of hash_filter (a 1 MiB table)


def hash_filter(table: np.ndarray, mixed: bool = False) -> np.ndarray:
    """A bool per FILTER_BITS-bit prefix (hash_slots) of these uint64 values, set where one has
    it: a word whose slot is unset is none of them, with no search. For the piece_hash table
    (hash32 << 32 | id) words that cannot be tokens (most of them in non-Latin text) then skip
    the binary search; built once (~1 ms). With mixed, the values are packed pair keys, each
    hashed by key_slots (the merge keys: charcut.py filters its bigram keys the same way)."""
    present = np.zeros(1 << FILTER_BITS, dtype=bool)
    present[key_slots(table) if mixed else hash_slots(table)] = True
    return present


def hash_slots(values: np.ndarray) -> np.ndarray:
    """Each uint64 value's slot in a hash_filter: its top FILTER_BITS bits (int64: a view of
    the one array the shift makes, where astype made a second; the slots are below 2^20)."""
    return (values >> np.uint64(64 - FILTER_BITS)).view(np.int64)


def key_slots(keys: np.ndarray) -> np.ndarray:
    """hash_slots(keys * KEY_MIX) of packed pair keys (uint64), shifted in the product's own
    array: one temporary of the keys' size where there were three. Each round of a large batch
    merge filters its pairs this way (_search_screened), and o200k's merge keys (200K) make its
    filter: 1.1 -> 0.9 ms."""
    slots = keys * KEY_MIX
    slots >>= np.uint64(64 - FILTER_BITS)
    return slots.view(np.int64)


def whole_tokens(table: np.ndarray, tb: np.ndarray, off: np.ndarray, raw: np.ndarray,
                 lengths: np.ndarray, with_hashes: bool = False, present: np.ndarray | None = None):
    """For each word (its bytes back to back in raw), the id of the token with exactly its bytes
    that the piece_hash table lists, else -1. A candidate counts only when its bytes (tb, off: the
    vocabulary) equal the word's, so a damaged table costs misses, never a wrong token; ids
    outside the vocabulary are refused (ValueError, for the caller to name the file). Two entries
    per hash are tried (words sharing their edge bytes and length). present: hash_filter(table).
    With with_hashes: (ids, the words' piece hashes)."""
    starts = np.cumsum(lengths) - lengths
    key = edge_keys(raw, starts, lengths)
    h = _mixed(key, lengths)
    ids = np.full(len(lengths), -1, dtype=np.int64)
    if len(table):
        q = (np.flatnonzero(present[(h >> np.uint64(32 - FILTER_BITS)).astype(np.int64)]) if present is not None
             else np.arange(len(h)))
        idx = sorted_search(table, h[q] << np.uint64(32))
        for _probe in range(2):
            np.minimum(idx, len(table) - 1, out=idx)
            cand = table[idx]
            same_hash = (cand >> np.uint64(32)) == h[q]
            q, idx, cand = q[same_hash], idx[same_hash], cand[same_hash]
            got = (cand & np.uint64(0xFFFFFFFF)).astype(np.int64)
            ok = same_token(tb, off, raw, starts[q], lengths[q], got, key[q])
            ids[q[ok]] = got[ok]
            q, idx = q[~ok], idx[~ok] + 1
    return (ids, h) if with_hashes else ids


def sorted_search(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """np.searchsorted(table, keys), the keys searched in ascending order and the answers put back:
    each binary search then starts near the last one's, about half the time of random probes into
    a table of MBs (7.7K words into o200k's piece hashes: 1.1 -> 0.5 ms)."""
    order = np.argsort(keys)
    idx = np.empty(len(keys), dtype=np.int64)
    idx[order] = np.searchsorted(table, keys[order])
    return idx


def same_token(tb, off, raw, starts, lengths, ids, keys) -> np.ndarray:
    """same_bytes(tb, off, raw, starts, lengths, ids), where keys are the words' edge_keys: a word
    of at most EDGE_WHOLE bytes is compared by its key and length with the token's (two gathers
    of 8 bytes' worth a word, where same_bytes gathers every byte of both, with a repeat and a
    reduceat: whole_tokens over en.txt's 7.7K distinct words under o200k, 1.6-2.2 -> 1.4 ms)."""
    if not len(ids):
        return np.zeros(0, dtype=bool)
    if int(ids.max()) >= len(off) - 1:
        raise ValueError(f"token id {int(ids.max())} outside the vocabulary")
    begin = off[ids].astype(np.int64)
    ok = off[ids + 1].astype(np.int64) - begin == lengths
    sel = np.flatnonzero(ok & (lengths <= EDGE_WHOLE))
    if len(sel):
        if int((begin[sel] + lengths[sel]).max()) > len(tb):
            raise ValueError("token offsets past the end of token_bytes")
        ok[sel] = edge_keys(tb, begin[sel], lengths[sel]) == keys[sel]
    sel = np.flatnonzero(ok & (lengths > EDGE_WHOLE))
    if len(sel):
        ok[sel] = same_bytes(tb, off, raw, starts[sel], lengths[sel], ids[sel])
    return ok


def same_bytes(tb, off, raw, starts, lengths, ids, skip: int = 0) -> np.ndarray:
    """Whether token ids[k], after its first skip bytes, is exactly raw[starts[k]:starts[k] +
    lengths[k]] (the skipped bytes are the caller's to check)."""
    if not len(ids):
        return np.zeros(0, dtype=bool)
    if int(ids.max()) >= len(off) - 1:
        raise ValueError(f"token id {int(ids.max())} outside the vocabulary")
    ok = (off[ids + 1] - off[ids]) == lengths + skip
    sel = np.flatnonzero(ok)
    if len(sel):
        if int(off[ids[sel] + 1].max()) > len(tb):
            raise ValueError("token offsets past the end of token_bytes")
        n = lengths[sel]
        first = np.cumsum(n) - n
        rel = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(first, n)
        same = raw[np.repeat(starts[sel], n) + rel] == tb[np.repeat(off[ids[sel]].astype(np.int64) + skip, n) + rel]
        ok[sel] = np.logical_and.reduceat(same, first)
    return ok


def nonmono_bitmap(keys: np.ndarray, ranks: np.ndarray, results: np.ndarray) -> bytes:
    """Bit k (LSB first) set when some merge using merge k's result as an operand ranks lower."""
    rank = ranks.astype(np.int64)
    n_ids = int(max(results.max(initial=0), (keys >> np.uint64(32)).max(initial=0),
                    (keys & np.uint64(0xFFFFFFFF)).max(initial=0))) + 1
    first_use = np.full(n_ids, INF, dtype=np.int64)
    np.minimum.at(first_use, (keys >> np.uint64(32)).astype(np.int64), rank)
    np.minimum.at(first_use, (keys & np.uint64(0xFFFFFFFF)).astype(np.int64), rank)
    return np.packbits(first_use[results.astype(np.int64)] < rank, bitorder="little").tobytes()


class BatchMerger:
    """Views of one tokenizer's merge table (sorted u64 keys, u32 ranks and results) plus each
    merge's non-monotone bit: the file's bitmap when it has one, else computed here.

    A pair's *code* orders it by rank and gives its result. Narrow (int32), when the ranks are the
    results (the model's ranks_from_results: tiktoken's tables and most byte-level tokenizer.json
    ones): 2 * result + non-monotone bit. Wide (int64), otherwise: (2 * rank + bit) << 32 | result,
    with the ranks renumbered densely when they are sparse. Above every code: nopair, a pair that
    is no merge, and bound, after a word's last symbol. Equal ranks (tiktoken's all splits of one
    token) share their result and so their code: the minimum and the leftmost tie come from one
    array. Narrow where it can be: every round moves these arrays, and the bytes count."""

    def __init__(self, keys, ranks, results, nonmono=None, permutation: bool = False):
        self.wide = ranks is not results
        self.permutation = permutation and self.wide  # the ranks are 0 .. m - 1, each once (taken unchecked)
        self.keys = np.frombuffer(keys, dtype="<u8")
        self.ranks = np.frombuffer(ranks, dtype="<u4")
        self.results = np.frombuffer(results, dtype="<u4")
        self.m = len(self.keys)
        if nonmono is None:  # files written before the bitmap existed
            nonmono = nonmono_bitmap(self.keys, self.ranks, self.results)
        self._byte_pairs = self._code = self.rank_of = self._pair_filter = None
        self._ready = False  # build_codes has run
        self._result_bit = None  # narrow codes made at lookup: the non-monotone bit per result id
        self.nonmono = np.unpackbits(np.frombuffer(nonmono, dtype=np.uint8), count=self.m, bitorder="little")
        self.dtype = np.int64 if self.wide else np.int32
        self.nopair, self.bound = (WIDE_NOPAIR, WIDE_BOUND) if self.wide else (NOPAIR, BOUND)
        self.shift = 32 if self.wide else 0  # code >> shift: 2 * rank + bit

    def build_codes(self) -> None:
        """Readies codes_at: checks the table and, where the codes are not made from the file's
        arrays at each lookup, makes every merge's code (and rank_of, when the file's ranks were
        renumbered). Raises ValueError(message) when two merges of one rank have different
        results: a damaged table, which no code could order (the sequential merge would take the
        leftmost of them).

        The two common layouts make a code at lookup, from the mapped ranks and results, rather
        than an array of m codes here: permuted ranks (SentencePiece-style; taken unchecked) and
        narrow codes (the ranks are the results). A fresh tokenizer's first batch then pays a few
        gathers per pair looked up instead of writing the whole array into fresh pages (Gemma 3's
        515K merges, 4 MB: ~1.4 ms; Llama 3's 280K: ~0.6 ms)."""
        self._ready = True
        if self.permutation and self.m < 1 << 29:
            return  # dense and distinct: (2 * rank + bit) << 32 | result at lookup
        if not self.wide:
            n = int(self.results.max()) + 1 if self.m else 0
            if n >= 1 << 30:
                raise ValueError("a merge result id above 2^30")
            if self.nonmono.any():
                self._result_bit = self._bit_by_rank(self.results, n)
            return  # 2 * result + bit at lookup
        # Wide codes made here, each once: (2 * dense rank + bit) << 32 | result.
        top = int(self.ranks.max()) if self.m else 0
        if top >= 4 * self.m + 1024:  # sparse ranks: renumbered densely
            self.rank_of, dense = np.unique(self.ranks, return_inverse=True)
            dense, n = dense.astype(np.int64), len(self.rank_of)
        else:
            dense, n = self.ranks.astype(np.int64), top + 1
        if n >= 1 << 29:
            raise ValueError("more than 2^29 distinct merge ranks")
        seen = np.zeros(n, dtype=bool)
        seen[dense] = True
        shared = int(np.count_nonzero(seen)) < self.m
        if shared:
            result_of = np.zeros(n, dtype=np.uint32)
            result_of[dense] = self.results
            if (result_of[dense] != self.results).any():
                raise ValueError("merges of one rank with different results")
        bits = self.nonmono
        if shared and bits.any():
            bits = self._bit_by_rank(dense, n)[dense]
        # In place from here: a second array of m int64 would cost its fresh pages.
        code = dense  # (this call's own)
        code <<= 1
        code |= bits
        code <<= 32
        code |= self.results
        self._code = code

    def _bit_by_rank(self, dense: np.ndarray, n: int) -> np.ndarray:
        """uint8 per dense rank (dense: each merge's, below n): 1 where any merge of that rank has
        the non-monotone bit. Merges of one rank share a code, so the bit is set when any of them
        has it: a bit set too often only stops a round from taking further occurrences, never
        exactness."""
        by_rank = np.zeros(n, dtype=np.uint8)
        by_rank[dense[self.nonmono.astype(bool)]] = 1
        return by_rank

    def result(self, codes: np.ndarray) -> np.ndarray:
        """The merged token of each code (not nopair or bound)."""
        return codes & 0xFFFFFFFF if self.wide else codes >> 1

    def file_ranks(self, codes: np.ndarray) -> np.ndarray:
        """The file's rank of each code (int64), -1 where it is nopair or bound."""
        dense = (codes >> (self.shift + 1)).astype(np.int64)
        if self.rank_of is not None:
            dense = self.rank_of[np.minimum(dense, len(self.rank_of) - 1)].astype(np.int64)
        return np.where(codes >= self.nopair, -1, dense)

    def codes(self, left: np.ndarray, right: np.ndarray, screen: bool = False) -> np.ndarray:
        """Each pair's code, nopair where it is no merge. screen: many pairs are being looked up
        (a large batch), so that the merge keys' hash filter pays for itself (_search_screened)."""
        return self._search((left.astype(np.uint64) << np.uint64(32)) | right.astype(np.uint64), screen)

    def _search(self, q: np.ndarray, screen: bool = False) -> np.ndarray:
        """codes() of packed pair keys (u64)."""
        if not self._ready:
            self.build_codes()
        if not self.m:
            return np.full(len(q), self.nopair, dtype=self.dtype)
        if len(q) > 4096:
            # Searching the few distinct keys, in order, beats random probes into a table of a
            # few MB. Runs of one pair ("aaaa", spaces) collapse first, in O(n).
            head = np.empty(len(q), dtype=bool)
            head[0] = True
            np.not_equal(q[1:], q[:-1], out=head[1:])
            n_runs = int(np.count_nonzero(head))
            if n_runs * 4 < len(q):
                return self._search(q[head], screen)[np.cumsum(head) - 1]
            return self._search_screened(q) if screen else self._search_sorting(q)
        # (a few dozen are not worth the argsort)
        return self._codes_at(np.searchsorted(self.keys, q) if len(q) <= 64 else sorted_search(self.keys, q), q)

    def _search_screened(self, q: np.ndarray) -> np.ndarray:
        """_search_sorting of the keys that may be merges: a bool per hash slot of the merge keys
        (hash_filter, made on first use: 0.3-0.7 ms, 9-17% of the slots set for cl100k, Llama 3,
        o200k) answers nopair for a key whose slot is unset, and only the others are sorted and
        searched. Most pairs of a round are no merge (over wagahai.txt, 75-82% for Llama 3 and
        GPT-4o; cl100k's chunks of random letters: most)."""
        if self._pair_filter is None:
            self._pair_filter = hash_filter(self.keys, mixed=True)
        maybe = np.flatnonzero(self._pair_filter[key_slots(q)])
        out = np.full(len(q), self.nopair, dtype=self.dtype)
        if len(maybe):
            sub = q[maybe]
            out[maybe] = (self._search_sorting(sub) if len(sub) > 4096
                          else self._codes_at(sorted_search(self.keys, sub), sub))
        return out

    def _codes_at(self, idx: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The codes of keys q, given where each would go in the sorted keys (idx, changed here)."""
        np.minimum(idx, self.m - 1, out=idx)
        return np.where(self.keys[idx] == q, self.codes_at(idx), self.nopair)

    def codes_at(self, idx: np.ndarray) -> np.ndarray:
        """The codes of merges idx (indices into the sorted keys; build_codes first)."""
        if self._code is not None:
            return self._code[idx]
        res = self.results.take(idx)
        if self.wide:  # permuted ranks
            code = self.ranks.take(idx).astype(np.int64)
            code <<= 1
            code |= self.nonmono.take(idx)
            code <<= 32
            code |= res
            return code
        bit = None if self._result_bit is None else self._result_bit.take(res)
        code = res.view(np.int32)  # (results are below 2^30: build_codes checked)
        code <<= 1
        if bit is not None:
            code |= bit
        return code

    def _search_sorting(self, q: np.ndarray) -> np.ndarray:
        """_search of many keys: their distinct values searched in ascending order. Each key is
        packed with its position into one u64 (the two ids in b bits each, b the widest id
        among them, over the position), so that a plain sort, numpy's vectorised one, both
        orders them and says where each came from: np.unique's argsort cost half as much again
        (a Llama 3 cold call over wagahai.txt, its pair searches in all: 25-26 -> 16 ms). Keys too
        wide to leave room for the positions go through np.unique."""
        n = len(q)
        either = int(np.bitwise_or.reduce(q))
        b = max((either >> 32).bit_length(), (either & 0xFFFFFFFF).bit_length(), 1)
        low = 64 - 2 * b  # bits for the position
        if (n - 1).bit_length() > low:
            u, inverse = np.unique(q, return_inverse=True)
            return self._codes_at(np.searchsorted(self.keys, u), u)[inverse]
        w, lo = np.uint64(b), np.uint64(low)
        packed = (q >> np.uint64(32)) << w
        packed |= q & np.uint64(0xFFFFFFFF)
        packed <<= lo
        packed |= np.arange(n, dtype=np.uint64)
        packed.sort()
        at = (packed & np.uint64((1 << low) - 1)).astype(np.intp)
        packed >>= lo  # the keys, ascending, each its ids in b bits
        head = np.empty(n, dtype=bool)
        head[0] = True
        np.not_equal(packed[1:], packed[:-1], out=head[1:])
        u = packed[head]
        u = ((u >> w) << np.uint64(32)) | (u & np.uint64((1 << b) - 1))
        got = self._codes_at(np.searchsorted(self.keys, u), u)
        out = np.empty(n, dtype=got.dtype)
        out[at] = got[np.cumsum(head) - 1]
        return out

    def byte_pair_codes(self, pair16: np.ndarray, byte_ids: np.ndarray) -> np.ndarray:
        """The codes of pairs of single-byte symbols, each given as b0 << 8 | b1: the first round of
        byte-level BPE. A 64K table per tokenizer is filled as pairs first occur (the few distinct
        ones found without sorting, then searched), so each call is a gather, O(n)."""
        if self._byte_pairs is None:
            # The first call: every pair is new, so they are marked directly, without a gather
            # of the empty table and a masked copy of the pairs (10^5 random letters under
            # cl100k, this whole first call in alternated processes: 1.6-2.0 -> 0.9-1.0 ms).
            self._byte_pairs = np.full(65536, -1, dtype=self.dtype)  # -1: not looked up yet
            seen = np.zeros(65536, dtype=bool)
            seen[pair16] = True
        else:
            # (take, not []: indexing converts the int32 pairs to intp first, twice the time; a
            # boolean mask copies slower than positions and a take. 150K pairs into this table:
            # a gather 0.31 -> 0.17 ms)
            got = self._byte_pairs.take(pair16)
            new = got < 0
            if not new.any():
                return got
            seen = np.zeros(65536, dtype=bool)
            seen[pair16.take(np.flatnonzero(new))] = True
        d = np.flatnonzero(seen)
        self._byte_pairs[d] = self.codes(byte_ids[d >> 8], byte_ids[d & 0xFF])
        return self._byte_pairs.take(pair16)

    def merge_chars(self, b0: np.ndarray, b1: np.ndarray, b2: np.ndarray, width: np.ndarray,
                    byte_ids: np.ndarray, history: bool = False) -> tuple | None:
        """merge() of words of 1-3 single-byte symbols (b0, b1, b2: their bytes, int64, the unused
        ones any byte; width: how many; byte_ids: each byte's token, NO_ID for none), in
        closed form: a word has at most two pairs, so BPE merges the lower-coded one (the left on
        a tie), then at most the pair that merge made. A few gathers and one search in all, where
        merge() runs a round of ~20 numpy calls per merge (a CJK char alone: two rounds, 20K
        distinct chars in 10^5 random ideographs). Returns (ids back to back, int64; counts), or None
        when a used byte has no token (the caller's scalar path knows what to do with it). With
        history, also (left, right): int64 (n, 3), the symbols each char's first and last symbol
        ever are while it merges alone (its initial one, the one its first merge made, its final
        token), -1 where there is none (bpe_cuts.standalone tests them)."""
        n = len(width)
        nop = self.nopair
        s = np.stack((byte_ids[b0], byte_ids[b1], byte_ids[b2]), axis=1)
        if (s[np.arange(3) < width[:, None]] == mtok.NO_ID).any():
            return None
        c01 = np.full(n, nop, dtype=self.dtype)
        c12 = np.full(n, nop, dtype=self.dtype)
        two = np.flatnonzero(width >= 2)
        c01[two] = self.byte_pair_codes((b0[two] << 8) | b1[two], byte_ids)
        three = np.flatnonzero(width == 3)
        c12[three] = self.byte_pair_codes((b1[three] << 8) | b2[three], byte_ids)
        left = (c01 <= c12) & (c01 < nop)  # the first pair merges first (lower code, or a tie)
        right = ~left & (c12 < nop)
        counts = width.astype(np.int64)
        lk, rk = np.flatnonzero(left), np.flatnonzero(right)
        if history:
            first_sym = np.full((n, 3), -1, dtype=np.int64)
            last_sym = np.full((n, 3), -1, dtype=np.int64)
            first_sym[:, 0] = s[:, 0]
            last_sym[:, 0] = s[np.arange(n), np.maximum(width, 1) - 1]
        s[lk, 0] = self.result(c01[lk])
        s[lk, 1] = s[lk, 2]
        s[rk, 1] = self.result(c12[rk])
        if history:  # what the first merge made: a first symbol (left), or a last one (right; both for two bytes)
            first_sym[lk, 1] = s[lk, 0]
            two = lk[width[lk] == 2]
            last_sym[two, 1] = s[two, 0]
            last_sym[rk, 1] = s[rk, 1]
        counts[lk] -= 1
        counts[rk] -= 1
        # Words of three left with two symbols: their one pair, which the first merge made.
        again = np.flatnonzero((left | right) & (width == 3))
        c = self.codes(s[again, 0], s[again, 1])
        done = again[c < nop]
        s[done, 0] = self.result(c[c < nop])
        counts[done] = 1
        flat = s.ravel()[np.flatnonzero((np.arange(3) < counts[:, None]).ravel())]
        if not history:
            return flat, counts
        first_sym[done, 2] = last_sym[done, 2] = s[done, 0]
        return flat, counts, first_sym, last_sym

    def merge(self, sym: np.ndarray, lengths: np.ndarray, finish=None, min_yield: int = 0,
              raw: np.ndarray | None = None, single: np.ndarray | None = None,
              byte_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Merge every word; sym holds the words' initial symbols back to back (ids, any integer
        dtype), lengths their lengths (all >= 1). Returns (final symbols in word order, final length per word).

        finish(list of symbols, list of pair ranks) -> merged list, when given, takes over once only
        a few words are left: a round has a fixed cost of ~20 numpy calls, which a long word's tail
        of single merges would otherwise pay once per merge. With min_yield > 0 it also takes over
        as soon as a round merges fewer than 1/min_yield of the live symbols: for a few long words
        (a 10^6-char piece) the rounds only pay while they merge in bulk ("aaaa", runs of spaces);
        the rest is the caller's heap merge, O(n log n). raw: the words' bytes (uint8, sym =
        byte_ids[raw]), when the symbols are single bytes; with byte_ids, their pairs come from
        byte_pair_codes. With single (bool per symbol), only the symbols marked are bytes, raw[i]
        their value (premerged characters are not), and only pairs of two of them come from the
        table.

        The words live back to back in sym and code; code[i] is bound at each word's last symbol,
        so the word boundaries need no array of their own to keep in step (_Slots, _rounds)."""
        if not self._ready:
            self.build_codes()
        n_words = len(lengths)
        sym = np.array(sym, dtype=np.int32)  # merged in place below: never the caller's array
        ends = np.cumsum(lengths) - 1
        nopair, bound = self.nopair, self.bound
        code = np.full(len(sym), nopair, dtype=self.dtype)
        screen = len(sym) >= SCREEN_SYMBOLS and self.m <= SCREEN_KEYS
        if len(sym) > 1:
            # Every adjacent pair, those across two words too: their codes are then overwritten by
            # bound below, and no mask is built or applied (boolean masks copy slowly in numpy).
            if raw is not None and byte_ids is not None:
                both = None if single is None else single[:-1] & single[1:]
                bytes_at = None if both is None else np.flatnonzero(both)
                if bytes_at is None or 2 * len(bytes_at) > len(both):
                    code[:-1] = self.byte_pair_codes((raw[:-1].astype(np.int32) << 8) | raw[1:], byte_ids)
                else:  # (mostly premerged chars, CJK: only the pairs of two bytes, not every pair)
                    code[bytes_at] = self.byte_pair_codes((raw[bytes_at].astype(np.int32) << 8) | raw[bytes_at + 1],
                                                          byte_ids)
                if both is not None:  # pairs with a premerged char: searched (its raw is no byte)
                    other = np.flatnonzero(~both)
                    code[other] = self.codes(sym.take(other), sym.take(other + 1), screen)
            else:
                code[:-1] = self.codes(sym[:-1], sym[1:], screen)
        code[ends] = bound
        done = []  # (symbols, their words' indices, their lengths) of the words finished
        if len(sym):
            self._rounds(_Slots(sym, code, ends, bound), finish, min_yield, done, screen)
        if not done:  # (no words)
            return sym, np.zeros(n_words, dtype=np.int64)
        out_sym = np.concatenate([d[0] for d in done]) if len(done) > 1 else done[0][0]
        words = np.concatenate([d[1] for d in done]) if len(done) > 1 else done[0][1]
        counts = np.concatenate([d[2] for d in done]) if len(done) > 1 else done[0][2]
        if len(done) > 1:
            order = np.argsort(np.repeat(words, counts), kind="stable")
            out_sym = out_sym[order]
        by_word = np.zeros(n_words, dtype=np.int64)
        by_word[words] = counts
        return out_sym, by_word

    def _rounds(self, st: "_Slots", finish, min_yield: int, done: list, screen: bool) -> None:
        """merge()'s rounds over st's words until each is finished, appended to done.

        A merged symbol's partner is not cut out of the arrays at once: its slot is marked dead
        (and skipped by the neighbour lookups), and finished words stay in place, until a third of
        the slots are dead or finished; then one compaction drops them all. Cutting the partners
        out every round moved every array once a round: most of a round's cost where it merges a
        few percent of the symbols, as the rounds over long Japanese pieces (one merge a word) or
        a long piece's chunks (bpe_chunks.py) do. Replaying the merges of a cold call, min of 9:
        Llama 3 over wagahai.txt 74.7 -> 64.6 ms, cl100k's chunks of 10^5 random letters 10.5 ->
        8.4 ms, Gemma 3's distinct parts of wagahai.txt 13.8 -> 8.8 ms. A round that merges an
        eighth of the symbols or more (runs: "aaaa", spaces) still cuts its partners out: its dead
        slots would be compacted at the next round anyway. Those rounds run the same numpy calls
        as before, yet Llama 3's merge of 10^6 "a" replays in 54 ms against 49 (min of 7; moving
        the arrays' allocations around moved it between 54 and 63 ms): not pinned down."""
        nopair, bound = self.nopair, self.bound
        while True:
            if (got := st.begin_round(nopair, IDLE_SHARE, done)) is None:
                return
            wmin, finished, n_finished, compacted = got
            if n_finished and not compacted:
                wmin[finished] = -1  # matches no pair: finished words ride along untouched
            if finish is not None and not min_yield and len(wmin) <= FINISH_WORDS:
                if len(st.sym) - st.n_dead <= FINISH_SYMBOLS:
                    st.compact(None)
                    self._finish(st.sym, st.code, st.word, st.starts, st.lens, finish, done)
                    return
                # A few long words (a run of one char merged as one chunk when its chunks did not
                # glue: 10^5 U+3000 under Llama 3 took 227 ms in the heap, 180K Python steps):
                # rounds halve a run, so they go on while they merge in bulk.
                from .bpe import SLOW_ROUND

                min_yield = SLOW_ROUND
            code = st.code
            cand = np.flatnonzero(code == np.repeat(wmin, st.lens))
            if st.n_dead:
                partner = st.next_live(cand)
                keep = self._keep(cand, code[cand] >> self.shift, st.ends, partner)
                sel, partner = cand[keep], partner[keep]
            else:  # (each candidate's partner is the next slot)
                sel = cand[self._keep(cand, code[cand] >> self.shift, st.ends, None)]
                partner = sel + 1
            if min_yield and len(sel) * min_yield < len(st.sym) - st.n_dead:
                st.compact(None)
                self._finish(st.sym, st.code, st.word, st.starts, st.lens, finish, done)
                return
            sym = st.sym
            sym[sel] = self.result(code[sel])
            at_end = code[partner] == bound  # the partner ended its word: so does the merged symbol
            if not st.n_dead and len(sel) * EAGER_SHARE >= len(sym):
                # Many merges ("aaaa", runs of spaces halve each round): the partners are cut out
                # now, as a compaction would be due next round anyway; neighbours are adjacent.
                new = st.cut(sel)
                sym, code = st.sym, st.code
                code[new] = np.where(at_end, bound, nopair)
                left = new[new > 0] - 1
                p = np.concatenate((left[code[left] != bound], new[~at_end]))
                q = p + 1
            else:
                st.kill(partner)
                code[sel] = np.where(at_end, bound, nopair)
                # The merged symbol's pairs with its live neighbours, left and right, are new.
                right = ~at_end
                left = st.prev_live(sel)
                has = left >= 0
                l_left, l_right = left[has], sel[has]
                inner = code[l_left] != bound  # (a word's last symbol is bound: the previous word's)
                p = np.concatenate((l_left[inner], sel[right]))
                q = np.concatenate((l_right[inner], st.next_live(partner[right])))
            if len(p):
                code[p] = self.codes(sym[p], sym[q], screen)
            if not min_yield and not self.wide and len(sel) * ONE_SHARE <= (ONE_SHARE + 1) * len(wmin) \
                    and ONE_LEN * len(wmin) <= len(st.sym) < 1 << 32:  # (a slot index takes 32 bits)
                return self._rounds_one(st, finish, done, screen)

    def _rounds_one(self, st: "_Slots", finish, done: list, screen: bool) -> None:
        """_rounds for long words (narrow codes only): one merge a word a round, found by a
        single pass. Each slot's code goes into the high half of an int64 over its slot index,
        so a segmented minimum over the words gives each word's lowest pair and, of equal ones,
        its leftmost slot: the sequential algorithm's next merge. _rounds finds all occurrences
        of each word's minimum with three more passes over every live slot (repeat, compare,
        nonzero), which dominate where a round merges one pair in a word of dozens of symbols
        (Japanese pieces). The slot indices are rewritten after each compaction. It takes over
        from _rounds once a round merged about one pair a word (a word's repeated pairs, "aaaa",
        runs of spaces, still merge together there) in words of ONE_LEN slots or more.
        Replaying the merges of a cold call (min of 9, alternated with _rounds alone; ONE_SHARE 8
        then, 4 took another 2-4% off wagahai): wagahai.txt under Llama 3 57.9 -> 51.1 ms, GPT-4o
        42.5 -> 37.7, Qwen3 59.3 -> 51.9; utf8seq.txt 15.6 -> 15.4 and 22.0 -> 20.1 (Llama 3,
        Qwen3). More rounds (Llama 3 wagahai: 45 -> 66), each a quarter of the passes over the slots."""
        nopair, bound = self.nopair, self.bound
        code = st.code.astype(np.int64)
        code <<= 32
        code |= np.arange(len(code), dtype=np.int64)
        st.code, st.bound = code, bound << 32  # (kill() writes st.bound: never a word's minimum)
        while True:
            if (got := st.begin_round(nopair << 32, ONE_IDLE, done)) is None:
                return
            wmin, finished, n_finished, compacted = got
            if compacted:
                code = st.code
                code &= -1 << 32  # (the slots moved: their indices anew)
                code |= np.arange(len(code), dtype=np.int64)
                continue
            if finish is not None and len(wmin) <= FINISH_WORDS:
                st.compact(None)
                self._finish(st.sym, (st.code >> 32).astype(self.dtype), st.word, st.starts, st.lens, finish, done)
                return
            if n_finished:
                wmin = wmin[~finished]
            sel = wmin & 0xFFFFFFFF
            code, sym = st.code, st.sym
            sym[sel] = wmin >> 33  # (the narrow code's result)
            partner = st.next_live(sel)
            at_end = code[partner] >= bound << 32  # the partner ended its word: so does the merged symbol
            st.kill(partner)
            code[sel] = np.where(at_end, bound << 32, nopair << 32) | sel
            right = ~at_end
            left = st.prev_live(sel)
            has = left >= 0
            l_left, l_right = left[has], sel[has]
            inner = code[l_left] < bound << 32  # (a word's last symbol is bound: the previous word's)
            p = np.concatenate((l_left[inner], sel[right]))
            q = np.concatenate((l_right[inner], st.next_live(partner[right])))
            if len(p):
                new = self.codes(sym[p], sym[q], screen).astype(np.int64)
                new <<= 32
                new |= p
                code[p] = new

    def _finish(self, sym, code, word, starts, lens, finish, done) -> None:
        """Hand each live word to finish(symbols, pair ranks), the ranks this round already knows."""
        rows = sym.tolist()
        ranks = self.file_ranks(code).tolist()
        for a, n, w in zip(starts.tolist(), lens.tolist(), word.tolist()):
            tail = finish(rows[a:a + n], ranks[a:a + n - 1])
            done.append((np.array(tail, dtype=np.int32), np.array([w], dtype=np.int32),
                         np.array([len(tail)], dtype=np.int64)))

    @staticmethod
    def _keep(cand: np.ndarray, cand_rank2: np.ndarray, ends: np.ndarray, partner) -> np.ndarray:
        """Which candidates (slots of each word's lowest-rank pair, 2 * rank + bit each) merge this
        round; ends: the slot of each word's last symbol; partner: each candidate's right symbol
        (its next live slot), None when that is the next slot. Each rule costs only where it
        applies: runs where a candidate's partner is the next candidate, the word test at
        non-monotone candidates."""
        k = len(cand)
        keep = np.ones(k, dtype=bool)
        if k < 2:
            return keep
        adjacent = cand[1:] == (cand[:-1] + 1 if partner is None else partner[:-1])
        if adjacent.any():
            # Overlapping occurrences ("a a a"): every other one from the left of the run.
            idx = np.arange(k)
            run_start = np.empty(k, dtype=bool)
            run_start[0] = True
            np.logical_not(adjacent, out=run_start[1:])
            keep = ((idx - np.maximum.accumulate(np.where(run_start, idx, 0))) & 1) == 0
        odd = np.flatnonzero(cand_rank2 & 1)
        if len(odd):  # a non-monotone merge: only its word's first occurrence
            odd = odd[odd > 0]
            same_word = np.searchsorted(ends, cand[odd]) == np.searchsorted(ends, cand[odd - 1])
            keep[odd[same_word]] = False
        return keep


class _Slots:
    """The words of a batch merge, back to back in slots: sym and code (code[i]: the pair of the
    symbol in slot i and the next live one, bound at a word's last), alive (False for a slot whose
    symbol was merged into its left neighbour), and per word its last slot (ends), first slot and
    slot count, and its index in the input. A word's first slot is never dead: only right
    partners die."""

    def __init__(self, sym: np.ndarray, code: np.ndarray, ends: np.ndarray, bound: int):
        self.sym, self.code, self.bound = sym, code, bound
        self.word = np.arange(len(ends), dtype=np.int32)
        self._set_words(ends - np.concatenate(([-1], ends[:-1])))

    def _set_words(self, lens: np.ndarray) -> None:
        self.lens = lens
        self.ends = np.cumsum(lens) - 1
        self.starts = self.ends - lens + 1
        self.alive = None  # made on the first kill
        self.n_dead = 0
        self.longest_skip = 0  # the most dead slots a neighbour lookup stepped over since then

    def begin_round(self, nopair: int, share, done: list):
        """(each word's lowest code, whether it is finished (that code is nopair or above: no merge
        left), how many are, whether the slots were compacted) for a round; None when every word
        is finished (all appended to done). The slots are compacted first, dropping the dead ones
        and the finished words (appended to done; the rest returned), when 1/share of them are
        dead or in finished words, or a neighbour lookup had a long run of dead slots to step over
        (lazy rounds over a run: its dead runs double each round)."""
        wmin = np.minimum.reduceat(self.code, self.starts)
        finished = wmin >= nopair
        n_finished = int(np.count_nonzero(finished))
        if n_finished == len(wmin):
            done.append(self.all_words())
            return None
        idle = self.n_dead + (int(self.lens[finished].sum()) if n_finished else 0)
        if idle * share < len(self.sym) and self.longest_skip <= SKIP_MOST:
            return wmin, finished, n_finished, False
        gone = self.compact(finished if n_finished else None)
        if gone is None:
            return wmin, finished, n_finished, True
        done.append(gone)
        live = ~finished
        return wmin[live], finished[live], 0, True

    def cut(self, sel: np.ndarray) -> np.ndarray:
        """With no dead slot: the symbols after sel (merged into them) cut out of the arrays;
        returns where sel's symbols are then."""
        live = np.ones(len(self.sym), dtype=bool)
        live[sel + 1] = False
        idx = np.flatnonzero(live)
        self.sym, self.code = self.sym.take(idx), self.code.take(idx)
        self.ends = self.ends - np.searchsorted(sel, self.ends, side="left")  # (sel + 1 <= end: sel < end)
        self.starts = np.concatenate(([0], self.ends[:-1] + 1))
        self.lens = self.ends - self.starts + 1
        return sel - np.arange(len(sel))

    def kill(self, slots: np.ndarray) -> None:
        """The symbols in these slots were merged into their left neighbours."""
        if self.alive is None:
            self.alive = np.ones(len(self.sym), dtype=bool)
        self.alive[slots] = False
        self.code[slots] = self.bound  # (never a word's minimum)
        self.n_dead += len(slots)

    def next_live(self, slots: np.ndarray) -> np.ndarray:
        """The live slot after each of these (each has one in its word)."""
        j = slots + 1
        if self.n_dead:
            alive = self.alive
            todo = np.flatnonzero(~alive[j])
            steps = 0
            while len(todo):
                j[todo] += 1
                todo = todo[~alive[j[todo]]]
                steps += 1
            self.longest_skip = max(self.longest_skip, steps)
        return j

    def prev_live(self, slots: np.ndarray) -> np.ndarray:
        """The live slot before each of these, -1 for slot 0 (it may be the previous word's)."""
        j = slots - 1
        if self.n_dead:
            alive = self.alive
            todo = np.flatnonzero(~alive[np.maximum(j, 0)] & (j >= 0))
            steps = 0
            while len(todo):
                j[todo] -= 1
                at = j[todo]
                todo = todo[~alive[np.maximum(at, 0)] & (at >= 0)]
                steps += 1
            self.longest_skip = max(self.longest_skip, steps)
        return j

    def _live_lens(self) -> np.ndarray:
        return np.add.reduceat(self.alive, self.starts, dtype=np.int64) if self.n_dead else self.lens

    def all_words(self):
        """(live symbols, input indices, live lengths) of every word."""
        return (self.sym[self.alive] if self.n_dead else self.sym), self.word, self._live_lens()

    def compact(self, finished: np.ndarray | None):
        """Drop the dead slots and the finished words (finished: bool per word, or None); returns
        the finished words as all_words() gives them, or None."""
        if finished is None and not self.n_dead:
            return None
        lens = self._live_lens()
        if finished is None:
            keep, out = self.alive, None
        else:
            going = np.repeat(finished, self.lens)
            keep = ~going
            if self.n_dead:
                keep &= self.alive
                going &= self.alive
            out = self.sym.take(np.flatnonzero(going)), self.word[finished], lens[finished]
            self.word, lens = self.word[~finished], lens[~finished]
        idx = np.flatnonzero(keep)  # (indices + take: twice as fast as two mask copies)
        self.sym, self.code = self.sym.take(idx), self.code.take(idx)
        self._set_words(lens)
        return out
