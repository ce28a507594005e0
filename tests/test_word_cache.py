"""models.cached_ids / cached_parts: the word cache shared by WordPiece, Unigram and WordLevel.

cached_ids gives concat(cached_parts(...)) without the list of parts between; both must fill
each distinct miss once, keep the short words, drop the long ones after the call, and empty the
cache once it grows past WORD_CACHE_MAX."""

from __future__ import annotations

import pytest

from tokmap.runtime import models
from tokmap.runtime.models import WORD_CACHE_LEN, cached_ids, cached_parts, concat


def _encoder(calls: list):
    def encode_one(word: str) -> tuple[int, ...]:
        calls.append(word)
        return tuple(map(ord, word[:3]))  # (several ids a word, none for "")

    return encode_one


@pytest.mark.parametrize("many", [False, True])
def test_cached_ids_equals_the_parts_joined(many):
    words = ["ab", "c", "ab", "", "x" * (WORD_CACHE_LEN + 1), "c", "def"]
    ids_calls, parts_calls = [], []
    one_ids, one_parts = _encoder(ids_calls), _encoder(parts_calls)
    kw_ids = {"encode_many": lambda ws: [one_ids(w) for w in ws]} if many else {"encode_one": one_ids}
    kw_parts = {"encode_many": lambda ws: [one_parts(w) for w in ws]} if many else {"encode_one": one_parts}
    ids_cache, parts_cache = {"c": (99,)}, {"c": (99,)}  # (a short call before: one word known)
    got = cached_ids(ids_cache, words, **kw_ids)
    want = concat(cached_parts(parts_cache, words, **kw_parts))
    assert got == want == [97, 98, 99, 97, 98, 120, 120, 120, 99, 100, 101, 102]
    assert ids_calls == parts_calls == ["ab", "", "x" * (WORD_CACHE_LEN + 1), "def"]  # each miss once
    assert ids_cache == parts_cache and "x" * (WORD_CACHE_LEN + 1) not in ids_cache  # (too long to keep)
    ids_calls.clear()
    assert cached_ids(ids_cache, ["def", "ab", "c"], **kw_ids) == [100, 101, 102, 97, 98, 99] and not ids_calls
    got = cached_ids(ids_cache, ["ab", "gh"], **kw_ids)  # a miss after hits: only it is encoded
    assert got == [97, 98, 103, 104] and ids_calls == ["gh"]


def test_cached_ids_empties_a_full_cache(monkeypatch):
    monkeypatch.setattr(models, "WORD_CACHE_MAX", 4)
    cache: dict = {}
    calls: list = []
    words = [f"w{k}" for k in range(6)]
    assert cached_ids(cache, words, _encoder(calls)) == concat(tuple(map(ord, w)) for w in words)
    assert cache == {} and calls == words
    assert cached_ids(cache, words[:2], _encoder(calls)) == [119, 48, 119, 49] and len(cache) == 2
