"""Tokenization models run over pre-tokenized pieces, chosen by META's model type.

A model has `encode_piece(text) -> tuple[int, ...]` and `piece_offsets(text, ids) -> [(start, end)]`
(code-point spans of each token inside the piece), plus `lookup(bytes) -> id | None` and
`token_bytes(id)` over the mapped vocabulary.
"""

from __future__ import annotations

from itertools import compress, filterfalse, repeat
from operator import is_

WORD_CACHE_MAX = 1 << 16  # words; a word cache is emptied when it grows past this
WORD_CACHE_LEN = 64  # chars; longer words are not remembered
LONG_CACHE_CHARS = 1 << 20  # chars; the long pieces a BPE piece cache holds, in all (LongPieces)
LONG_PIECE_MAX = LONG_CACHE_CHARS // 4  # chars; a longer piece is never remembered


class LongPieces:
    """The long pieces a piece cache holds, bounded by their total length.

    A piece cache keeps every short piece; a long one (a line of unspaced CJK, Gemma's whole
    lines, a minified file) costs memory in proportion to its length, so these are kept while
    their chars add up to at most LONG_CACHE_CHARS, and all of them are dropped together when a
    new one would pass that. Text encoded again (a long prompt sent with every request, a
    document re-read) then costs one lookup per long piece instead of a merge."""

    __slots__ = ("keys", "chars")

    def __init__(self):
        self.keys: list[str] = []
        self.chars = 0

    def add(self, cache: dict, piece: str, ids):
        """Remember piece -> ids in cache if it may be; returns the ids to hand out: a tuple when
        remembered (callers may change a list they are given; never the cache's), else ids."""
        n = len(piece)
        if n > LONG_PIECE_MAX:
            return ids
        if self.chars + n > LONG_CACHE_CHARS:
            for k in self.keys:
                cache.pop(k, None)
            self.reset()
        if type(ids) is not tuple:
            ids = tuple(ids)
        cache[piece] = ids
        self.keys.append(piece)
        self.chars += n
        return ids

    def reset(self) -> None:
        """After the cache itself was emptied."""
        self.keys = []
        self.chars = 0


def concat(seqs) -> list:
    """The items of an iterable of tuples (or lists), in one new list. list.extend copies each
    tuple whole, where chain.from_iterable makes an iterator per tuple: the 264K pieces of
    code.txt under cl100k in 12 against 16 ms. (extend returns None, so any() runs them all.)"""
    out: list = []
    any(map(out.extend, seqs))
    return out


def cached_ids(cache: dict, words: list[str], encode_one=None, encode_many=None) -> list[int]:
    """Ids of many words at once: one C-level pass of dict lookups, each distinct miss filled once
    by encode_one(word) or encode_many(list of them) -> tuples of ids (and remembered when short).
    Shared by the models whose whole-stretch path hands over a word list (WordPiece, Unigram,
    WordLevel). concat(cached_parts(...)) without the list of parts between (minilm over en.txt's
    62K words: a list of 62K pointers, and a pass over it, fewer)."""
    if cache:
        try:  # all hits (a warm call): one pass; the first miss abandons it
            return concat(map(cache.__getitem__, words))
        except KeyError:
            pass
    fresh = _fill(cache, filterfalse(cache.__contains__, words) if cache else words, encode_one, encode_many)
    ids = concat(map(cache.__getitem__, words))
    _forget(cache, fresh)
    return ids


def cached_parts(cache: dict, words: list[str], encode_one=None, encode_many=None) -> list[tuple[int, ...]]:
    """cached_ids' ids of each word, a tuple per word, for callers that need them apart."""
    if cache:
        parts = list(map(cache.get, words))
        if None not in parts:
            return parts
        missing = compress(words, map(is_, parts, repeat(None)))
    else:  # a first call over a document: most of its words repeat, none is known
        missing = words
    fresh = _fill(cache, missing, encode_one, encode_many)
    parts = list(map(cache.__getitem__, words))
    _forget(cache, fresh)
    return parts


def _fill(cache: dict, missing, encode_one, encode_many) -> dict:
    """The distinct words of `missing` (those of a call the cache lacks: all of them when it is
    empty), encoded and put in the cache; returned, for _forget."""
    fresh = dict.fromkeys(missing)
    if encode_many is not None:
        fresh.update(zip(fresh, encode_many(list(fresh))))
    else:
        for w in fresh:
            fresh[w] = encode_one(w)
    cache.update(fresh)
    return fresh


def _forget(cache: dict, fresh: dict) -> None:
    """After a fill: the cache emptied when it grew past WORD_CACHE_MAX, else the long words
    just put in taken out again (they were there only for this call's lookups)."""
    if len(cache) > WORD_CACHE_MAX:
        cache.clear()
    for w in compress(fresh, map(WORD_CACHE_LEN.__lt__, map(len, fresh))):  # (C-level over the short ones)
        cache.pop(w, None)


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
