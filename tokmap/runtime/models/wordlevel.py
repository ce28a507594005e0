"""WordLevel (tokenizers' models::wordlevel): the whole piece is one vocabulary token, else unk."""

from __future__ import annotations

from . import cached_ids
from .vocab import VocabFile


class WordLevel(VocabFile):
    def __init__(self, f, meta: dict):
        super().__init__(f)
        self.unk_id = meta["model"]["unk_id"]
        self.word_cache: dict[str, tuple[int, ...]] = {}

    def encode_pieces(self, pieces: list[str]) -> list[int]:
        """Ids of a piece list (the one-regex fast path): repeated words cost one dict lookup
        instead of a binary search over the vocabulary."""
        return cached_ids(self.word_cache, pieces, self.encode_piece)

    def encode_piece(self, text: str) -> tuple[int, ...]:
        if not text:  # tokenizers never hands an empty split to the model
            return ()
        i = self.lookup(text.encode("utf-8", "surrogatepass"))
        return (self.unk_id if i is None else i,)

    def piece_offsets(self, text: str, ids) -> list[tuple[int, int]]:
        return [(0, len(text))] if text else []
