"""WordPiece over the mapped vocabulary (tokenizers' models::wordpiece).

A piece longer than max_input_chars_per_word code points is one unk. Otherwise, from the start,
the longest vocabulary entry is taken (continuing_subword_prefix + text for every later position);
if some position has no entry at all, the whole piece becomes one unk spanning it.
Vocabulary lookups binary-search SORTED_IDS in the mapped file; results are memoised per piece.
"""

from __future__ import annotations

from . import encode_cached
from .vocab import VocabFile


class WordPiece(VocabFile):
    def __init__(self, f, meta: dict):
        super().__init__(f)
        m = meta["model"]
        self.unk_id = m["unk_id"]
        self.prefix = m["prefix"].encode("utf-8")
        self.max_chars = m["max_input_chars_per_word"]
        self.cache: dict[str, tuple] = {}
        self.ids_cache: dict[str, tuple[int, ...]] = {}
        self._vocab: dict[bytes, int] | None = None

    def lookup(self, data: bytes) -> int | None:
        """As VocabFile.lookup, through a dict built on the first call (a WordPiece word costs
        several lookups, and the binary search over the mapped ids is microseconds each)."""
        v = self._vocab
        if v is None:
            tb, off, ids = self.tb, self.off, self.sorted_ids
            v = {}
            for i in reversed(ids):  # equal strings: the first in sorted order wins, as in the search
                v[tb[off[i] : off[i + 1]].tobytes()] = i
            self._vocab = v
        return v.get(data)

    def _split(self, text: str):
        """[(id, start_char, end_char)] or None when some position has no token."""
        n = len(text)
        if n > self.max_chars:
            return None
        out, start, lookup, prefix = [], 0, self.lookup, self.prefix
        while start < n:
            end = n
            while start < end:
                data = text[start:end].encode("utf-8", "surrogatepass")
                i = lookup(prefix + data if start else data)
                if i is not None:
                    out.append((i, start, end))
                    break
                end -= 1
            else:
                return None
            start = end
        return out

    def _encode(self, text: str):
        hit = self.cache.get(text)
        if hit is None:
            toks = self._split(text)
            hit = ((self.unk_id,), ((0, len(text)),)) if toks is None else \
                (tuple(t[0] for t in toks), tuple((t[1], t[2]) for t in toks))
            if len(text) <= 64:
                self.cache[text] = hit
        return hit

    def encode_piece(self, text: str) -> tuple[int, ...]:
        return self._encode(text)[0]

    def piece_offsets(self, text: str, ids) -> list[tuple[int, int]]:
        return list(self._encode(text)[1])

    def encode_words(self, words: list[str]) -> list[int]:
        """Ids of many pieces at once: one C-level pass of dict lookups, misses filled after."""
        return encode_cached(self.ids_cache, words, self.encode_piece)
