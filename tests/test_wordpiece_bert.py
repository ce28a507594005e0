"""The BERT family (WordPiece, WordLevel and their normalizers, pre-tokenizers and decoder),
checked against tokenizers itself.

The real minilm (WordPiece + BertNormalizer + BertPreTokenizer, with its own truncation and
padding) and botchan-wordlevel (WordLevel + NFKC/Lowercase + Whitespace) files are compared on full
Encodings (ids, offsets, type ids, masks) for 10,000+ generated strings with normalization
stressors and on pairs; then each component not in those two files is checked by editing the real
minilm JSON one component at a time, as tests/test_hf_components.py does for byte-level BPE.
"""

from __future__ import annotations

import json
import random
import unicodedata

import pytest

import tokmap

from conftest import export_variant, model_source
from gen_strings import generated
from test_hf_components import _check

N = 600
BERT_SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "[PAD]"]
STRESS = [
    "Ελλάδα ΟΔΟΣ ὀδυσσεύς σς", "İstanbul İİ ı", "ﬁne ﬂow ﬀ ﬃ", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ！？", "１２３ ²³ ⅓ 𝟘𝟙 ٣ ৪৫",
    "a\u200bb\u200cc\u200dd\ufeffe", "x\x00y\x01z\x0b\x0c\x1c\x1d\x7f\x85\u00ad\u2028\u2029", "\ufffd\ue000\U0010fffd",
    "中文字符 日本語 한국어 𠀀𪜀 \u2b920\u2b81f\u3400", "naïve café résumé Ångström", "hello[UNK]world [CLS]x[SEP] [MASK]",
    "don't I'm you're it's we've can't . , ! ? ' ", "a" * 101, "b" * 100, "ab" * 60, "\u0301\u0301 a\u0301",
    "ǅemal Ǆ ǆ", "ΣΑΣ ßẞ ŉ ǰ ΐ", "  \t\n  ", "", "[UNK]", "Ⅻ ⅻ ㎏ ㈱ ㍻", "\U0001f44d\U0001f3fd 👨‍👩‍👧",
]


def _stress_strings(n, seed):
    rng = random.Random(seed)
    base = generated(n, BERT_SPECIALS, seed=seed)
    out = []
    for k, t in enumerate(base):
        r = rng.random()
        if r < 0.15:
            t = unicodedata.normalize("NFD", t)  # decomposed input
        elif r < 0.25:
            t = t + " " + rng.choice(STRESS)
        out.append(t)
    return out + STRESS + [unicodedata.normalize("NFD", s) for s in STRESS]


def _full(e):
    return e.ids, e.offsets, e.type_ids, e.attention_mask, e.special_tokens_mask


@pytest.mark.parametrize("name", ["minilm", "botchan-wordlevel"])
def test_real_files_full_encodings(name, testdata, exported):
    import tokenizers

    ref = tokenizers.Tokenizer.from_file(str(model_source(testdata, name)))
    tok = tokmap.load(exported(name))
    texts = _stress_strings(10_000, seed=31)
    assert len(texts) >= 10_000
    bad = []
    for t in texts:
        for special in (True, False):
            e, g = ref.encode(t, add_special_tokens=special), tok.encode_full(t, add_special_tokens=special)
            if _full(e) != _full(g):
                bad.append((special, t[:60], e.ids[:10], g.ids[:10], e.offsets[:6], g.offsets[:6]))
        if ref.decode(e.ids) != tok.decode(e.ids):
            bad.append(("decode", t[:60], ref.decode(e.ids)[:60], tok.decode(e.ids)[:60]))
        if ref.decode(e.ids, skip_special_tokens=False) != tok.decode(e.ids, skip_special_tokens=False):
            bad.append(("decode all", t[:60]))
    for a, b in zip(texts[:2000:2], texts[1:2000:2]):
        e, g = ref.encode(a, b), tok.encode_full(a, b)
        if _full(e) != _full(g):
            bad.append(("pair", a[:30], b[:30], e.ids[:10], g.ids[:10]))
    assert not bad, f"{name}: {len(bad)} differences, first: {bad[:3]}"


