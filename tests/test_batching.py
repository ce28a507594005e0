"""In-process encode_batch (runtime/batching.py): the model input of many documents goes to the
model in one call, and every document's ids are still exactly encode()'s, in order, with
encode()'s errors.

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


@pytest.mark.parametrize("name,kind", [("llama3", "pieces"), ("qwen3", "pieces"), ("cl100k_base", "pieces"),
                                       ("o200k_base", "pieces"), ("gpt2", "pieces"), ("tekken", "pieces"),
                                       ("gemma3", "words"), ("llama2", "words")])
def test_batch_equals_encode_loop(name, kind, exported, docs, monkeypatch):
    a, b = _pair(exported(name))
    assert batching.batch_kind(a) == kind
    expected = [b.encode(t) for t in docs]
    calls = []
    fill = a._fill_deferred
    monkeypatch.setattr(a, "_fill_deferred", lambda rec, k: calls.append((k, len(rec))) or fill(rec, k))
    assert a.encode_batch(docs) == expected
    # the documents' model input really went to the model together
    assert calls and {k for k, _ in calls} == {kind} and max(n for _, n in calls) > 100
    del calls[:]
    assert a.encode_batch(docs) == expected  # warm: cached stretches take their ids at once
    assert sum(n for _, n in calls) < 20


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
    """Models with no batch fill keep encode() per document."""
    for name in ("minilm", "botchan-unigram", "botchan-wordlevel"):
        a, b = _pair(exported(name))
        assert batching.batch_kind(a) is None
        assert a.encode_batch(docs[:60]) == [b.encode(t) for t in docs[:60]]


def test_resolve_places_each_group():
    d = batching.DEFERRED
    filled = iter([[1, 2], [3], [4, 5, 6], [7]])
    plans = [[d], [9, d], [d, 8, d], [], [0]]
    assert [batching._resolve(p, filled, True) for p in plans[:3]] == [[1, 2], [9, 3], [4, 5, 6, 8, 7]]
    assert batching._resolve(plans[3], filled, True) == [] and batching._resolve(plans[4], filled, True) == [0]
    shared = (5, 6)  # a word's cached tuple, which two markers may share: never changed
    assert [batching._resolve(p, iter([shared, shared]), False) for p in ([9, d], [d])] == [[9, 5, 6], [5, 6]]


def test_words_of_a_metaspace_pipeline(testdata, tmp_path, docs):
    """Llama 2's model behind a Metaspace pre-tokenizer that splits: many words a stretch, each a
    marker of its own, filled in order; the ids are tokenizers' own."""
    import json

    from conftest import export_variant, model_source

    doc = json.loads(model_source(testdata, "llama2").read_text(encoding="utf-8"))
    doc["normalizer"] = None
    doc["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    ref, a = export_variant(doc, tmp_path)
    b = tokmap.load(a.path)
    assert batching.batch_kind(a) == "words"
    some = docs[:120]
    got = a.encode_batch(some)
    assert got == [b.encode(t) for t in some]
    assert got[:40] == [e.ids for e in ref.encode_batch(some[:40])]


def test_small_batches_run_per_document(exported, monkeypatch):
    """Below MIN_CHARS in all, encode() per document (a group's set-up would cost more)."""
    a, b = _pair(exported("llama3"))
    seen = []
    monkeypatch.setattr(batching, "_encode_group", lambda *args: seen.append(args) or [])
    small = ["Hello world", "How are you?", "x" * 100]
    assert a.encode_batch(small) == [b.encode(t) for t in small] and not seen
    assert a.encode_batch(small * 40) == [] and seen  # (4.6K chars: batched, by the stand-in)


def test_fill_runs_with_the_collector_paused(exported, docs, monkeypatch):
    """The group's fill makes an object per new piece, as a long encode() does: the cyclic
    collector is paused for it and running again after."""
    import gc

    a = tokmap.load(exported("llama3"))
    during = []
    fill = a.model.encode_piece_groups
    monkeypatch.setattr(a.model, "encode_piece_groups", lambda g: during.append(gc.isenabled()) or fill(g))
    assert gc.isenabled()
    a.encode_batch(docs)
    assert during and not any(during) and gc.isenabled()
