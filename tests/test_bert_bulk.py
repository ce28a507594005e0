"""BERT's translate tables filled in bulk (runtime/bert._BulkMemo), against tokenizers on the real
minilm file and against the tables' own one-char lookups.

A long text with many chars not met yet has them looked up all at once (numpy over the table's
ranges) instead of one call from str.translate per char; a text of more distinct chars than
ChainMemo fills takes the normalizer steps one by one at once. Both must give the ids the
reference gives, on a freshly loaded tokenizer and on the calls after it.
Documents are compared whole, with the file's truncation turned off.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tokmap.runtime import bert

from conftest import export_variant, model_source


@pytest.fixture(scope="module")
def minilm(testdata, tmp_path_factory):
    doc = json.loads(model_source(testdata, "minilm").read_text(encoding="utf-8"))
    doc["truncation"] = doc["padding"] = None
    return export_variant(doc, tmp_path_factory.mktemp("bulk"), "minilm-whole")


def _fresh(minilm):
    import tokmap

    return tokmap.load(minilm[1].path)


def _wide_text(seed: int, n: int) -> str:
    """n chars drawn from all of Unicode's planes in use (accented Latin, Greek and Cyrillic
    capitals, combining marks, CJK, Hangul, astral), with spaces and punctuation between."""
    rng = random.Random(seed)
    blocks = [(0x20, 0x7F), (0xA0, 0x250), (0x300, 0x370), (0x370, 0x530), (0x1E00, 0x1F00), (0x3040, 0x3100),
              (0x4E00, 0xA000), (0xAC00, 0xD7A4), (0xF900, 0xFB00), (0xFF00, 0xFFF0), (0x10000, 0x10200),
              (0x1D400, 0x1D800), (0x1F300, 0x1F700), (0x20000, 0x2A6E0)]
    out = []
    for _ in range(n):
        a, b = rng.choice(blocks)
        out.append(chr(rng.randrange(a, b)) if rng.random() < 0.85 else rng.choice(" \n,.!?-"))
    return "".join(out)


def test_tables_filled_in_bulk_equal_their_lookups(minilm):
    """fill() over the code points where the tables' ranges start and end, and a random sample of
    the rest, gives each the value the one-char lookup (_lookup) gives: CharMap tables (strings,
    deletions, CJK padding), CharSplit's marks, and the segmenter that folds two CharSplits."""
    tok = _fresh(minilm)
    pipe = tok.pipeline
    memos = [st._memo() for st in pipe.normalizers if isinstance(st, bert.CharMap)]
    for st in pipe.pre:
        st.memo = st.memo or bert._Memo(bert._rows(st.f, st.blob), lambda r: "\x01", "\x00")
    memos += [st.memo for st in pipe.pre]
    assert len(memos) == 6
    edges = set()
    for m in memos:
        for a, b in zip(m.starts, m.ends):
            edges.update((a - 1, a, b - 1, b))
    rng = random.Random(7)
    cps = sorted({c for c in edges if 0 <= c < 0x110000} | {rng.randrange(0x110000) for _ in range(30_000)})
    arr = np.array(cps, dtype=np.int64)
    seg_fresh = bert.segmenter(pipe.pre)
    tables = memos + [seg_fresh]
    for m in tables:
        bulk = type(m).__new__(type(m))
        bulk.__dict__.update(m.__dict__)
        bulk.fill(arr)
        assert len(bulk) == len(cps)
        wrong = [(cp, bulk[cp], m._lookup(cp)) for cp in cps if bulk[cp] != m._lookup(cp)]
        assert not wrong, f"{type(m).__name__}: {len(wrong)} code points differ, first {wrong[:3]}"
    assert any("pad" in m.vals for m in memos)  # (BertNormalizer's CJK padding is among them)


@pytest.mark.parametrize("seed", [1, 2])
def test_wide_documents_new_and_again(minilm, seed):
    """Long texts of many distinct chars: each call on one tokenizer (the first on a fresh one,
    with every char new) against the reference."""
    ref = minilm[0]
    tok = _fresh(minilm)
    texts = [_wide_text(seed, 150_000), _wide_text(seed + 100, 90_000)]
    for text in texts + texts[::-1]:
        assert tok.encode(text) == ref.encode(text, add_special_tokens=True).ids


def test_wide_documents_with_offsets(minilm):
    """encode_full of a long wide text (the normalizer's tables filled in bulk on the alignment
    path too, and CharSplit's marks): ids and offsets as tokenizers gives them, new and again."""
    ref = minilm[0]
    tok = _fresh(minilm)
    text = _wide_text(5, 100_000)
    want = ref.encode(text, add_special_tokens=True)
    for _ in range(2):
        got = tok.encode_full(text)
        assert got.ids == want.ids
        assert got.offsets == want.offsets


def test_every_code_point_document(minilm, corpus):
    """utf8seq.txt (every code point in order: more distinct chars than ChainMemo fills, and marks
    that need their neighbours) and 200K chars of its lines shuffled, in turn on one tokenizer
    (the whole three times, the shuffled stretch twice)."""
    ref = minilm[0]
    tok = _fresh(minilm)
    text = corpus("utf8seq")
    lines = text.split("\n")
    random.Random(3).shuffle(lines)
    shuffled = "\n".join(lines)
    for t in (text, shuffled[:200_000], text, shuffled[:200_000], text):
        assert tok.encode(t) == ref.encode(t, add_special_tokens=True).ids


def test_few_new_chars_go_one_by_one(minilm, monkeypatch):
    """A long text with up to BULK_MISSES chars its table has not met is translated one char at a
    time; with one more, the rest are filled in bulk. The text made is the same either way."""
    calls = []
    real = bert._Memo.fill

    def spy(self, cps):
        calls.append(len(cps))
        return real(self, cps)

    monkeypatch.setattr(bert._Memo, "fill", spy)
    tok = _fresh(minilm)
    steps = [st for st in tok.pipeline.normalizers if isinstance(st, bert.CharMap)]
    base = "Plain Words, " * 6000
    assert len(base) >= bert.BULK_TEXT
    for st in steps:
        for n, bulk in ((bert.BULK_MISSES, False), (bert.BULK_MISSES + 1, True)):
            memo = bert._Memo(bert._rows(st.f, st.blob), lambda r: r[2], None)
            memo.translate(base)  # (its dozen chars met one by one)
            text = base + "".join(chr(0x4E00 + k) for k in range(n))
            calls.clear()
            got = memo.translate(text)
            assert bool(calls) is bulk, (n, calls)
            one_by_one = {cp: memo._lookup(cp) for cp in set(map(ord, text))}
            assert got == text.translate(one_by_one)