@pytest.fixture(scope="module")
def minilm(testdata):
    return json.loads(model_source(testdata, "minilm").read_text(encoding="utf-8"))


def _texts(seed):
    return _stress_strings(N, seed) + ["the-final--countdown-", "Hello,  World!!", "a.b,c;d"]


@pytest.mark.parametrize("clean_text", [False, True])
@pytest.mark.parametrize("handle_chinese_chars", [False, True])
@pytest.mark.parametrize("strip_accents,lowercase", [(None, False), (True, False), (False, True), (None, True)])
def test_bert_normalizer_options(minilm, tmp_path, clean_text, handle_chinese_chars, strip_accents, lowercase):
    doc = dict(minilm, truncation=None, padding=None)
    doc["normalizer"] = {"type": "BertNormalizer", "clean_text": clean_text, "handle_chinese_chars": handle_chinese_chars,
                         "strip_accents": strip_accents, "lowercase": lowercase}
    _check(doc, tmp_path, _texts(41))


@pytest.mark.parametrize("normalizer", [
    {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
    {"type": "Lowercase"},
])
def test_ascii_text_by_one_call(minilm, tmp_path, normalizer):
    """An ASCII text takes each table's ASCII map (str.lower, or one bytes.translate, with
    clean_text's deletions) in one C call: its text, and its alignment, equal the per-char table's
    on every ASCII char and on random ASCII strings, and the whole file encodes as tokenizers does."""
    from tokmap.runtime.bert import CharMap

    doc = dict(minilm, truncation=None, padding=None, normalizer=normalizer)
    ref, tok = export_variant(doc, tmp_path)
    steps = [s for s in tok.pipeline.normalizers if isinstance(s, CharMap)]
    rng = random.Random(5)
    texts = [chr(c) for c in range(128)] + ["".join(rng.choice([chr(c) for c in range(128)]) for _ in range(40))
                                           for _ in range(300)]
    kinds = set()
    for step in steps:
        memo = step._memo()
        assert step.ascii is not None
        kinds.add("lower" if step.ascii is str.lower else "deletes" if not step.ascii_one else "other")
        for t in texts:
            slow = t.translate(memo)
            assert step.normalize_chars(t, None)[0] == slow, repr(t)
            new, align = step.normalize(t, True)
            assert new == slow, repr(t)
            if align is None:  # (the identity: one char for one)
                assert len(slow) == len(t), repr(t)
    assert kinds >= ({"lower", "deletes"} if normalizer["type"] == "BertNormalizer" else {"lower"})
    assert all(ref.normalizer.normalize_str(t) == tok.pipeline.normalize(t)[0] for t in texts)
    _check(doc, tmp_path, texts[:200] + ["Hello,  World!!\t\x00x", "A\x7fB\x1fC"])


@pytest.mark.parametrize("normalizer", [
    {"type": "Lowercase"},
    {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
    {"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "StripAccents"}]},
    {"type": "StripAccents"},
    {"type": "Sequence", "normalizers": [{"type": "Strip", "strip_left": True, "strip_right": True},
                                         {"type": "Lowercase"}]},
    {"type": "Strip", "strip_left": False, "strip_right": True},
    {"type": "Strip", "strip_left": True, "strip_right": False},
    {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
])
def test_normalizers(minilm, tmp_path, normalizer):
    doc = dict(minilm, truncation=None, padding=None, normalizer=normalizer)
    _check(doc, tmp_path, _texts(42) + ["  Hello\u2003 ", "\u3000x\u00a0", "\x1cab\x1f", " \u200b",
                                        " \t\u3000\u2028 ", "\x85x\x85", "\u180ex\u180e", ""])


@pytest.mark.parametrize("left,right", [(True, True), (True, False), (False, True)])
def test_strip_by_str_methods(minilm, tmp_path, left, right):
    """Strip cuts by str.lstrip / rstrip over its table's whitespace chars: the same ends as the
    per-char table test, on random texts of whitespace and other chars (all whitespace included)."""
    from tokmap.runtime.bert import Strip

    doc = dict(minilm, truncation=None, padding=None,
               normalizer={"type": "Strip", "strip_left": left, "strip_right": right})
    _ref, tok = export_variant(doc, tmp_path)
    (step,) = [s for s in tok.pipeline.normalizers if isinstance(s, Strip)]
    step.normalize("x", False)
    assert step.chars is not None and "\u3000" in step.chars and "\u200b" not in step.chars
    rng = random.Random(3)
    alphabet = list(step.chars) + ["a", "\u200b", "\u180e", "b c"]
    for _ in range(3000):
        t = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))
        s, e = step._ends(t)
        new, align = step.normalize(t, True)
        assert new == t[s:e] and (align is None) == (s == 0 and e == len(t)), repr(t)
        if align is not None:
            assert align == [(i, i + 1) for i in range(s, e)]


@pytest.mark.parametrize("pre", [
    {"type": "Whitespace"},
    {"type": "WhitespaceSplit"},
    {"type": "Punctuation"},
    {"type": "Punctuation", "behavior": "Removed"},
    {"type": "Punctuation", "behavior": "MergedWithPrevious"},
    {"type": "Punctuation", "behavior": "MergedWithNext"},
    {"type": "Punctuation", "behavior": "Contiguous"},
    {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Punctuation"}]},
    None,
])
def test_pre_tokenizers(minilm, tmp_path, pre):
    doc = dict(minilm, truncation=None, padding=None, pre_tokenizer=pre)
    _check(doc, tmp_path, _texts(43))


@pytest.mark.parametrize("max_chars", [0, 3, 8])
def test_wordpiece_max_chars(minilm, tmp_path, max_chars):
    doc = dict(minilm, truncation=None, padding=None)
    doc["model"] = dict(minilm["model"], max_input_chars_per_word=max_chars)
    _check(doc, tmp_path, _texts(44))


def test_wordpiece_other_prefix(minilm, tmp_path):
    doc = dict(minilm, truncation=None, padding=None)
    vocab = {(k.replace("##", "@@", 1) if k.startswith("##") else k): v for k, v in minilm["model"]["vocab"].items()}
    doc["model"] = dict(minilm["model"], vocab=vocab, continuing_subword_prefix="@@")
    doc["decoder"] = {"type": "WordPiece", "prefix": "@@", "cleanup": False}
    _check(doc, tmp_path, _texts(45))


@pytest.mark.parametrize("decoder", [{"type": "WordPiece", "prefix": "##", "cleanup": False}, None])
def test_decoders(minilm, tmp_path, decoder):
    doc = dict(minilm, truncation=None, padding=None, decoder=decoder)
    _check(doc, tmp_path, _texts(46))


def test_minilm_truncation_pairs(minilm, tmp_path):
    doc = dict(minilm, truncation={"max_length": 20, "strategy": "LongestFirst", "stride": 4, "direction": "Right"},
               padding={"strategy": {"Fixed": 24}, "direction": "Left", "pad_to_multiple_of": None, "pad_id": 0,
                        "pad_type_id": 1, "pad_token": "[PAD]"})
    _check(doc, tmp_path, _texts(47), pairs=True, batch=True)


@pytest.mark.parametrize("pre", [{"type": "BertPreTokenizer"}, None])
def test_wordlevel_variants(testdata, tmp_path, pre):
    doc = json.loads(model_source(testdata, "botchan-wordlevel").read_text(encoding="utf-8"))
    doc["pre_tokenizer"] = pre
    # Strip can empty a piece between added tokens: an empty split gives no token at all.
    doc["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Strip", "strip_left": True,
                                                              "strip_right": True}, {"type": "Lowercase"}]}
    doc["decoder"] = {"type": "WordPiece", "prefix": "##", "cleanup": True}
    _check(doc, tmp_path, _texts(48) + ["the", " the ", " [UNK] x", "x [CLS]", "[CLS] ", "[CLS][SEP]"], pairs=True)


def test_missing_unk_refused(minilm, tmp_path):
    doc = dict(minilm)
    doc["model"] = dict(minilm["model"], unk_token="<nope>")
    src = tmp_path / "tokenizer.json"
    src.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(tokmap.UnsupportedError, match="unk_token"):
        tokmap.export(src, tmp_path / "t.mtok")


@pytest.mark.parametrize("post", [
    {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]},
    {"type": "RobertaProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101], "trim_offsets": True,
     "add_prefix_space": False},
])
def test_post_processors(minilm, tmp_path, post):
    doc = dict(minilm, truncation=None, padding=None, post_processor=post)
    _check(doc, tmp_path, _texts(49), pairs=True)


