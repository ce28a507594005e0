"""The Precompiled normalizer's unaligned path (precompiled.py: one str.translate where every
char is a cluster of its own, the cluster walk only around the others, new chars classified in
numpy) against its aligned path and against tokenizers, on the real botchan-unigram charsmap.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import tokmap
from tokmap.runtime import precompiled

from conftest import CORPORA, export_variant, require
from test_unigram_metaspace import STRESS, stress_strings


@pytest.fixture(scope="module")
def botchan(testdata):
    return json.loads(require(testdata / "models" / "botchan-unigram" / "tokenizer.json").read_text(encoding="utf-8"))


def _precompiled(tok):
    return next(s for s in tok.pipeline.normalizers if isinstance(s, precompiled.Precompiled))


def test_vectorized_lookups_equal_scalar(botchan, tmp_path):
    """transform_chars and Graphemes.values against transform and value, char by char: every
    code point of the BMP and every 7th beyond (surrogates included)."""
    _ref, tok = export_variant(botchan, tmp_path)
    pre = _precompiled(tok)
    cps = np.concatenate((np.arange(0x10000), np.arange(0x10000, 0x110000, 7))).astype(np.int64)
    got = pre.map.transform_chars(cps)
    want = [pre.map.transform(chr(c)) for c in cps.tolist()]
    bad = [(hex(c), g, w) for c, g, w in zip(cps.tolist(), got, want) if g != w]
    assert not bad, bad[:5]
    assert sum(w is not None for w in want) > 1000  # (the charsmap maps thousands of these chars)
    assert pre.graphemes.values(cps).tolist() == [pre.graphemes.value(chr(c)) for c in cps.tolist()]


def test_unaligned_equals_aligned(botchan, tmp_path):
    """normalize(text, False) (translate, regions, numpy classification of a long text's new chars)
    gives the text normalize(text, True) gives, on a fresh normalizer each round."""
    texts = stress_strings(3000, seed=61)
    rng = random.Random(5)
    longs = ["".join(rng.sample(texts, 40)) for _ in range(30)]  # (past LEARN_TEXT: classified in bulk)
    longs += ["".join(rng.choice(STRESS) for _ in range(300)), "日本語のテキスト。" * 100 + "\u3099", "\r\n" * 200]
    for name, batch in (("short", texts), ("long", longs)):
        _ref, tok = export_variant(botchan, tmp_path, name)
        pre = _precompiled(tok)
        for t in batch:
            assert pre.normalize(t, False)[0] == pre.normalize(t, True)[0], t[:80]


@pytest.mark.parametrize("corpus", CORPORA)
def test_corpora_fresh(botchan, tmp_path, testdata, corpus):
    """Whole corpora on a freshly loaded tokenizer (new chars met in bulk) against tokenizers."""
    ref, tok = export_variant(botchan, tmp_path)
    text = require(testdata / "corpus" / f"{corpus}.txt").read_text(encoding="utf-8")[:400_000]
    assert tok.encode(text) == ref.encode(text).ids
    fresh = tokmap.load(tmp_path / "variant.mtok")
    assert fresh.encode(text[::-1]) == ref.encode(text[::-1]).ids  # (reversed: marks before their bases)


def test_ascii_plan(botchan, tmp_path):
    """An ASCII text of chars that are clusters of their own goes by one bytes.translate
    (_ascii_plan): every ASCII char alone, and random ASCII strings (CR LF pairs, controls, tabs
    among them), give the cluster walk's text (the aligned path) and tokenizers' ids."""
    ref, tok = export_variant(botchan, tmp_path)
    pre = _precompiled(tok)
    rng = random.Random(9)
    alphabet = [chr(c) for c in range(128)] + ["\r\n", " ", "a", "Z"] * 8
    texts = [chr(c) for c in range(128)] + ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 50)))
                                           for _ in range(3000)]
    for t in texts:
        assert pre.normalize(t, False)[0] == pre.normalize(t, True)[0], repr(t)
    find, table, deleted = pre._ascii
    assert find is not None and find.search("\r") and not find.search("plain text, 42!")
    assert table is None and not deleted  # (this charsmap keeps every ASCII char but CR as it is)
    assert [tok.encode(t) for t in texts[:600]] == [e.ids for e in ref.encode_batch(texts[:600])]
    # A map that changes ASCII chars (edited into a fresh normalizer's table before its plan is
    # made): one char for another, one deleted, one made two, against str.translate through it.
    _ref, tok = export_variant(botchan, tmp_path, "edited")
    pre = _precompiled(tok)
    pre._singles.update({ord("a"): "b", ord("c"): "", ord("d"): "dd", ord("e"): "\u00e9"})
    find, table, deleted = pre._ascii_plan()
    assert deleted == b"c" and table[ord("a")] == ord("b") and find.search("d") and find.search("e")
    pre._ascii = (find, table, deleted)
    for t in texts:
        if "\r" not in t:
            assert pre.normalize(t, False)[0] == t.translate(pre._singles), repr(t)
