"""Bit-exact ids and decoded text against the reference libraries on the real byte-level BPE files.

For each model: every corpus as one document, every non-empty line of every corpus, and 10,000+
generated adversarial strings (plus 10^5-character runs with no split point). tokenizer.json
sources are compared with `tokenizers` (add_special_tokens true and false, decode, offsets),
.tiktoken with `tiktoken` (encode_ordinary, allowed_special="all", decode), Tekken with
mistral-common's Tekkenizer (bos=False/True, decode).
"""

from __future__ import annotations

import pytest

import tokmap

from conftest import CORPORA, HF_MODELS, TIKTOKEN_MODELS, model_source
from gen_strings import generated, long_runs

N_GENERATED = 10_000
MODELS = HF_MODELS + list(TIKTOKEN_MODELS) + ["tekken"]


class Ref:
    """The reference library behind one model, with tokmap's calling convention."""

    def __init__(self, name, src):
        self.name = name
        if name in HF_MODELS:
            import tokenizers

            self.kind = "hf"
            # The file's own truncation and padding stay on: tokmap honours them too (minilm has both).
            self.tok = tokenizers.Tokenizer.from_file(str(src))
            self.specials = [t.content for t in self.tok.get_added_tokens_decoder().values()]
        elif name in TIKTOKEN_MODELS:
            import tiktoken
            from tiktoken.load import load_tiktoken_bpe

            self.kind = "tiktoken"
            # The pattern and specials come from tiktoken's own registry, not from tokmap.
            import tiktoken_ext.openai_public as op

            spec = getattr(op, TIKTOKEN_MODELS[name])
            import unittest.mock as mock

            with mock.patch("tiktoken_ext.openai_public.load_tiktoken_bpe", lambda *a, **k: load_tiktoken_bpe(str(src))):
                d = spec()
            self.tok = tiktoken.Encoding(name=d["name"], pat_str=d["pat_str"], mergeable_ranks=d["mergeable_ranks"],
                                         special_tokens=d["special_tokens"])
            self.specials = list(d["special_tokens"])
        else:
            from mistral_common.tokens.tokenizers.tekken import Tekkenizer

            self.kind = "tekken"
            self.tok = Tekkenizer.from_file(str(src))
            self.specials = ["<s>", "</s>", "[INST]", "[/INST]", "<unk>"]

    def cases(self):
        """(label, reference fn, tokmap fn) for encode."""
        if self.kind == "hf":
            return [("special", lambda t: self.tok.encode(t, add_special_tokens=True).ids,
                     lambda m, t: m.encode(t, add_special_tokens=True)),
                    ("plain", lambda t: self.tok.encode(t, add_special_tokens=False).ids,
                     lambda m, t: m.encode(t, add_special_tokens=False))]
        if self.kind == "tiktoken":
            return [("ordinary", self.tok.encode_ordinary, lambda m, t: m.encode_ordinary(t)),
                    ("all", lambda t: self.tok.encode(t, allowed_special="all"),
                     lambda m, t: m.encode(t, allowed_special="all"))]
        return [("nobos", lambda t: self.tok.encode(t, bos=False, eos=False),
                 lambda m, t: m.encode(t, add_special_tokens=False)),
                ("bos", lambda t: self.tok.encode(t, bos=True, eos=False), lambda m, t: m.encode(t))]

    def decode(self, ids):
        return self.tok.decode(ids)


_REFS: dict[str, Ref] = {}


@pytest.fixture(scope="module")
def ref(testdata):
    def get(name):
        if name not in _REFS:
            _REFS[name] = Ref(name, model_source(testdata, name))
        return _REFS[name]

    return get


def _compare(ref: Ref, tok, texts, check_decode=True):
    mismatches = []
    for text in texts:
        for label, r_fn, t_fn in ref.cases():
            expected = r_fn(text)
            got = t_fn(tok, text)
            if expected != got:
                mismatches.append((label, text[:120], expected[:30], got[:30]))
            elif check_decode and label == ref.cases()[0][0]:
                if ref.decode(expected) != tok.decode(got):
                    mismatches.append(("decode", text[:120], ref.decode(expected)[:60], tok.decode(got)[:60]))
    return mismatches


@pytest.mark.parametrize("name", MODELS)
def test_documents(name, ref, exported, corpus):
    r = ref(name)
    tok = tokmap.load(exported(name))
    for c in CORPORA:
        text = corpus(c)
        bad = _compare(r, tok, [text])
        assert not bad, f"{name} on {c}.txt as one document: {bad[:3]}"


@pytest.mark.parametrize("name", MODELS)
def test_lines(name, ref, exported, corpus):
    r = ref(name)
    tok = tokmap.load(exported(name))
    total = 0
    for c in CORPORA:
        lines = [ln for ln in corpus(c).split("\n") if ln]
        total += len(lines)
        bad = _compare(r, tok, lines)
        assert not bad, f"{name}: {len(bad)} of {len(lines)} lines of {c}.txt differ, first: {bad[:3]}"
    assert total > 80_000


