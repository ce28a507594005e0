"""Tokenization models run over pre-tokenized pieces, chosen by META's model type.

A model has `encode_piece(text) -> tuple[int, ...]` and `piece_offsets(text, ids) -> [(start, end)]`
(code-point spans of each token inside the piece), plus `lookup(bytes) -> id | None` and
`token_bytes(id)` over the mapped vocabulary.
"""

from __future__ import annotations


def build(f, meta):
    kind = meta["model"].get("type", "bpe")
    if kind == "bpe":
        from .bpe import BPE

        return BPE(f, meta)
    raise ValueError(f"unknown model type {kind!r}")
