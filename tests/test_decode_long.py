"""decode over long id lists equals the reference library's, on every route decode takes.

Pipeline.decode takes, by the length of the list and what is in it: the numpy gathers (numpy loaded,
DECODE_NP_IDS ids or more, every id known), the bytes slices (DECODE_COPY_IDS or more), the table of
every token's string (plain UTF-8 vocabularies, a quarter of the vocabulary or more), and the list
route that names or drops unknown ids; the ByteFallback and WordPiece decoders work out runs and
distinct tokens in bulk. Each is compared with tokenizers / tiktoken on real models: ids of the
corpora, random ids with specials among them, ids past the vocabulary or in its holes, and runs of
byte-fallback tokens at the edges and in the middle.
"""

from __future__ import annotations

import random

import numpy  # noqa: F401  (loaded, as in any process that encoded a long text: the numpy routes run)
import pytest

import tokmap
from tokmap.runtime import pipeline
from conftest import HF_MODELS, model_source
from test_conformance import Ref

LENGTHS = (100, pipeline.DECODE_COPY_IDS + 5, pipeline.DECODE_NP_IDS + 5, 60_000)


@pytest.fixture(scope="module")
def pair(testdata, exported):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = (Ref(name, model_source(testdata, name)), tokmap.load(exported(name)))
        return cache[name]

    return get


def _texts(corpus):
    return [corpus(c)[:40_000] for c in ("multi", "utf8seq", "code", "wagahai")]


@pytest.mark.parametrize("name", HF_MODELS)
def test_corpus_ids_decode_like_tokenizers(name, pair, corpus):
    ref, tok = pair(name)
    ids = []
    for text in _texts(corpus):
        ids += ref.tok.encode(text).ids
    for n in LENGTHS:
        part = ids[:n]
        for skip in (True, False):
            assert tok.decode(part, skip_special_tokens=skip) == ref.tok.decode(part, skip_special_tokens=skip), (n, skip)


@pytest.mark.parametrize("name", HF_MODELS)
def test_random_ids_decode_like_tokenizers(name, pair):
    """Random ids (specials, byte-fallback tokens, ids past the vocabulary and in holes among them):
    equal text, whichever route the list takes."""
    ref, tok = pair(name)
    size = tok.vocab_size
    specials = [i for i in ref.tok.get_added_tokens_decoder()]
    rnd = random.Random(f"decode-{name}")
    byte_tokens = [i for i in range(min(size, 300)) if (ref.tok.id_to_token(i) or "").startswith("<0x")]
    for n in LENGTHS:
        ids = [rnd.randrange(size) for _ in range(n)]
        for k in range(0, n, 97):  # specials sprinkled in
            if specials:
                ids[k] = rnd.choice(specials)
        if byte_tokens:  # runs of byte tokens: at the start, the end and between
            run = [rnd.choice(byte_tokens) for _ in range(5)]
            ids = run + ids[: n // 2] + run + [ids[n // 2]] + run[:1] + ids[n // 2 + 1:] + run
        for skip in (True, False):
            assert tok.decode(ids, skip_special_tokens=skip) == ref.tok.decode(ids, skip_special_tokens=skip), (n, skip)
        unknown = ids[:-1] + [size + 5]  # dropped by tokenizers (the list route)
        assert tok.decode(unknown) == ref.tok.decode(unknown), n


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_tiktoken_decode_bytes_long(name, pair, corpus):
    """decode_bytes and decode equal tiktoken's for long lists (the numpy route) and short ones; an
    id in a hole or past the vocabulary is refused naming it, as on the list route."""
    ref, tok = pair(name)
    ids = []
    for text in _texts(corpus):
        ids += ref.tok.encode_ordinary(text)
    specials = list(ref.tok._special_tokens.values())
    rnd = random.Random(f"decode-{name}")
    for n in LENGTHS:
        part = ids[:n] + [rnd.choice(specials)]
        assert tok.decode_bytes(part) == ref.tok.decode_bytes(part)
        assert tok.decode(part) == ref.tok.decode(part)
    hole = next(i for i in range(tok.vocab_size) if i not in ref.tok._special_tokens.values()
                and i >= ref.tok.n_vocab - 30 and not _in_vocab(ref.tok, i))
    for bad in (hole, tok.vocab_size + 1):
        with pytest.raises(tokmap.TokmapError, match=f"Invalid token for decoding: {bad}"):
            tok.decode_bytes(ids[:pipeline.DECODE_NP_IDS + 5] + [bad])


def _in_vocab(enc, i) -> bool:
    try:
        enc.decode_single_token_bytes(i)
        return True
    except KeyError:
        return False


def test_wordpiece_decoder_repeats_equal_one_by_one(pair, corpus):
    """The WordPiece decoder's per-token memo gives the text of a token worked out alone, first
    position and later ones alike (the first token is never prefix-stripped nor spaced)."""
    ref, tok = pair("minilm")
    ids = ref.tok.encode(corpus("en")[:20_000]).ids
    for start in (0, 1, 2):
        part = ids[start:start + 3000]
        assert tok.decode(part) == ref.tok.decode(part)
        assert tok.decode(part[::-1]) == ref.tok.decode(part[::-1])


def test_the_long_routes_are_taken(pair, corpus):
    """The routes above are the ones these lengths take (else the tests would pass on the list route
    alone): byte-level ids as one array, a plain UTF-8 vocabulary's strings as one table."""
    ref, tok = pair("llama3")
    ids = ref.tok.encode(corpus("multi")[:40_000]).ids[:pipeline.DECODE_NP_IDS + 5]
    assert tok.pipeline._id_array(ids) is not None
    assert tok.pipeline._id_array(ids[:-6]) is None  # (too short)
    assert tok.pipeline._id_array(ids + [tok.vocab_size]) is None  # (an unknown id: the list route names it)
    ref, tok = pair("llama2")
    ids = ref.tok.encode(corpus("multi")).ids
    assert len(ids) >= tok.vocab_size // 4
    tok.decode(ids)
    assert isinstance(tok.pipeline._token_strs, list) and len(tok.pipeline._token_strs) == tok.vocab_size
