"""Unigram's numpy lattice (unigram_batch.py) against tokenizers itself.

The batch only serves calls with many distinct new words, so the lattice is forced here on every
call (BATCH_WORDS = 1): the real botchan-unigram file on 10,000 stressors and on whole corpora
(unknown chars, fused unk runs, long words left to the scalar lattice), and the toy vocabularies
of test_unigram_metaspace.py (ties, unk handling with and without an unk id, byte fallback,
repeated pieces). A hash that collides must never give a wrong piece: with the hash's multiplier
set to 1 (a sum of code points: every anagram collides) the ids stay tokenizers'.
"""

from __future__ import annotations

import json

import pytest

import tokmap
from tokmap.runtime.models import unigram, unigram_batch

from conftest import CORPORA, export_variant, require
from test_unigram_metaspace import _check, _toy, stress_strings


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setattr(unigram, "BATCH_WORDS", 1)
    used = []
    real = unigram_batch.Lattice.encode

    def encode(self, *a, **k):
        used.append(len(a[0]))
        return real(self, *a, **k)

    monkeypatch.setattr(unigram_batch.Lattice, "encode", encode)
    return used


@pytest.fixture(scope="module")
def botchan(testdata):
    return json.loads(require(testdata / "models" / "botchan-unigram" / "tokenizer.json").read_text(encoding="utf-8"))


def test_botchan_stressors_batched(botchan, tmp_path, forced):
    _check(botchan, tmp_path, stress_strings(10_000, seed=47))
    assert sum(forced) > 10_000  # (the lattice took the words, not the scalar path)


@pytest.mark.parametrize("corpus", CORPORA)
def test_botchan_corpora_batched(botchan, tmp_path, testdata, forced, corpus):
    ref, tok = export_variant(botchan, tmp_path)
    text = require(testdata / "corpus" / f"{corpus}.txt").read_text(encoding="utf-8")[:300_000]
    lines = [ln for ln in text.splitlines() if ln.strip()][:400]
    assert tok.encode(text, add_special_tokens=False) == ref.encode(text, add_special_tokens=False).ids
    assert tok.encode_batch(lines) == [e.ids for e in ref.encode_batch(lines)]
    assert forced


def test_toys_batched(tmp_path, forced):
    vocab = [["<unk>", 0.0], ["\u2581", -1.0], ["a", -1.0], ["b", -1.0], ["c", -1.0], ["ab", -2.0], ["bc", -2.0],
             ["abc", -3.0], ["\u2581a", -2.0], ["ca", -2.0], ["cab", -3.5]]
    texts = ["ab", "abc", "abcab", "cabc", "a b c", "bca", "aaabbbccc", "x", "axb", "cccc", "xxab", "abxx", "a<unk>b",
             "<unk>", "<unk><unk>", "x<unk>y", "\u2581"]
    _check(_toy(vocab), tmp_path, texts, name="ties")
    unk = [["a", -1.0], ["\u2581", -1.0], ["<unk>", -0.5], ["b", -2.0], ["xy", -1.0]]
    texts = ["a", "zzz", "azzb", "xy", "x", "y", "xz", "<unk>", "a<unk>z", "日本", "a 日 b", "zxy", "zz<unk>zz"]
    _check(_toy(unk, unk_id=2), tmp_path, texts, name="unk")
    _check(_toy(unk, unk_id=None), tmp_path, texts, name="nounk")
    fallback = [["<unk>", 0.0], ["\u2581", -1.0], ["a", -1.0], ["b", -1.5]]
    fallback += [[f"<0x{b:02X}>", -10.0] for b in range(256) if b not in (0xE6,)]
    _check(_toy(fallback, byte_fallback=True), tmp_path,
           ["a", "ab", "é", "aéb", "日本", "本", "ζζ", "😀", "a b\u00e9", "<0x41>", "<unk>x", "éé<unk>a"], name="bf")
    dup = [["<unk>", 0.0], ["\u2581", -1.0], ["a", -1.0], ["ab", -5.0], ["b", -1.0], ["ab", -1.5], ["a", -3.0]]
    _check(_toy(dup), tmp_path, ["ab", "a", "b", "aab", "ba b", "abab", "c"], name="dup")
    # Scores above 10: two unk nodes (min - 10 each) outscore the piece "xy", and their fused run
    # is looked up again as "xy" (the run's own text, not the unk id).
    positive = [["<unk>", 30.0], ["\u2581", 30.0], ["xy", 30.0], ["a", 31.0]]
    _check(_toy(positive), tmp_path, ["xy", "axy", "xya", "xyxy", "xz", "zxy", "<unk>xy"], name="positive")
    assert forced


