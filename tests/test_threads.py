"""One Tokenizer called from several threads at once gives every call the ids it gives alone.

The caches a call fills and reads back (pieces, words, chunks, long pieces' budget, the cut
tables a first call learns) belong to one Tokenizer; a call made while another thread is in one
runs on that thread's own copy over the same mapped file (runtime/tokenizer.py). Here the caches
are made tiny so that they are emptied every few calls, the interpreter switches threads every
10 us, and each thread encodes stretches of the real corpora (short, long, met again) in its own
order, on a fresh tokenizer each round. Before the copies, these runs failed within seconds: a
KeyError for an entry another thread had just dropped (reported as corrupted data), an
AttributeError from a half-built table, or wrong ids without an error (a byte-level token for a
merged kana pair; an unknown id where a byte-fallback one belonged). The ids each call should
give are those of a fresh tokenizer called from one thread.
"""

from __future__ import annotations

import random
import sys
import threading

import pytest

import tokmap
from tokmap.runtime import spacecut
from tokmap.runtime import models as model_mod
from tokmap.runtime.models import bpe, wordpiece

from conftest import CORPORA, HF_MODELS, TIKTOKEN_MODELS, require

MODELS = HF_MODELS + list(TIKTOKEN_MODELS) + ["tekken", "mistral-v3", "botchan_en_bpe_1000",
                                                  "botchan_en_unigram_1000"]
THREADS, CALLS, ROUNDS = 3, 10, 4


@pytest.fixture
def tiny_caches(monkeypatch):
    monkeypatch.setattr(bpe, "CACHE_MAX", 3000)
    monkeypatch.setattr(model_mod, "WORD_CACHE_MAX", 2000)
    monkeypatch.setattr(spacecut, "CHUNK_CACHE_MAX", 2000)
    monkeypatch.setattr(wordpiece, "BATCH_MEMO_MAX", 3000)


SPM = ("mistral-v3", "botchan_en_bpe_1000", "botchan_en_unigram_1000")


@pytest.fixture(scope="module")
def model_path(exported, testdata, tmp_path_factory):
    def get(name):
        if name not in SPM:
            return exported(name)
        out = tmp_path_factory.mktemp("threads") / f"{name}.mtok"
        tokmap.export(require(testdata / "models" / "sentencepiece" / f"{name}.model"), out)
        return out

    return get


def _texts(corpus, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(12):
        text = corpus(rng.choice(CORPORA))
        n = rng.choice([200, 3000, 20_000, 60_000])
        a = rng.randrange(max(1, len(text) - n))
        out.append(text[a:a + n])
    return out


@pytest.mark.parametrize("name", MODELS)
def test_threads_get_the_ids_of_one(name, model_path, corpus, tiny_caches):
    path = model_path(name)
    texts = _texts(corpus, seed=len(name))
    alone = tokmap.load(path)
    want = [alone.encode(t) for t in texts]
    bad: list = []
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for rnd in range(ROUNDS):
            tok = tokmap.load(path)

            def work(k: int) -> None:
                rng = random.Random(100 * rnd + k)
                try:
                    for _ in range(CALLS):
                        j = rng.randrange(len(texts))
                        if tok.encode(texts[j]) != want[j]:
                            bad.append(("ids differ", rnd, j, len(texts[j])))
                except Exception as e:  # noqa: BLE001 -- reported below
                    bad.append(repr(e)[:300])

            threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if bad:
                break
    finally:
        sys.setswitchinterval(old)
    assert not bad, bad[:3]


def test_a_call_never_waits_for_another(exported):
    """A call made while another thread is in one (here: holds the tokenizer) runs at once on the
    calling thread's own copy, with the ids a tokenizer alone gives; it does not wait."""
    tok = tokmap.load(exported("llama3"))
    texts = ["Hello world", "a short sentence", "中文分词", "x = f(y) + 1\n" * 200]
    holding, release = threading.Event(), threading.Event()

    def hold():
        with tok._busy:
            holding.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(60)
    got: list = []
    caller = threading.Thread(target=lambda: got.extend([tok.encode(t) for t in texts] + [tok.encode_batch(texts)]))
    caller.start()
    caller.join(60)
    finished = not caller.is_alive()
    release.set()
    holder.join()
    caller.join()
    assert finished, "a call waited for another thread's"
    alone = tokmap.load(exported("llama3"))
    want = [alone.encode(t) for t in texts]
    assert got == want + [want]
    assert not tok.pipeline.model.piece_cache  # (the calls ran on the caller's own copy)
