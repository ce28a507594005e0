"""Tokenization models run over pre-tokenized pieces, chosen by META's model type.

A model has `encode_piece(text) -> tuple[int, ...]` and `piece_offsets(text, ids) -> [(start, end)]`
(code-point spans of each token inside the piece), plus `lookup(bytes) -> id | None` and
`token_bytes(id)` over the mapped vocabulary.
"""

from __future__ import annotations


def build(f, meta):
    kind = meta["model"].get("type", "bpe")
    if kind == "bpe":
        if meta["model"].get("byte_level", True) is False:
            from .charbpe import CharBPE  # symbols are characters, with byte fallback

            return CharBPE(f, meta)
        from .bpe import BPE

        return BPE(f, meta)
    if kind == "spm":
        from .spm import SentencePiece

        return SentencePiece(f, meta)
    if kind == "wordpiece":
        from .wordpiece import WordPiece

        return WordPiece(f, meta)
    if kind == "wordlevel":
        from .wordlevel import WordLevel

        return WordLevel(f, meta)
    if kind == "unigram":  # tokenizer.json Unigram (tokenizers' rules; .model files use spm.py)
        from .unigram import Unigram

        return Unigram(f, meta)
    raise ValueError(f"unknown model type {kind!r}")
