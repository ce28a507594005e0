"""Unigram language-model tokenization (HF tokenizers' Unigram), over the mapped vocabulary.

Pieces are the UTF-8 strings of the common token sections; scores the f64 section unigram_scores.
Viterbi runs over code points with f64 sums, candidates visited by start position and then length,
and a candidate replaces a node's best only when strictly better (so ties keep the longest final
piece), exactly as tokenizers' encode_optimized. Every piece is matchable (<unk>, <s>, byte pieces);
a position where no one-char piece starts gets an unk node scored min(score) - 10. Runs of unk
nodes (including a matched unk piece) are fused into one token whose text is looked up again: a
vocabulary string gives its id, else byte_fallback pieces <0xHH> (all sharing the run's span) when
all exist, else the unk id (an error when the model has none).

The piece -> id map and the prefix set used for the lattice search are built on the first encode,
never at load; whole pieces are memoised, as in the BPE runtime. Many distinct new words at once
(a long call) go through the same lattice in numpy (unigram_batch.py), once numpy is imported.
"""

from __future__ import annotations

import sys

from ... import mtok
from . import cached_ids
from .vocab import VocabFile
from ...errors import EncodeError

UNK_PENALTY = 10.0
BATCH_WORDS = 128  # distinct new words in one call from which they go to the numpy lattice (once imported)
BATCH_TEXT = 1 << 13  # ... or chars in all, from which they go there however few (long lines)
BATCH_IMPORT = 1 << 15  # chars of new words from which the lattice pays for importing numpy (~40-110 ms)
BATCH_CHARS = 64  # chars of the longest word the numpy lattice's Viterbi steps take (unigram_batch.py)


