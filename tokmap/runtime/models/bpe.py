"""Byte-level BPE over the mapped vocabulary and packed merge table.

A piece's UTF-8 bytes start as single-byte symbols; the adjacent pair with the lowest merge rank
is merged (ties: leftmost) until none is left. Short pieces use a list scan (fast for the usual
2-10 symbols); long ones a heap over a linked list, so a 10^5-byte piece stays O(n log n).
Merge lookups binary-search the sorted uint64 keys (left << 32 | right) in place; results are
memoised per tokenizer, as are whole pieces.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left

from ... import mtok
from .vocab import VocabFile

INF = 1 << 62
LONG_PIECE = 128  # symbols; above this the heap merge wins over rescanning the list


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
        self.n_keys = len(self.keys)
        self.pair_cache: dict[int, tuple[int, int]] = {}
        self.piece_cache: dict[str, tuple[int, ...]] = {}

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
        if len(data) <= 64:  # bound the cache by what is worth remembering
            self.piece_cache[text] = out
        return out

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

    def _merge(self, ids: list[int]) -> list[int]:
        n = len(ids)
        if n < 2:
            return ids
        if n > LONG_PIECE:
            return self._merge_heap(ids)
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

    def _merge_heap(self, ids: list[int]) -> list[int]:
        n = len(ids)
        pair = self.pair
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        nxt[-1] = -1
        alive = [True] * n
        heap = []
        for k in range(n - 1):
            r, res = pair(ids[k], ids[k + 1])
            if r != INF:
                heap.append((r, k, ids[k], ids[k + 1], res))
        heapq.heapify(heap)
        while heap:
            r, k, left, right, res = heapq.heappop(heap)
            j = nxt[k]
            # Stale entries: the left symbol died or changed, or its right neighbour changed.
            if not alive[k] or j < 0 or ids[k] != left or ids[j] != right:
                continue
            ids[k] = res
            alive[j] = False
            nj = nxt[j]
            nxt[k] = nj
            if nj >= 0:
                prv[nj] = k
                r2, res2 = pair(res, ids[nj])
                if r2 != INF:
                    heapq.heappush(heap, (r2, k, res, ids[nj], res2))
            p = prv[k]
            if p >= 0:
                r2, res2 = pair(ids[p], res)
                if r2 != INF:
                    heapq.heappush(heap, (r2, p, ids[p], res, res2))
        return [ids[k] for k in range(n) if alive[k]]
