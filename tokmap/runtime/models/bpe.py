"""Byte-level BPE over the mapped vocabulary and packed merge table.

A piece's UTF-8 bytes start as single-byte symbols; the adjacent pair with the lowest merge rank
is merged (ties: leftmost) until none is left. Short pieces use a list scan (fast for the usual
2-10 symbols); long ones a heap over a linked list, so a 10^5-byte piece stays O(n log n).
Merge lookups binary-search the sorted uint64 keys (left << 32 | right) in place; results are
memoised per tokenizer, as are whole pieces.
"""

from __future__ import annotations

import gc
import heapq
import sys
from bisect import bisect_left
from itertools import chain, filterfalse, islice

from ... import mtok
from ...errors import FormatError
from . import LongPieces, concat
from .vocab import VocabFile

INF = 1 << 62
LONG_PIECE = 128  # symbols; above this the heap merge wins over rescanning the list
BATCH_BYTES = 512  # misses in one call above this many chars go to the numpy batch merge (~0.7 ms fixed, ~10 us a word scalar) ...
BATCH_BYTES_IMPORT = 1 << 14  # ... or above this many while numpy is not imported yet (~110 ms)
BATCH_WORD = 256  # bytes; longer pieces are chunked, or batch-merged one by one while rounds merge in bulk
SLOW_ROUND = 32  # ... that is, while a round merges at least 1/32 of a long piece's symbols
RANGE_BATCH = 1 << 17  # bytes of chunks merged in one batch (BPE._merge_ranges_blocked)
CHUNK_PIECE = 4096  # bytes; a piece this long, or shorter long ones this long together, merge as chunks
FILTER_WORDS = 1 << 14  # words in one batch from which the hash filter (~1-3 ms to build) pays for itself
# (prose's ~8K distinct words, 70% of them tokens, save ~0.3 ms by it; wagahai.txt's 30K, 1%, ~4 ms)
CACHE_PIECE = 256  # chars; longer pieces are remembered within a budget (models.LongPieces)
CACHE_MAX = 1 << 19  # pieces; the cache is emptied when it grows past this
MISS_BATCH = 1 << 16  # distinct misses batch-merged at once; more go in batches of this many
FRESH_SHARE = 256  # a call whose distinct pieces outnumber the cache this many times takes all as misses
PART_BATCH_REMEMBERED = 1 << 16  # fresh parts of cut pieces; more at once (random text) are not remembered
PART_REPEATS, PART_REPEATS_FROM = 1.25, 1 << 12  # ... nor when 2^12+ distinct parts occur under 1.25 times each
BMP_INDEX_CHARS = 1 << 14  # multi-byte chars in one batch from which premerge builds its index
CUT_SHARE = 3  # pieces are cut into parts (bpe_cuts.py) when at least 1/3 of the tested boundaries cut ...
PROBE_BYTES = 1 << 16  # ... in a first look at this much of them (BPE._cuts_pay)
CUT_RARE_SHARE = 1 / 32  # ... nor when they all fit in it and multi-byte chars are a smaller share of its bytes
# Parts of several chars are cut to single chars where the chars' histories prove it
# (bpe_cuts.standalone) when, of the first STANDALONE_PROBE of many, this share passes the test ...
STANDALONE_PROBE, STANDALONE_SHARE = 256, 0.9
# ... and they are at least 1/STANDALONE_PARTS of all parts: cutting them re-sorts all the parts,
# which costs more than merging a few (cl100k over 10^5 random ideographs: 1.8K of 97K, 19 -> 20.5 ms)
STANDALONE_PARTS = 16
# Long pieces are chunked to meet at cuts (bpe_chunks.cut_chunk_bounds) when at least 1/CHUNK_CUT_LEADS
# of their bytes start a multi-byte char: the only boundaries the cut table can cut
CHUNK_CUT_LEADS = 16


def batch_pays(n: int) -> bool:
    """Whether misses of n chars in all are worth the numpy batch merge (numpy may need importing)."""
    return n >= (BATCH_BYTES if "numpy" in sys.modules else BATCH_BYTES_IMPORT)


