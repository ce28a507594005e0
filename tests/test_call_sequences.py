"""Sequences of calls on one tokenizer against the reference, call by call.

A tokenizer's answer must not depend on what it was asked before: the piece cache, the part cache,
the space chunks (a text met a third time) and the long-piece budgets all change the path a call
takes. Here one seeded sequence per model mixes stretches of the real corpora, words of many scripts,
runs, pieces long in bytes but short in chars, and texts asked again, on a tokenizer reloaded now and
then, and every call's ids must be the reference's. (A cached list once made a text's third call
raise: test_space_cuts.test_chunks_holding_pieces_long_in_bytes.)
"""

from __future__ import annotations

import random

import pytest

import tokmap

from conftest import CORPORA, model_source
from test_conformance import Ref

MODELS = ["o200k_base", "gpt4o", "llama3", "qwen3", "gemma3", "llama2"]
CALLS = 120
# Code point ranges words are drawn from: Latin (both cases, extended), Greek, Cyrillic, Hebrew,
# Arabic, Devanagari, Thai, kana, CJK, Hangul, emoji, astral CJK, digits, ASCII punctuation.
SCRIPTS = [(0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
           (0x600, 0x6FF), (0x900, 0x97F), (0xE01, 0xE5B), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
           (0x1F300, 0x1F64F), (0x20000, 0x2A6DF), (0x30, 0x39), (0x20, 0x2F)]
# Scripts without case, whose runs of letters are single pieces under every pattern: Thai letters,
# kana, CJK, Hangul (3 bytes a char: a piece of 90 chars is long in bytes, not in chars).
CASELESS = [(0xE01, 0xE2E), (0x3041, 0x3096), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3)]
SEPARATORS = [" ", " ", "", "\n", ", ", "  ", " 12 ", "\t"]


class _Texts:
    def __init__(self, rng: random.Random, corpora: dict[str, str]):
        self.rng, self.corpora = rng, corpora

    def _chars(self, n: int) -> str:
        a, b = self.rng.choice(SCRIPTS)
        return "".join(chr(self.rng.randint(a, b)) for _ in range(n))

    def stretch(self) -> str:
        text = self.corpora[self.rng.choice(CORPORA)]
        n = self.rng.choice([40, 400, 4000, 30000])
        at = self.rng.randrange(0, max(1, len(text) - n))
        return text[at:at + n]

    def words(self) -> str:
        sep = self.rng.choice(SEPARATORS)
        return sep.join(self._chars(int(self.rng.expovariate(1 / 6)) + 1) for _ in range(self.rng.choice([10, 300, 3000])))

    def long_pieces(self) -> str:
        """Runs, and pieces of 90-300 chars (long in bytes for 3-byte scripts), with separators."""
        parts = []
        for _ in range(self.rng.choice([5, 40])):
            n = self.rng.choice([1, 30, 90, 200, 300, 1500])
            parts.append(self._chars(n) if self.rng.random() < 0.7 else self._chars(1) * n)
            parts.append(self.rng.choice(SEPARATORS))
        return "".join(parts)

    def document(self) -> str:
        """A long text of short Latin words with long pieces among them, each followed in its
        space chunk by more pieces: met a third time, it goes by chunks (spacecut.py)."""
        latin = lambda: "".join(chr(self.rng.randint(0x61, 0x7A)) for _ in range(self.rng.randrange(2, 10)))  # noqa: E731
        head = " ".join(latin() for _ in range(2000))
        a, b = self.rng.choice(CASELESS)  # (one script, as a document has)
        longs = ["".join(chr(self.rng.randint(a, b)) for _ in range(self.rng.randrange(90, 250))) for _ in range(30)]
        return head + " " + " ".join(p + ", b" for p in longs) + " " + head[::-1]

    def next(self) -> str:
        pick = self.rng.random()
        if pick < 0.35:
            return self.stretch()
        if pick < 0.6:
            return self.words()
        if pick < 0.8:
            return self.long_pieces()
        return self.stretch() + self._chars(3) + self.stretch()


@pytest.mark.parametrize("name", MODELS)
def test_call_sequence_matches_the_reference(name, exported, testdata, corpus):
    ref = Ref(name, model_source(testdata, name))
    want_of, got_of = next(c[1:] for c in ref.cases() if c[0] in ("plain", "ordinary"))  # (no specials)
    rng = random.Random(f"call-sequence-{name}")
    texts = _Texts(rng, {c: corpus(c) for c in CORPORA})
    path = exported(name)
    tok = tokmap.load(path)
    met: list[str] = []
    again: list[str] = []  # documents due to be asked again (a user re-encoding one)
    repeated = 0
    for k in range(CALLS):
        if rng.random() < 0.05:
            tok, met, again = tokmap.load(path), [], []  # a fresh tokenizer: cold caches again
        if again and rng.random() < 0.6:
            text = again.pop(0)
            repeated += 1
        elif met and rng.random() < 0.3:
            text = rng.choice(met)
            repeated += 1
        else:
            document = rng.random() < 0.3
            text = texts.document() if document else texts.next()
            if document:
                again += [text] * rng.randint(2, 3)  # its third meeting goes by chunks (spacecut.py)
            met.append(text)
        assert got_of(tok, text) == want_of(text), (k, len(text), text[:80])
    assert repeated >= CALLS // 4