@pytest.mark.parametrize("name", MODELS)
def test_generated(name, ref, exported):
    r = ref(name)
    tok = tokmap.load(exported(name))
    texts = generated(N_GENERATED, r.specials, seed=hash(name) & 0xFFFF)
    bad = _compare(r, tok, texts)
    assert not bad, f"{name}: {len(bad)} of {len(texts)} generated strings differ, first: {bad[:3]}"


@pytest.mark.parametrize("name", MODELS)
def test_long_runs(name, ref, exported):
    r = ref(name)
    tok = tokmap.load(exported(name))
    bad = _compare(r, tok, long_runs(), check_decode=True)
    assert not bad, f"{name}: long runs differ: {[(b[0], b[1][:10]) for b in bad]}"


SURROGATE_TEXTS = ["a\ud800b", "\udc00", "x" * 300 + "\ud800", "ok \ud83d\ude00 two halves of an emoji", "\udfff\ud800"]


@pytest.mark.parametrize("name", MODELS)
def test_surrogates(name, ref, exported):
    """A str holding surrogate code points, alone or as the two halves of a pair: where the
    reference refuses it (tokenizers: a TypeError), tokmap raises EncodeError, in encode and
    encode_batch alike; where it encodes it (tiktoken and mistral-common replace each lone one
    with U+FFFD and join the halves), tokmap's ids are its ids."""
    r = ref(name)
    tok = tokmap.load(exported(name))
    for text in SURROGATE_TEXTS:
        for label, r_fn, t_fn in r.cases():
            try:
                expected = r_fn(text)
            except Exception:
                with pytest.raises(tokmap.EncodeError, match="surrogate"):
                    t_fn(tok, text)
                continue
            assert t_fn(tok, text) == expected, (label, text[:20])
    batch = ["hello world " * 2000, SURROGATE_TEXTS[0]]
    if r.kind == "hf":
        with pytest.raises(tokmap.EncodeError, match="U\\+D800 at index 1"):
            tok.encode_batch(batch)
    else:
        assert tok.encode_batch(batch) == [tok.encode(t) for t in batch]


@pytest.mark.parametrize("name", HF_MODELS)
def test_decode_ids_out_of_range(name, ref, exported):
    """tokenizers drops ids its vocabulary lacks but raises for one that is no u32 (a -100 label):
    tokmap decodes the first kind to the same text and refuses the second with ArgumentError."""
    r = ref(name)
    tok = tokmap.load(exported(name))
    for ids in ([-100], [5, -1], [1 << 32], [5, (1 << 32) - 1], [10 ** 6, 5, 6], [5, 6]):
        for skip in (True, False):
            try:
                expected = r.tok.decode(ids, skip_special_tokens=skip)
            except OverflowError:
                with pytest.raises(tokmap.ArgumentError, match="2\\^32"):
                    tok.decode(ids, skip_special_tokens=skip)
                continue
            assert tok.decode(ids, skip_special_tokens=skip) == expected, ids


@pytest.mark.parametrize("name", HF_MODELS)
def test_offsets_lines(name, ref, exported, corpus):
    """Encoding.offsets (code points) equal tokenizers' on every corpus line, with specials."""
    r = ref(name)
    tok = tokmap.load(exported(name))
    for c in CORPORA:
        lines = [ln for ln in corpus(c).split("\n") if ln]
        bad = []
        for line in lines:
            e = r.tok.encode(line)
            got = tok.encode_full(line)
            if e.offsets != got.offsets or e.ids != got.ids:
                bad.append((line[:80], e.offsets[:8], got.offsets[:8]))
        assert not bad, f"{name} offsets on {c}.txt: {len(bad)} lines differ, first {bad[:2]}"


@pytest.mark.parametrize("name", MODELS)
def test_vocab_lookups(name, ref, exported):
    """id_to_token / token_to_id agree with the reference's own lookups on a sample of ids."""
    r = ref(name)
    tok = tokmap.load(exported(name))
    bad = []
    for i in list(range(0, tok.vocab_size, 97)) + [a.id for a in tok.added_tokens][:50]:
        if r.kind == "hf":
            expected = r.tok.id_to_token(i)
            if expected is not None and r.tok.token_to_id(expected) != tok.token_to_id(expected):
                bad.append(("token_to_id", i))
        elif r.kind == "tiktoken":
            try:
                expected = r.tok.decode_single_token_bytes(i)
            except KeyError:
                expected = None
            if expected is not None and r.tok.encode_single_token(expected) != tok.token_to_id(expected):
                bad.append(("token_to_id", i))
        else:
            expected = r.tok.id_to_piece(i)
        if tok.id_to_token(i) != expected:
            bad.append((i, expected, tok.id_to_token(i)))
    assert not bad, bad[:5]