class BPE(VocabFile):
    def __init__(self, f, meta: dict):
        super().__init__(f)
        m = meta["model"]
        self.ignore_merges = bool(m["ignore_merges"])
        self.unk_id = m["unk_id"]
        self.byte_ids = list(f.view(mtok.SECTION_BYTE_IDS, mtok.U32))
        self.keys = f.view(mtok.SECTION_MERGE_KEYS, mtok.U64)
        self.results = f.view(mtok.SECTION_MERGE_RESULTS, mtok.U32)
        # Without a rank section the results are the ranks: the exporter proved they order and tie
        # every pair of merges alike (exporter/merges.py).
        self.ranks = (self.results if m.get("ranks_from_results", False)
                      else f.view(mtok.SECTION_MERGE_RANKS, mtok.U32))
        self._ranks_permutation = bool(m.get("ranks_permutation", False))  # (the exporter's claim: see _start_batch)
        self.n_keys = len(self.keys)
        self.pair_cache: dict[int, tuple[int, int]] = {}
        self._unkept = None  # a subclass's own entries not yet remembered (CharBPE: see _keep_waiting)
        self._unkept_long = None  # long pieces' (text, ids list) not yet remembered (see piece_cache)
        self.piece_cache: dict[str, tuple[int, ...]] = {}
        self._long = LongPieces()  # the pieces longer than CACHE_PIECE in piece_cache
        self._f = f
        self._batch = None  # BatchMerger, built on the first large miss set
        self._byte_ids_np = self._byte_ids_u32 = self._byte_gaps = None
        self._unreached = None  # ids of tokens merging does not reach (see _merge_words)
        self._unreached_bytes = None  # ... their bytes, for files without a piece_hash section
        self._piece_hash = None  # (piece_hash table, token bytes, offsets) as numpy, once batching starts
        self._unreached_h = None  # piece hashes of the unreached tokens, with _whole
        self._atomic = None  # the atomic_chars section as numpy, once batching starts ...
        self._atomic_bmp = None  # ... and its BMP entries by code point (premerge.bmp_index)
        self._atomic_edges = None  # ... and the atomic_edges section's masks (premerge.edge_index), with it
        self._present = None  # bpe_batch.hash_filter of the piece_hash table, once a batch is large
        self._tok_len = None  # byte length of every token (numpy), for bpe_chunks.glue ...
        self._longest = None  # ... and the longest
        self._lists = None  # idlist.IdLists, made on first use (_id_lists)
        self._cut = None  # bpe_cuts.CutTable from the cut_windows section, once a probe is cut
        self._chars = None  # bpe_cuts.CharIds: what each char met in a cut piece merges to alone
        self.part_cache: dict[str, tuple[int, ...]] = {}  # longer parts of cut pieces: their pure BPE

    # -- the piece cache ---------------------------------------------------------------------
    # A long piece merged as chunks (bpe_chunks.py) comes as a list made from numpy; the cache
    # holds tuples, and making one copies the list again (utf8seq.txt: 821K ids in 175 pieces,
    # ~2.5 ms of a ~80 ms first call). The call that merged them hands the lists out (its
    # caller copies them into its own list), and the tuples are made only when a later call
    # reads the cache (this property). CharBPE leaves its pieces waiting the same way.
    @property
    def piece_cache(self) -> dict:
        if self._unkept is not None or self._unkept_long is not None:
            self._keep_waiting()
        return self._pieces

    @piece_cache.setter
    def piece_cache(self, cache: dict) -> None:
        self._pieces = cache

    def _keep_waiting(self) -> None:
        """Remember the long pieces a call left waiting, within LongPieces' budget. They are taken
        off the model first: another thread reading the cache meanwhile misses them at worst."""
        pending, self._unkept_long = self._unkept_long, None
        cache = self._pieces
        for piece, ids in pending or ():
            if piece not in cache:
                self._long.add(cache, piece, ids)

    # -- merges -------------------------------------------------------------------------------
    def pair(self, left: int, right: int) -> tuple[int, int]:
        """(rank, result) of merging left+right, or (INF, -1)."""
        key = (left << 32) | right
        hit = self.pair_cache.get(key)
        if hit is not None:
            return hit
        j = bisect_left(self.keys, key)
        if j < self.n_keys and self.keys[j] == key:
            hit = (self.ranks[j], self.results[j])
        else:
            hit = (INF, -1)
        self.pair_cache[key] = hit
        return hit

    # -- encoding ---------------------------------------------------------------------------
    def encode_piece(self, text: str) -> tuple[int, ...]:
        hit = self.piece_cache.get(text)
        if hit is not None:
            return hit
        data = text.encode("utf-8")
        out = None
        if self.ignore_merges:
            i = self.lookup(data)
            if i is not None:
                out = (i,)
        if out is None:
            out = tuple(self._merge(self._symbols(data)))
        if len(text) <= CACHE_PIECE:
            self.piece_cache[text] = out
        else:
            self._long.add(self.piece_cache, text, out)
        return out

    takes_runs = True  # encode_pieces understands `runs` (pipeline.Pipeline.split_fast)

    def encode_pieces(self, pieces: list[str], runs=None) -> list[int]:
        """Ids of a list of pieces, concatenated: cache hits cost one C-level dict lookup each.
        runs: (k, set of pieces) when some pieces are whole runs that the pre-tokenizer's pattern
        cuts into k-char pieces (SplitStep.runs): such a piece's ids are its cuts' (bpe_runs.py)."""
        # (the dict itself when nothing waits: the property costs a short call ~3%)
        cache = self._pieces if self._unkept is None and self._unkept_long is None else self.piece_cache
        if cache:
            try:  # all hits (a warm call): one pass; the first miss abandons it
                return concat(map(cache.__getitem__, pieces))
            except KeyError:
                pass
        if len(pieces) == 1:  # (one piece, 10^6 letters: its ids as they come, not chained once more)
            ids = next(iter(self._fill_misses(pieces, runs)))
            if self._unkept_long is not None:  # (its tuple made now: the caller may change the list)
                self._keep_waiting()
            return ids if type(ids) is list else list(ids)
        return concat(self._fill_misses(pieces, runs))

    def cached_ids(self, pieces: list[str]) -> list[int] | None:
        """encode_pieces(pieces) when every piece is cached (one C-level pass), else None."""
        try:
            return concat(map(self.piece_cache.__getitem__, pieces))
        except KeyError:
            return None

    def encode_piece_groups(self, groups: list) -> list[list[int]]:
        """encode_pieces(pieces, runs) of each (pieces, runs) in groups, a new list each, the
        misses of all of them filled by one _fill_misses (batching.py: one batch merge for many
        documents; the groups it records are those with a miss, so no all-hits pass is tried)."""
        long = [r for _p, r in groups if r is not None]  # (k is the pattern's: the same in every group)
        runs = (long[0][0], set().union(*(r[1] for r in long))) if long else None
        ids = self._fill_misses(list(chain.from_iterable(p for p, _r in groups)), runs)
        return [concat(islice(ids, len(p))) for p, _r in groups]

    def piece_ids(self, pieces: list[str], runs=None):
        """Each piece's ids in order (a tuple each; a list for a piece longer than CACHE_PIECE),
        as an iterator: encode_pieces without the concat (spacecut.py groups them per chunk)."""
        return self._fill_misses(pieces, runs)

    def _fill_misses(self, pieces, runs=None):
        """Each piece's ids, as an iterator (chained straight into the caller's list). The distinct
        pieces the cache lacks are encoded (in one batch when they are many) and remembered first,
        so every piece is then one lookup. Deduplicating the whole list and asking the cache once
        per distinct piece costs less than asking it once per piece: text repeats its words.
        The distinct pieces stay in first-occurrence order, which is the order findall made them
        in and so their order in memory: a set's order scatters them, and every pass over the
        misses then pays in cache and TLB misses (10^6 random letters under o200k: 371-405 ms in
        this order, 504-796 ms in a set's; len() over 154K of them 4.7 against 30 ms)."""
        cache = self.piece_cache
        extra = None
        if runs is not None:  # (first: encoding the runs' cuts may empty the cache)
            from . import bpe_runs

            extra = bpe_runs.run_ids(self, runs)
        distinct = dict.fromkeys(pieces)
        if len(cache) + len(distinct) > CACHE_MAX:
            cache.clear()  # emptied before this call's pieces go in, never between them
            self._long.reset()
        # A first call over a document: the cache holds next to nothing of it, and every distinct
        # piece is taken as a miss. The few it holds are merged again, to the same ids, which costs
        # less than asking the cache about each of them (multi.txt's 233K: 14 against 5 ms).
        fresh = len(cache) * FRESH_SHARE < len(distinct)
        misses = list(filterfalse(cache.__contains__, distinct)) if cache and not fresh else list(distinct)
        if extra:
            misses = list(filterfalse(extra.__contains__, misses))
            got = dict(zip(misses, self._encode_misses(misses))) if misses else {}
            got.update(extra)
            return self._remember(got, distinct, pieces)
        if not misses:
            return map(cache.__getitem__, pieces)
        n_chars = list(map(len, misses))  # (one pass over the strings serves all that needs their lengths)
        out = self._encode_misses(misses, n_chars)
        if max(n_chars) <= CACHE_PIECE:  # all remembered: the cache itself answers
            if fresh:
                # distinct becomes the cache: filling its values finds each key in place, where
                # inserting them into the cache grows and rehashes it (233K: 23 against 32-40 ms).
                distinct.update(zip(misses, out))
                distinct.update(cache)  # (what else it held: ids equal to those just merged)
                self.piece_cache = cache = distinct
            else:
                cache.update(zip(misses, out))
            return map(cache.__getitem__, pieces)
        return self._remember(dict(zip(misses, out)), distinct, pieces)

    def _encode_misses(self, misses: list[str], n_chars: list[int] | None = None) -> list[tuple[int, ...]]:
        """The ids of each miss (n_chars: their lengths, when the caller has them). Every pass over
        the misses' strings costs: len() over multi.txt's 233K distinct pieces, scattered in
        memory, takes 13-16 ms, so their lengths are taken once and handed down."""
        if n_chars is None:
            n_chars = list(map(len, misses))
        if not batch_pays(sum(n_chars)):
            return list(map(self.encode_piece, misses))
        if len(misses) <= MISS_BATCH:
            return self._encode_many(misses, n_chars)
        # In batches: each one's arrays reuse the pages the one before it freed. One batch of all
        # (233K distinct pieces of multi.txt) touches fresh memory for all of its arrays, and a
        # first touch costs ~1.7 ms a MB on this machine (llama3 multi.txt cold ~1305 -> ~1260 ms).
        out: list = []
        for a in range(0, len(misses), MISS_BATCH):
            out += self._encode_many(misses[a:a + MISS_BATCH], n_chars[a:a + MISS_BATCH])
        return out

    def _remember(self, got: dict, distinct: dict, pieces: list[str]):
        """_fill_misses' end when some of the new pieces (got) are long: those within the long
        pieces' budget are remembered; every piece's ids as an iterator."""
        cache = self.piece_cache
        hits = [(p, cache[p]) for p in distinct if p not in got]  # (taken first: _long.add may drop some)
        cache.update(kv for kv in got.items() if len(kv[0]) <= CACHE_PIECE)
        late = []
        for p, ids in got.items():
            if len(p) > CACHE_PIECE and p not in cache:  # (encode_piece may have added it)
                if type(ids) is list:  # (made a tuple when a later call reads the cache: piece_cache)
                    late.append((p, ids))
                else:
                    self._long.add(cache, p, ids)
        if late:
            self._unkept_long = late
        got.update(hits)
        return map(got.__getitem__, pieces)

    def _encode_many(self, texts: list[str], n_chars: list[int] | None = None) -> list[tuple[int, ...]]:
        """encode_piece over many distinct uncached pieces: those with multi-byte characters that
        can be cut where no merge crosses (bpe_cuts.py) from their parts, each part once
        (_segmented); the rest in one numpy batch merge for the short ones (_encode_whole).
        A tuple each, but for a piece longer than CACHE_PIECE, which may come as a list.
        n_chars: each text's length, when the caller has them (textparts.byte_lengths)."""
        if self._batch is None:
            self._start_batch()
        joined = "".join(texts)
        out = None
        # (optional section: older files never cut a piece)
        if not joined.isascii() and self._f.has(mtok.SECTION_CUT_WINDOWS) and self._cuts_pay(joined):
            out = self._segmented(texts, joined, n_chars)
        if out is None:
            return self._encode_whole(texts, joined, n_chars)
        rest = [k for k, v in enumerate(out) if v is None]
        if rest:
            sub = None if n_chars is None else [n_chars[k] for k in rest]
            for k, v in zip(rest, self._encode_whole([texts[k] for k in rest], None, sub)):
                out[k] = v
        return out

    def _segmented(self, texts: list[str], joined: str, n_chars: list[int] | None = None) -> list | None:
        """Each piece's ids where uncrossable boundaries cut it into parts, else None there (None
        for all: no piece was cut): bpe_segmented.segmented."""
        from .bpe_segmented import segmented

        return segmented(self, texts, joined, n_chars)

    def _cuts_pay(self, joined: str) -> bool:
        """Whether cutting these pieces is worth it: bpe_segmented.cuts_pay."""
        from .bpe_segmented import cuts_pay

        return cuts_pay(self, joined)

    def _cut_table(self):
        """The bpe_cuts.CutTable of the cut_windows section, loaded on first use (most English
        and code never gets past _cuts_pay's first test, and then never pays for it)."""
        if self._cut is None:
            from .bpe_cuts import load_table

            self._cut = load_table(self._f)
        return self._cut

    @staticmethod
    def _parts_kept(fresh: int, parts: int, distinct: int) -> bool:
        """Whether a call's fresh parts go into part_cache: not when they are too many at once
        (PART_BATCH_REMEMBERED), nor when its parts do not repeat (random ideographs: 16K
        distinct parts of 16K under o200k; Japanese and multi.txt repeat theirs 2.3-4.3 times),
        whose tuples and insertion took 4.5 ms of a 28 ms call over 10^5 random ideographs
        (line_profiler; the call as a whole, alternated with the code before: 24.3-26.3 -> 20.1-21.3
        ms together with bpe_segmented.fresh_part_ids)."""
        return fresh <= PART_BATCH_REMEMBERED and (distinct < PART_REPEATS_FROM or parts >= PART_REPEATS * distinct)

    def _encode_whole(self, texts: list[str], joined: str | None = None,
                      n_chars: list[int] | None = None) -> list[tuple[int, ...]]:
        """_encode_many without cuts: the short pieces in one numpy batch merge, long ones alone
        (joined: the texts joined, n_chars: their lengths, when the caller has them)."""
        import numpy as np

        from .textparts import byte_lengths

        if self._batch is None:
            self._start_batch()
        if joined is None:
            joined = "".join(texts)
        raw = np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)
        lengths = byte_lengths(raw, texts, n_chars)
        batch = (lengths > 0) & (lengths <= BATCH_WORD)
        if batch.all():
            got = self._merge_words(raw, lengths, 0)
            return got if got is not None else list(map(self.encode_piece, texts))
        out: list = [None] * len(texts)
        idx = np.flatnonzero(batch).tolist()
        got = self._merge_words(raw[np.repeat(batch, lengths)], lengths[batch], 0) if idx else None
        if got is not None:
            for k, ids in zip(idx, got):
                out[k] = ids
        ends = np.cumsum(lengths).tolist()
        long = np.flatnonzero(lengths > BATCH_WORD).tolist()
        if long:
            self._merge_chunked(raw, ends, lengths, long, out)
        for k in long:
            if type(out[k]) is list and len(texts[k]) <= CACHE_PIECE:
                # Chunks give a list; a piece the cache keeps (long in bytes, not in chars: 90 Thai
                # chars) is a tuple there like every value, which spacecut's chunks add up.
                out[k] = tuple(out[k])
            elif out[k] is None:  # not chunked: merged alone
                n = int(lengths[k])
                one = self._merge_words(raw[ends[k] - n:ends[k]], lengths[k:k + 1], SLOW_ROUND)
                if one is not None:
                    out[k] = one[0]
        for k, t in enumerate(texts):
            if out[k] is None:
                out[k] = self.encode_piece(t)
        return out

    def _merge_words(self, raw, lengths, min_yield) -> list[tuple[int, ...]] | None:
        """The ids of each word (raw: their UTF-8 bytes back to back, lengths: 1..BATCH_WORD each,
        or one long word with min_yield), or None when a byte has no token (the scalar path knows
        what to do with those). Words that are tokens come from one bulk lookup, the rest from
        the batch merge; the ids are assembled in numpy and cut into tuples by C-level maps."""
        import numpy as np

        from .textparts import tuples

        n = len(lengths)
        counts = np.ones(n, dtype=np.int64)
        found = hashes = None
        miss = np.ones(n, dtype=bool)
        if self._piece_hash is not None:  # pieces that are tokens: no merging
            found, hashes = self._whole_tokens(raw, lengths)
            miss = found < 0
        n_miss = int(np.count_nonzero(miss))
        if n_miss:
            # (positions + take, not a boolean mask: twice as fast here, as is a uint32 table's take)
            mraw, mlen = (raw, lengths) if n_miss == n else (raw.take(np.flatnonzero(np.repeat(miss, lengths))),
                                                             lengths[miss])
            if self._byte_gaps is not None and self._byte_gaps.take(mraw).any():
                return None
            single = None
            if self._atomic is not None:  # characters whose token BPE forms first: start from it
                sym, mlen, mraw, single = self._premerge(mraw, mlen)
            else:
                sym = self._byte_ids_u32.take(mraw)
            mfinal, mcounts = self._batch.merge(sym, mlen, self._merge, min_yield, mraw, single, self._byte_ids_np)
            counts[miss] = mcounts
        ends = np.cumsum(counts)
        starts = ends - counts
        if not n_miss:
            flat = found
        elif n_miss == n:
            flat = mfinal
        else:
            flat = np.empty(int(ends[-1]), dtype=np.int64)
            hit = ~miss
            flat[starts[hit]] = found[hit]
            mstarts = np.cumsum(mcounts) - mcounts
            flat[np.repeat(starts[miss] - mstarts, mcounts) + np.arange(len(mfinal))] = mfinal
        multi = np.flatnonzero(counts > 1)
        if len(multi) * 3 > n:  # words of several tokens are common (CJK, random letters)
            out = tuples(self._id_lists().objects(flat), starts, counts)
        else:  # one-token words are most (prose): 1-tuples made in C, the rest after
            out = list(zip(flat[starts].tolist()))
            if len(multi):
                for slot, val in zip(multi.tolist(), tuples(flat, starts[multi], counts[multi])):
                    out[slot] = val
        if self._unreached is not None:
            # A piece that is itself a token is that token (ignore_merges / tiktoken), even where
            # merging would not reach it: check the merged words that could be such a token.
            if hashes is not None and self._unreached_h is not None:
                uh, h = self._unreached_h, hashes[multi]  # np.isin would import numpy.ma (~6 ms)
                multi = multi[uh[np.minimum(np.searchsorted(uh, h), len(uh) - 1)] == h] if len(uh) else multi[:0]
            if len(multi):
                rb = raw.tobytes()
                bends = np.cumsum(lengths)
                words = map(rb.__getitem__, map(slice, (bends - lengths)[multi].tolist(), bends[multi].tolist()))
                if hashes is None and isinstance(self._unreached, set):  # a file without piece_hash
                    if self._unreached_bytes is None:
                        self._unreached_bytes = {self.token_bytes(i) for i in self._unreached}
                    pairs = [(j, w) for j, w in zip(multi.tolist(), words) if w in self._unreached_bytes]
                else:
                    pairs = zip(multi.tolist(), words)
                for j, w in pairs:
                    i = self.lookup(w)
                    if i is not None and i in self._unreached:
                        out[j] = (i,)
        return out

    def _merge_chunked(self, raw, ends: list[int], lengths, long: list[int], out: list) -> None:
        """out[k] = the ids of long pieces k (raw[ends[k] - lengths[k]:ends[k]]) merged as
        overlapping chunks (bpe_chunks.merge_pieces): each piece of CHUNK_PIECE bytes or more in
        a batch of its own, the shorter ones all in one batch when together they hold that many
        (a batch's rounds cost the same for one piece or thirty, and one such piece alone is
        merged for less by the rounds and the heap; the long ones together would make arrays
        past the caches: Llama 3 over utf8seq.txt, 866 KB in one batch, premerge_chars 7.6 ->
        16 ms). Only pieces longer than any token (so that none is a token itself) and not runs
        ("aaaa", or of one multi-byte char) are chunked; a piece whose chunks cannot be glued, or
        with a byte that has no token, is left None. Chunks meet without overlap where no merge
        crosses (bpe_cuts.py), when the pieces have multi-byte chars enough to be cut there."""
        longest = self._longest_token()
        take = [k for k in long
                if int(lengths[k]) > longest and _worth_chunking(raw[ends[k] - int(lengths[k]):ends[k]])]
        short = [k for k in take if lengths[k] < CHUNK_PIECE]
        groups = [[k] for k in take if lengths[k] >= CHUNK_PIECE]
        if short and int(lengths[short].sum()) >= CHUNK_PIECE:
            groups.append(short)
        for group in groups:
            self._merge_chunked_group(raw, ends, lengths, group, out)

    def _merge_chunked_group(self, raw, ends: list[int], lengths, group: list[int], out: list) -> None:
        """_merge_chunked of one batch: the pieces k in group, their bytes laid back to back."""
        import numpy as np

        from .bpe_chunks import char_starts, merge_pieces

        sizes = [int(lengths[k]) for k in group]
        # (slices joined: an index array of every byte, 8 bytes each in fresh pages, and a gather
        # through it had cost GPT-4o over utf8seq.txt's five long pieces ~6 ms)
        sub = np.concatenate([raw[ends[k] - n:ends[k]] for k, n in zip(group, sizes)])
        at = (np.cumsum(sizes) - sizes).tolist()
        leads = [char_starts(sub[a:a + n]) for a, n in zip(at, sizes)]
        cuts = None
        if self._f.has(mtok.SECTION_CUT_WINDOWS) and np.count_nonzero(sub >= 0xC0) * CHUNK_CUT_LEADS >= len(sub):
            found = self._cut_table().cuts(sub, np.array(at, dtype=np.int64))[0]
            if len(found):
                lo = np.searchsorted(found, at).tolist()
                hi = np.searchsorted(found, np.add(at, sizes)).tolist()
                cuts = [found[a:b] - o for a, b, o in zip(lo, hi, at)]
        got = merge_pieces(sizes, leads, lambda starts, stops: self._merge_ranges_blocked(sub, starts, stops),
                           self._token_lengths(), cuts)
        for k, ids in zip(group, got):
            if ids is not None:
                out[k] = ids.tolist()  # (a list: see piece_cache)

    def _merge_chars(self, raw, starts, width, history: bool = False):
        """_merge_ranges of single chars raw[starts[k]:starts[k] + width[k]]: those of up to 3 bytes
        in closed form (BatchMerger.merge_chars), 4-byte ones by the batch merge. With history, also
        merge_chars' (left, right) symbols of each char, rows of UNKNOWN for the 4-byte ones."""
        import numpy as np

        from .bpe_cuts import UNKNOWN
        from .textparts import ranges

        long = width > 3
        if long.all():
            got = self._merge_ranges(raw, starts, starts + width)
            if got is None or not history:
                return got
            unknown = np.full((len(width), 3), UNKNOWN, dtype=np.int64)
            return (*got, unknown, unknown)
        b0 = raw[starts].astype(np.int64)  # (clip keeps a last char's unused bytes in range)
        b1 = raw.take(starts + 1, mode="clip").astype(np.int64)
        b2 = raw.take(starts + 2, mode="clip").astype(np.int64)
        if not long.any():
            return self._batch.merge_chars(b0, b1, b2, width, self._byte_ids_np, history)
        short = np.flatnonzero(~long)
        got_s = self._batch.merge_chars(b0[short], b1[short], b2[short], width[short], self._byte_ids_np, history)
        got = self._merge_ranges(raw, starts[long], starts[long] + width[long])
        if got_s is None or got is None:
            return None
        flat_s, count_s = got_s[:2]
        flat_l, count_l = got
        counts = np.empty(len(width), dtype=np.int64)
        counts[short], counts[long] = count_s, count_l
        flat = np.empty(int(counts.sum()), dtype=np.int64)
        begin = np.cumsum(counts) - counts
        flat[ranges(begin[short], count_s)] = flat_s
        flat[ranges(begin[long], count_l)] = flat_l
        if not history:
            return flat, counts
        left = np.full((len(width), 3), UNKNOWN, dtype=np.int64)
        right = left.copy()
        left[short], right[short] = got_s[2], got_s[3]
        return flat, counts, left, right

    def _merge_ranges_blocked(self, raw, starts, ends):
        """_merge_ranges in batches of about RANGE_BATCH bytes of ranges each (a range longer
        than that: alone). A batch's arrays take ~25 bytes a byte at their peak, and the pages of
        a bigger one are touched fresh on every call: what a call frees is returned to the system
        (glibc trims the heap), and a page's first touch costs ~2.6 us on this VM. The chunks of
        utf8seq.txt's longest piece (526 KB) in one batch peaked at 16 MB; in batches, one
        batch's pages serve the next. Cold calls (best of 3 in a process, 4 alternations
        with one batch): Llama 3 over utf8seq.txt 61-65 -> 57.5-58.6 ms, Qwen3 74-78 -> 68.6-74
        (Llama 3's third call of a process: 5.2-7.1K -> 1.0-1.5K page faults; its second call
        ~5.1-5.6K either way); 64K bytes and 256K were no better; 10^6 random letters and 10^6
        CJK ideographs (Llama 3, cl100k, o200k) within noise."""
        import numpy as np

        total = np.cumsum(ends - starts)
        if int(total[-1]) <= RANGE_BATCH:
            return self._merge_ranges(raw, starts, ends)
        cut = np.searchsorted(total, np.arange(RANGE_BATCH, int(total[-1]), RANGE_BATCH), side="right").tolist()
        ids, counts = [], []
        for a, b in zip([0] + cut, cut + [len(starts)]):
            if b > a:
                got = self._merge_ranges(raw, starts[a:b], ends[a:b])
                if got is None:
                    return None
                ids.append(got[0])
                counts.append(got[1])
        return np.concatenate(ids), np.concatenate(counts)

    def _merge_ranges(self, raw, starts, ends):
        """(ids back to back, count per range) of BPE over each byte range raw[starts[k]:ends[k]]
        as a word of its own (no whole-token lookup: pure merging), or None for a byte with no token."""
        import numpy as np

        lengths = ends - starts
        if len(starts) and (starts[1:] == ends[:-1]).all():  # (chunks that meet at cuts: the bytes as they lie)
            craw = raw[int(starts[0]):int(ends[-1])]
        else:
            craw = raw[np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))]
        if self._byte_gaps is not None and self._byte_gaps.take(craw).any():
            return None
        single, mlen = None, lengths
        if self._atomic is not None:
            sym, mlen, craw, single = self._premerge(craw, lengths)
        else:
            sym = self._byte_ids_u32.take(craw)
        ids, counts = self._batch.merge(sym, mlen, self._merge, 0, craw, single, self._byte_ids_np)
        return ids.astype(np.int64), counts

    def _id_lists(self):
        """idlist.IdLists of the vocabulary: the merged ids of many multi-token words (CJK) become
        tuples of shared int objects once a batch holds as many ids as the vocabulary has (Llama
        3 over wagahai.txt, cold: tuples() 12 -> 8 ms, and the caller's concat 7-9 -> 5-7)."""
        if self._lists is None:
            from ..idlist import IdLists

            self._lists = IdLists(len(self.off) - 1)
        return self._lists

    def _token_lengths(self):
        """Byte length of every token (numpy int64), computed once."""
        if self._tok_len is None:
            import numpy as np

            self._tok_len = np.diff(np.frombuffer(self.off, dtype="<u4").astype(np.int64))
        return self._tok_len

    def _longest_token(self) -> int:
        if self._longest is None:
            self._longest = int(self._token_lengths().max(initial=0))
        return self._longest

    def _whole_tokens(self, raw, lengths):
        from .bpe_batch import hash_filter, whole_tokens

        if self._present is None and len(lengths) >= FILTER_WORDS:
            self._present = hash_filter(self._piece_hash[0])
        try:
            return whole_tokens(*self._piece_hash, raw, lengths, with_hashes=True, present=self._present)
        except ValueError as e:
            f = self._f
            raise FormatError(f.path, f"inconsistent file: {e}", section="piece_hash",
                              offset=f.sections[mtok.SECTION_PIECE_HASH][1]) from None

    def _premerge(self, raw, lengths):
        """premerge.premerge_chars, with its BMP index built once a batch holds enough multi-byte
        chars to pay for it (~4 ms; a binary search each otherwise: en.txt has one, its BOM)."""
        import numpy as np

        from .premerge import bmp_index, premerge_chars

        bmp = self._atomic_bmp
        if bmp is None and np.count_nonzero(raw >= 0xC0) >= BMP_INDEX_CHARS:
            # (the masks first: a damaged section then fails every call, not only the first)
            self._atomic_edges = self._edge_index()
            bmp = self._atomic_bmp = bmp_index(self._atomic)
        return premerge_chars(raw, lengths, self._atomic, self._byte_ids_u32, bmp,
                              self._atomic_edges if bmp is not None else None)

    def _edge_index(self):
        """premerge.edge_index of the atomic_edges section, or None without one. A mask bit set
        wrongly would premerge a char that BPE joins to its neighbour first (a wrong id, not a
        slow one), so the section's checksum is checked first, and keys out of order or range
        are refused."""
        import numpy as np

        from .premerge import edge_index

        f = self._f
        sid = mtok.SECTION_ATOMIC_EDGES
        if not f.has(sid):
            return None
        f.verify_section(sid)
        pairs = np.frombuffer(f.view(sid, mtok.U64), dtype="<u8")
        key = pairs[0::2]
        problem = ("an odd number of entries (they go in pairs: key, mask)" if len(pairs) % 2
                   else "keys not ascending" if not (key[1:] > key[:-1]).all()
                   else "a code point past U+FFFF" if len(key) and int(key[-1]) >> 1 > 0xFFFF else None)
        if problem:
            raise FormatError(f.path, f"inconsistent file: {problem}", section=mtok.section_name(sid),
                              offset=f.sections[sid][1])
        return edge_index(pairs)

    def _start_batch(self):
        import numpy as np

        from .bpe_batch import BatchMerger

        f = self._f
        nonmono = f.view(mtok.SECTION_MERGE_NONMONO, mtok.U8) if f.has(mtok.SECTION_MERGE_NONMONO) else None
        permutation = self._ranks_permutation and self.ranks is not self.results
        if permutation:
            # The exporter proved the ranks are 0 .. m - 1, each once, so the batch merge takes them
            # as its dense ranks unchecked (the check is a pass over all of them: Gemma 3's 515K,
            # ~1.5 ms of a first call); a damaged section must not pass for one, so its checksum is
            # checked instead (~0.5 ms).
            f.verify_section(mtok.SECTION_MERGE_RANKS)
        batch = BatchMerger(self.keys, self.ranks, self.results, nonmono, permutation)
        try:
            batch.build_codes()
        except ValueError as e:
            sid = mtok.SECTION_MERGE_RANKS if batch.wide else mtok.SECTION_MERGE_RESULTS
            raise FormatError(f.path, f"inconsistent file: {e}", section=mtok.section_name(sid),
                              offset=f.sections[sid][1]) from None
        self._byte_ids_np = np.array(self.byte_ids, dtype=np.int64)
        self._byte_ids_u32 = self._byte_ids_np.astype(np.uint32)  # (a byte's symbol: NO_ID stays NO_ID)
        gaps = self._byte_ids_u32 == mtok.NO_ID
        self._byte_gaps = gaps if gaps.any() else None  # the bytes with no token, when there are any
        if f.has(mtok.SECTION_ATOMIC_CHARS):  # optional: older files build characters byte by byte
            self._atomic = np.frombuffer(f.view(mtok.SECTION_ATOMIC_CHARS, mtok.U64), dtype="<u8")
            if len(self._atomic) and int((self._atomic & np.uint64(0xFFFFFFFF)).max()) >= len(self.off) - 1:
                raise FormatError(f.path, "inconsistent file: token id outside the vocabulary",
                                  section="atomic_chars", offset=f.sections[mtok.SECTION_ATOMIC_CHARS][1])
        if f.has(mtok.SECTION_PIECE_HASH):  # optional: older files merge every piece
            self._piece_hash = (np.frombuffer(f.view(mtok.SECTION_PIECE_HASH, mtok.U64), dtype="<u8"),
                           np.frombuffer(self.tb, dtype=np.uint8), np.frombuffer(self.off, dtype="<u4"))
        if self.ignore_merges:
            if f.has(mtok.SECTION_UNREACHED):
                ids = f.view(mtok.SECTION_UNREACHED, mtok.U32)
                if len(ids) and max(ids) >= len(self.off) - 1:
                    raise FormatError(f.path, f"inconsistent file: token id {max(ids)} outside the vocabulary",
                                      section="unreached", offset=f.sections[mtok.SECTION_UNREACHED][1])
                self._unreached = set(ids)
                if self._piece_hash is not None:  # their hashes: the merged words worth checking
                    from .bpe_batch import piece_hashes

                    _table, tb, off = self._piece_hash
                    u = np.frombuffer(ids, dtype="<u4").astype(np.int64)
                    lengths = (off[u + 1] - off[u]).astype(np.int64)
                    u = u[lengths > 0]
                    # sorted, for searchsorted
                    self._unreached_h = np.sort(piece_hashes(tb, off[u].astype(np.int64), lengths[lengths > 0]))
            else:  # older files: check every multi-token piece against the vocabulary
                self._unreached = _Everything()
        # Set last: _batch is what callers test, so a table refused above leaves none set, and the
        # next call is refused the same way (it had gone on with a half-built one: AttributeError).
        self._batch = batch

    def piece_offsets(self, text: str, toks) -> list[tuple[int, int]]:
        """Code-point span of each token in the piece: from its first byte's char to its last's."""
        off = self.off
        data = text.encode("utf-8", "surrogatepass")
        ascii_ = len(data) == len(text)
        if not ascii_:
            char_of = []
            for ci, ch in enumerate(text):
                char_of.extend([ci] * len(ch.encode("utf-8", "surrogatepass")))
        out, pos, n = [], 0, len(data)
        for t in toks:
            b0 = pos
            b1 = min(pos + max(off[t + 1] - off[t], 1), n)
            pos = b1
            if ascii_:
                out.append((b0, b1))
            else:
                out.append((char_of[min(b0, n - 1)], char_of[max(b1 - 1, 0)] + 1))
        return out

    def _symbols(self, data: bytes) -> list[int]:
        byte_ids = self.byte_ids
        syms = [byte_ids[b] for b in data]
        if mtok.NO_ID in syms:
            # A byte with no token: use unk if the model has one, else drop it (as tokenizers does).
            if self.unk_id is None:
                syms = [s for s in syms if s != mtok.NO_ID]
            else:
                syms = [self.unk_id if s == mtok.NO_ID else s for s in syms]
        return syms

    def _merge(self, ids: list[int], ranks=None) -> list[int]:
        """Merge symbols to the end; ranks (optional, from the batch merge): each adjacent
        pair's rank, negative for none."""
        n = len(ids)
        if n < 2:
            return ids
        if n > LONG_PIECE:
            return self._merge_heap(ids, ranks)
        pair = self.pair
        ranks, results = [], []
        for k in range(n - 1):
            r, res = pair(ids[k], ids[k + 1])
            ranks.append(r)
            results.append(res)
        while True:
            best = min(ranks)
            if best == INF:
                return ids
            k = ranks.index(best)
            ids[k] = results[k]
            del ids[k + 1]
            del ranks[k]
            del results[k]
            if k > 0:
                ranks[k - 1], results[k - 1] = pair(ids[k - 1], ids[k])
            if k < len(ids) - 1:
                ranks[k], results[k] = pair(ids[k], ids[k + 1])
            if not ranks:
                return ids

    def _merge_heap(self, ids: list[int], ranks=None) -> list[int]:
        # A 10^6-symbol piece keeps millions of heap tuples alive; the cyclic GC would rescan
        # them on every full collection (superlinear time) though none can be part of a cycle.
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._merge_heap_nogc(ids, ranks)
        finally:
            if enabled:
                gc.enable()

    def _merge_heap_nogc(self, ids: list[int], ranks=None) -> list[int]:
        """Heap of plain ints rank << 32 | position (C-level comparisons; leftmost wins a tie).
        An entry is stale unless the pair now at its position still has its rank: a pair with
        an equal rank merges to the same token (ranks are per merge, or per result for tiktoken),
        so merging it then is what sequential BPE does."""
        n = len(ids)
        pair = self.pair
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        nxt[-1] = -1
        alive = [True] * n
        if ranks is None:
            ranks = [pair(ids[k], ids[k + 1])[0] for k in range(n - 1)]
        heap = [(r << 32) | k for k, r in enumerate(ranks[:n - 1]) if 0 <= r < INF]
        heapq.heapify(heap)
        heappop, heappush = heapq.heappop, heapq.heappush
        low = (1 << 32) - 1
        while heap:
            key = heappop(heap)
            k = key & low
            j = nxt[k]
            if j < 0 or not alive[k]:
                continue
            r, res = pair(ids[k], ids[j])
            if r != key >> 32:
                continue
            ids[k] = res
            alive[j] = False
            nj = nxt[j]
            nxt[k] = nj
            if nj >= 0:
                prv[nj] = k
                r = pair(res, ids[nj])[0]
                if r != INF:
                    heappush(heap, (r << 32) | k)
            p = prv[k]
            if p >= 0:
                r = pair(ids[p], res)[0]
                if r != INF:
                    heappush(heap, (r << 32) | p)
        return [ids[k] for k in range(n) if alive[k]]


def _worth_chunking(piece) -> bool:
    """bpe_chunks.worth_chunking of a piece's bytes, compared char by char (its first char's width)."""
    from .bpe_chunks import utf8_width, worth_chunking

    return worth_chunking(piece, utf8_width(int(piece[0])))


class _Everything:
    def __contains__(self, item) -> bool:
        return True