class Unigram(VocabFile):
    plain_text = True  # vocabulary strings are the tokens' UTF-8 text (no byte-level alphabet)

    def __init__(self, f, meta: dict):
        m = meta["model"]
        self.unk_id = m["unk_id"]
        self.byte_fallback = bool(m["byte_fallback"])
        self.n = m["n_pieces"]
        super().__init__(f)
        self.scores = f.view(mtok.SECTION_UNIGRAM_SCORES, mtok.F64)
        if len(self.scores) != self.n or len(self.off) < self.n + 1:
            raise ValueError(f"unigram scores hold {len(self.scores)} entries for {self.n} pieces")
        self._ids = None
        self._prefixes = None
        self._max_len = 0
        self.min_score = m["min_score"]
        self.piece_cache: dict[str, tuple] = {}
        self.ids_cache: dict[str, tuple[int, ...]] = {}
        self._last = None
        self._lattice = None  # unigram_batch.Lattice on the first batch; False when it cannot serve

    # -- vocabulary -------------------------------------------------------------------------
    def lookup(self, data: bytes) -> int | None:
        """Id of the piece with exactly these bytes (last id for a repeated piece)."""
        if self._ids is None:
            self._index()
        try:
            return self._ids.get(data.decode("utf-8"))
        except UnicodeDecodeError:
            return None

    def _index(self):
        tb, off = self.tb, self.off
        ids: dict[str, int] = {}
        prefixes: set[str] = set()
        longest = 0
        for i in range(self.n):
            s = bytes(tb[off[i]: off[i + 1]]).decode("utf-8", "surrogatepass")
            ids[s] = i  # a repeated piece: the last id wins, as tokenizers' token_to_ids
            if len(s) > longest:
                longest = len(s)
            for k in range(1, len(s)):
                prefixes.add(s[:k])
        self._ids, self._prefixes, self._max_len = ids, prefixes, longest

    # -- encoding ---------------------------------------------------------------------------
    def encode_piece(self, text: str) -> tuple[int, ...]:
        return self._encode(text)[0]

    def encode_words(self, words: list[str]) -> list[int]:
        """Ids of many pieces at once: one C-level pass of dict lookups, misses filled after."""
        return cached_ids(self.ids_cache, words, encode_many=self._encode_many)

    def _encode_many(self, words: list[str]) -> list[tuple[int, ...]]:
        """encode_piece of many distinct words: those the numpy lattice takes from it, when they
        are many or long and numpy is imported, or so many that the scalar lattice (~1 us a char)
        would cost more than importing it; the rest, and every word otherwise, one by one."""
        todo = [w for w in words if w]
        chars = sum(map(len, todo))
        if "numpy" in sys.modules:
            pays = len(todo) >= BATCH_WORDS or chars >= BATCH_TEXT
        else:
            pays = chars >= BATCH_IMPORT
        if not pays or not self._batch_ready():
            return list(map(self.encode_piece, words))
        got, paths = self._lattice.encode(todo, self.unk_id, self.min_score - UNK_PENALTY, self.byte_fallback,
                                          BATCH_CHARS)
        got = dict(zip(todo, got))
        for k, path in paths.items():  # words whose best path has unk nodes: fused as the scalar path does
            got[todo[k]] = self._fused(todo[k], path, self._lattice.lookup)[0]
        return [got.get(w) or self.encode_piece(w) for w in words]

    def _batch_ready(self) -> bool:
        """Whether the numpy lattice serves this vocabulary (built on first use)."""
        if self._lattice is None:
            from .unigram_batch import Lattice, Unusable

            try:
                self._lattice = Lattice.from_file(self.tb, self.off, self.scores, self.n)
            except Unusable:
                self._lattice = False
        return bool(self._lattice)

    def piece_offsets(self, text: str, toks) -> list[tuple[int, int]]:
        return list(self._encode(text)[1])

    def _encode(self, text: str):
        hit = self.piece_cache.get(text)
        if hit is not None:
            return hit
        if self._ids is None:
            self._index()
        last = self._last
        if last is not None and last[0] == text:  # piece_offsets right after encode_piece of a long piece
            return last[1]
        out = self._viterbi(text)
        self._last = (text, out)
        if len(text) <= 64:
            if len(self.piece_cache) > 1 << 16:
                self.piece_cache.clear()
            self.piece_cache[text] = out
        return out

    def _viterbi(self, text: str):
        n = len(text)
        if n == 0:
            return (), ()
        ids, prefixes, scores = self._ids, self._prefixes, self.scores
        max_len = self._max_len
        unk_id = self.unk_id
        unk_score = self.min_score - UNK_PENALTY
        best = [0.0] * (n + 1)
        start = [-1] * (n + 1)
        node = [0] * (n + 1)
        for s in range(n):
            base = best[s]
            single = False
            lim = min(n, s + max_len)
            for e in range(s + 1, lim + 1):
                sub = text[s:e]
                i = ids.get(sub)
                if i is not None:
                    cand = scores[i] + base
                    if start[e] < 0 or cand > best[e]:
                        best[e] = cand
                        start[e] = s
                        node[e] = i
                    if e == s + 1:
                        single = True
                if sub not in prefixes:
                    break
            if not single:
                if unk_id is None:
                    raise EncodeError("Unigram: an unknown character needs the unk token, but the model has "
                                      "no unk_id (tokenizers raises MissingUnkId)")
                cand = unk_score + base
                e = s + 1
                if start[e] < 0 or cand > best[e]:
                    best[e] = cand
                    start[e] = s
                    node[e] = unk_id
        path = []
        e = n
        while e > 0:
            path.append((start[e], e, node[e]))
            e = start[e]
        path.reverse()
        return self._fused(text, path)

    def _fused(self, text: str, path: list, get=None):
        """(ids, spans) of a best path [(start, end, id), ...] through text: each run of unk nodes
        (a matched unk piece among them) fused into one surface string and looked up again (get:
        str -> id or None, the piece map's get unless given); a piece node keeps its id, which is
        what that lookup of its own text gives."""
        unk_id = self.unk_id
        spans = []
        run = -1  # where the current run of unk nodes starts
        for s, e, i in path:
            if unk_id is not None and i == unk_id:
                if run < 0:
                    run = s
                continue
            if run >= 0:
                spans.append((run, s, None))
                run = -1
            spans.append((s, e, i))
        if run >= 0:
            spans.append((run, len(text), None))
        if get is None and any(i is None for _s, _e, i in spans):
            if self._ids is None:
                self._index()
            get = self._ids.get
        out_ids, out_spans = [], []
        for s, e, i in spans:
            if i is None:
                sub = text[s:e]
                i = get(sub)
            if i is None:
                if self.byte_fallback:
                    bids = [get(f"<0x{b:02X}>") for b in sub.encode("utf-8", "surrogatepass")]
                    if None not in bids:
                        out_ids.extend(bids)
                        out_spans.extend([(s, e)] * len(bids))
                        continue
                if unk_id is None:
                    raise EncodeError("Unigram: an unknown piece needs the unk token, but the model has no unk_id")
                i = unk_id
            out_ids.append(i)
            out_spans.append((s, e))
        return tuple(out_ids), tuple(out_spans)