def test_colliding_hashes(tmp_path, forced, monkeypatch):
    """Multiplier 1: the hash is a sum, so "ab", "ba" and "c" + ... collide. Pieces that collide
    with each other leave the model to the scalar lattice (Unusable); substrings that only collide
    with a piece are told apart by their chars."""
    monkeypatch.setattr(unigram_batch, "MULT", unigram_batch.np.uint64(1))
    vocab = [["<unk>", 0.0], ["\u2581", -1.0], ["a", -1.0], ["b", -1.0], ["c", -1.0], ["ab", -0.5], ["bd", -0.2]]
    texts = ["ab", "ba", "abba", "ca", "ac", "d", "bd", "db", "cb", "abab bbaa"]
    tok = _check(_toy(vocab), tmp_path, texts, name="apart")
    assert tok.pipeline.model._lattice  # (ab, bd, ... collide with no other piece: the lattice serves)
    n = len(forced)
    vocab.append(["ba", -0.1])  # collides with "ab"
    tok = _check(_toy(vocab), tmp_path, texts, name="collide")
    assert tok.pipeline.model._lattice is False and len(forced) == n


def test_lattice_refuses_non_finite_scores(tmp_path):
    """The exporter refuses such scores; a damaged file's scores section can still hold one, and
    the lattice's max would then not be the scalar loop's comparisons: the scalar path serves."""
    vocab = [["<unk>", 0.0], ["\u2581", -1.0], ["a", -1.0], ["b", -1.0]]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_toy(vocab)), encoding="utf-8")
    tokmap.export(path, tmp_path / "t.mtok")
    model = tokmap.load(tmp_path / "t.mtok").pipeline.model
    unigram_batch.Lattice.from_file(model.tb, model.off, model.scores, model.n)
    for bad in (float("-inf"), float("nan")):
        scores = unigram_batch.np.array([0.0, -1.0, bad, -1.0])
        with pytest.raises(unigram_batch.Unusable):
            unigram_batch.Lattice.from_file(model.tb, model.off, scores.tobytes(), model.n)


def test_lattice_refuses_damaged_pieces():
    """Pieces cut inside a char, offsets out of order or past the bytes, bytes that are no UTF-8:
    the scalar path (which decodes each piece alone and names the file) serves such a file."""
    from array import array

    scores = unigram_batch.np.array([-1.0, -2.0, -3.0]).tobytes()
    ok = unigram_batch.Lattice.from_file(memoryview(b"a\xc3\xa9b"), array("I", [0, 1, 3, 4]), scores, 3)
    assert ok.lookup("\u00e9") == 1 and ok.lookup("b") == 2 and ok.lookup("ab") is None
    for tb, off in ((b"a\xc3\xa9b", [0, 1, 2, 4]), (b"a\xc3\xa9b", [0, 3, 1, 4]), (b"a\xc3\xa9b", [0, 1, 3, 9]),
                    (b"a\xff\xa9b", [0, 1, 3, 4])):
        with pytest.raises(unigram_batch.Unusable):
            unigram_batch.Lattice.from_file(memoryview(tb), array("I", off), scores, 3)
