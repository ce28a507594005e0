"""In-process encode_batch (runtime/batching.py): the misses of many documents are merged in one
batch, and every document's ids are still exactly encode()'s, in order, with encode()'s errors.

Each comparison uses two freshly loaded tokenizers, one for encode_batch and one for the
encode() loop, so that the batch starts cold (its piece cache empty) as a first call would."""

from __future__ import annotations

import random

import pytest

import tokmap
from tokmap.runtime import batching


@pytest.fixture(scope="module")
def docs(corpus):
    """Documents of every kind the fast path meets: empty, one char, prose, code, CJK lines, long
    digit runs (the runs pattern), astral chars, and repeats of one another."""
    out = ["", "a", " ", "\n\n", "1" * 5000 + " x " + "9" * 7000, "\U0001F600 emoji \U00020000 astral"]
    for c, step in (("en", 9), ("code", 40), ("wagahai", 3), ("multi", 30), ("utf8seq", 1)):
        lines = [ln for ln in corpus(c).split("\n") if ln][:600]
        out += ["\n".join(lines[i:i + step]) for i in range(0, len(lines), step)]
    out += out[10:20]  # the same documents again, later in the batch
    random.Random(7).shuffle(out)
    return out


def _pair(path):
    return tokmap.load(path), tokmap.load(path)


@pytest.mark.parametrize("name", ["llama3", "qwen3", "cl100k_base", "o200k_base", "gpt2", "tekken"])
def test_batch_equals_encode_loop(name, exported, docs, monkeypatch):
    a, b = _pair(exported(name))
    assert batching.batchable(a)
    expected = [b.encode(t) for t in docs]
    calls = []
    fill = a.model.encode_piece_groups
    monkeypatch.setattr(a.model, "encode_piece_groups", lambda groups: calls.append(len(groups)) or fill(groups))
    assert a.encode_batch(docs) == expected
    assert calls and max(calls) > 100  # the documents' pieces really went to the model together
    assert a.encode_batch(docs) == expected  # warm: every piece cached


def test_groups_of_few_chars(exported, docs, monkeypatch):
    """Small groups (many fills, the cache emptied between them) change nothing."""
    monkeypatch.setattr(batching, "GROUP_CHARS", 3000)
    from tokmap.runtime.models import bpe

    monkeypatch.setattr(bpe, "CACHE_MAX", 2000)
    a, b = _pair(exported("llama3"))
    assert a.encode_batch(docs, add_special_tokens=False) == [b.encode(t, add_special_tokens=False) for t in docs]
    assert a.encode_batch(docs[:50]) == [b.encode(t) for t in docs[:50]]


def test_added_tokens_between_stretches(exported, docs):
    """A document cut by added tokens holds several markers, each filled in place."""
    special = ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>"]
    mixed = [special[i % 3].join(d[k:k + 200] for k in range(0, len(d), 200)) for i, d in enumerate(docs[:80])]
    a, b = _pair(exported("llama3"))
    for add in (True, False):
        assert a.encode_batch(mixed, add_special_tokens=add) == [b.encode(t, add_special_tokens=add) for t in mixed]


def test_tiktoken_specials_and_errors(exported, docs):
    marked = [d + " <|endoftext|> x<|fim_prefix|>" if i % 4 == 0 else d for i, d in enumerate(docs)]
    a, b = _pair(exported("cl100k_base"))
    for kw in ({"allowed_special": "all"}, {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()},
               {"disallowed_special": ()}):
        assert a.encode_batch(marked, **kw) == [b.encode(t, **kw) for t in marked], kw
    bad = list(docs)
    bad[len(bad) // 2] += " <|fim_suffix|>"
    bad[-1] += " <|endoftext|>"  # fails too, later: the first in order is the one raised
    with pytest.raises(tokmap.EncodeError) as got:
        a.encode_batch(bad)
    with pytest.raises(tokmap.EncodeError) as want:
        [b.encode(t) for t in bad]
    assert str(got.value) == str(want.value) and "<|fim_suffix|>" in str(got.value)
    with pytest.raises(TypeError) as got:
        a.encode_batch(["fine", 3, "also fine"])
    with pytest.raises(TypeError) as want:
        b.encode(3)
    assert str(got.value) == str(want.value)


def test_other_pipelines_run_per_document(exported, docs):
    """Models without encode_piece_groups, and files with truncation, keep encode() per document."""
    for name in ("minilm", "gemma3", "llama2"):
        a, b = _pair(exported(name))
        assert not batching.batchable(a)
        assert a.encode_batch(docs[:60]) == [b.encode(t) for t in docs[:60]]


def test_resolve_places_each_group():
    d = batching.DEFERRED
    filled = iter([[1, 2], [3], [4, 5, 6], [7]])
    plans = [[d], [9, d], [d, 8, d], [], [0]]
    assert [batching._resolve(p, filled) for p in plans[:3]] == [[1, 2], [9, 3], [4, 5, 6, 8, 7]]
    assert batching._resolve(plans[3], filled) == [] and batching._resolve(plans[4], filled) == [0]