def test_normalized_added_tokens(minilm, tmp_path):
    """Added tokens with normalized=true are matched in the BertNormalizer's output."""
    doc = dict(minilm, truncation=None, padding=None)
    doc["added_tokens"] = minilm["added_tokens"] + [
        {"id": 0, "content": "NaïVe Café", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True,
         "special": False},
        {"id": 0, "content": "中x", "single_word": True, "lstrip": True, "rstrip": True, "normalized": True,
         "special": True},
    ]
    extra = ["naive cafe", "NAÏVE CAFÉ", "Nai\u0308ve Cafe\u0301", "中x", "a中x b", " 中x "]
    _check(doc, tmp_path, generated(N, BERT_SPECIALS + extra, seed=50) + extra)


def test_marks_reordered_across_chars(minilm, tmp_path):
    """The ids-only path folds the normalizers and the pre-tokenizer into one translate table
    (runtime/bert.ChainMemo), which is exact per char except where NFD's canonical reordering swaps
    marks that came from two neighbouring chars: those texts must take the steps one by one. With
    the marks kept (no StripAccents) and vocabulary entries in reordered form, a per-char shortcut
    would give [UNK] where tokenizers gives the entry."""
    doc = dict(minilm, truncation=None, padding=None)
    doc["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}]}
    vocab = dict(minilm["model"]["vocab"])
    for w in ("e\u0323\u0301", "a\u0323\u0302x"):
        vocab[w] = len(vocab)
    doc["model"] = dict(minilm["model"], vocab=vocab)
    texts = ["\u00e9\u0323", "\u00c9\u0323 x", "a\u0302\u0323x", "\u1ea7\u0323x", "\u00e9 \u0323", "\u1eb9\u0301"]
    ref, tok = export_variant(doc, tmp_path)
    hits = [t for t in texts if set(ref.encode(t).ids) & {vocab["e\u0323\u0301"], vocab["a\u0323\u0302x"]}]
    assert len(hits) >= 3, "the texts no longer reach the reordered entries: the test would not fail"
    _check(doc, tmp_path, texts + _texts(51))


def test_vocab_search_equals_the_dict(exported, testdata):
    """WordPiece looks words up by binary search over the mapped vocabulary until its str -> id dict
    is built (a document, or DICT_AFTER lookups): both answer alike for every token, its neighbours
    in byte order, prefixes and non-tokens; short encodes stay off the dict and equal tokenizers'."""
    from tokenizers import Tokenizer

    from tokmap.runtime.models import wordpiece

    tok = tokmap.load(exported("minilm"))
    model = tok.model
    words = dict(model._words())  # built here for the comparison only
    model._vocab, model.find = None, model._search
    r = random.Random(5)
    probes = list(words)
    probes += [w + "x" for w in r.sample(probes, 2000)] + [w[:-1] for w in r.sample(probes, 2000) if len(w) > 1]
    probes += ["##" + w for w in r.sample(probes, 2000)] + ["", "\u00e9t\u00e9", "\u4e2d\u6587", "\ud800", "x" * 300]
    for w in probes:
        assert model.lookup(w.encode("utf-8", "surrogatepass")) == words.get(w), w
    fresh = tokmap.load(exported("minilm"))
    ref = Tokenizer.from_file(str(model_source(testdata, "minilm")))
    for text in ["Hello world", "unbelievably tokenized", "\u4e2d\u6587 caf\u00e9 ##x"]:
        assert fresh.encode(text) == ref.encode(text).ids
    assert fresh.model._vocab is None and 0 < fresh.model._searches < wordpiece.DICT_AFTER
    while fresh.model._vocab is None:  # many short calls: the dict comes after DICT_AFTER searches
        text = f"antidisestablishmentarianism {fresh.model._searches}"
        assert fresh.encode(text) == ref.encode(text).ids
    assert fresh.model.find == fresh.model._vocab.get
