"""Character-level BPE components beyond the two real files (Llama 2, Gemma 3), against tokenizers.

Each case edits the real llama2 tokenizer.json (one component at a time), or trains a small BPE
with tokenizers itself where the real vocabulary cannot express the option
(continuing_subword_prefix / end_of_word_suffix), exports it, and compares ids, offsets and
decoded text with tokenizers on generated strings plus byte-fallback stressors: Digits,
CharDelimiterSplit, UnicodeScripts, CTC, BPEDecoder, Strip, Replace with Regex and String
patterns, Prepend, byte_fallback / fuse_unk / unk_token variants.
"""

from __future__ import annotations

import json

import pytest

from conftest import model_source
from gen_strings import generated
from test_hf_components import _check

N = 400
STRESS = ["㐀㐁", "𠀀𪜀", "👍🏽x", "\ue000\uf8ff", "\U000f0000", "<unk>", "a<unk>b", "<s></s>", "x  y", " ", "",
          "１２３ ½ ²³ ४५६ 五", "abc123def", "日本語とカタカナー漢字", "Ελληνικά русский", "a\u0301b", "\x00\x7f",
          "hello world", "  leading", "trailing  ", "a--b", "||x||", "xxaxx", "ab ab", "\U0010fffd"]


@pytest.fixture(scope="module")
def base(testdata):
    return json.loads(model_source(testdata, "llama2").read_text(encoding="utf-8"))


def texts(seed):
    return generated(N, ["<s>", "</s>", "<unk>"], seed=seed) + STRESS


def _with(base, **kw):
    doc = dict(base)
    doc.update(kw)
    return doc


@pytest.mark.parametrize("individual", [False, True])
def test_digits(base, tmp_path, individual):
    doc = _with(base, pre_tokenizer={"type": "Digits", "individual_digits": individual})
    _check(doc, tmp_path, texts(21))


def test_char_delimiter_split(base, tmp_path):
    doc = _with(base, pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "CharDelimiterSplit", "delimiter": "\u2581"}, {"type": "CharDelimiterSplit", "delimiter": "é"}]})
    _check(doc, tmp_path, texts(22) + ["éé", "aéb"])


def test_unicode_scripts(base, tmp_path):
    doc = _with(base, pre_tokenizer={"type": "UnicodeScripts"},
                normalizer={"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "})
    _check(doc, tmp_path, texts(23) + [" Hello", "   ", "abcカタカナーひらがな漢字def", "x 日本", "1a٣b"])


@pytest.mark.parametrize("pattern,content", [
    ({"Regex": "\\s+"}, "\u2581"), ({"Regex": "x*"}, "-"), ({"Regex": "(?<=a)b|\\p{N}+"}, "<>"),
    ({"Regex": "^."}, ""), ({"Regex": "[\\p{Lo}\\p{Nd}]"}, "漢字"), ({"String": "ab"}, "X"), ({"String": ""}, "-"),
    ({"String": " "}, ""), ({"Regex": "a|"}, "_"),
])
def test_replace_normalizer(base, tmp_path, pattern, content):
    doc = _with(base, normalizer={"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": pattern, "content": content},
        {"type": "Prepend", "prepend": "\u2581\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})
    _check(doc, tmp_path, texts(24))


@pytest.mark.parametrize("model_edit", [
    {"byte_fallback": False}, {"byte_fallback": False, "fuse_unk": False}, {"fuse_unk": False},
    {"byte_fallback": False, "unk_token": None}, {"ignore_merges": True},
])
def test_model_options(base, tmp_path, model_edit):
    doc = dict(base)
    doc["model"] = dict(base["model"], **model_edit)
    if model_edit.get("byte_fallback") is False:
        # Drop some common chars from the vocabulary (merges using them too) to get unknowns.
        gone = {"é", "ö", "日", "本", "x"}
        vocab = {k: v for k, v in base["model"]["vocab"].items() if not (set(k) & gone)}
        doc["model"]["vocab"] = vocab
        doc["model"]["merges"] = [m for m in base["model"]["merges"] if not (set(m) & gone)]
        doc["added_tokens"] = base["added_tokens"]
    _check(doc, tmp_path, texts(25) + ["xxéx", "日本x日本", "xé日"])


def test_pieces_of_no_ids_in_one_pass(base, tmp_path):
    """No unk and no byte fallback: a word of chars without tokens has no ids at all. Many fresh
    words are cut in one encode_long pass, so such a word is a part of no ids there, last or
    between others: the ids still equal tokenizers' (it once raised IndexError at the end)."""
    import random

    from conftest import export_variant

    gone = {"x", "\u00e9"}
    doc = dict(base, normalizer=None, pre_tokenizer={"type": "WhitespaceSplit"})
    doc["model"] = dict(base["model"], byte_fallback=False, unk_token=None,
                        vocab={k: v for k, v in base["model"]["vocab"].items() if not set(k) & gone},
                        merges=[m for m in base["model"]["merges"] if not set(m) & gone])
    ref, tok = export_variant(doc, tmp_path)
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvw") for _ in range(rng.randint(2, 9))) for _ in range(300)]
    for text in (" ".join(words) + " xx", "xx " + " ".join(words) + " x\u00e9x",
                 " ".join(w if i % 7 else "x" * (i % 5 + 1) for i, w in enumerate(words))):
        assert tok.encode(text) == ref.encode(text).ids
        assert tok.encode(text) == ref.encode(text).ids


@pytest.mark.parametrize("decoder", [
    {"type": "CTC", "pad_token": "<unk>", "word_delimiter_token": "\u2581", "cleanup": True},
    {"type": "CTC", "pad_token": "<unk>", "word_delimiter_token": "\u2581", "cleanup": False},
    {"type": "BPEDecoder", "suffix": "\u2581"},
    {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"Regex": "\u2581+"}, "content": " "},
                                      {"type": "ByteFallback"}, {"type": "Replace", "pattern": {"Regex": "e*"},
                                                                 "content": "3"}]},
    {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Strip", "content": "\u2581", "start": 2,
                                                                  "stop": 1}]},
    {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": "__"},
                                      {"type": "Fuse"}, {"type": "Strip", "content": "_", "start": 3, "stop": 2}]},
])
def test_decoders(base, tmp_path, decoder):
    import tokenizers

    import tokmap

    src = tmp_path / "tokenizer.json"
    src.write_text(json.dumps(_with(base, decoder=decoder)), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(src))
    tokmap.export(src, tmp_path / "t.mtok")
    tok = tokmap.load(tmp_path / "t.mtok")
    bad, checked = [], 0
    for t in texts(26):
        ids = ref.encode(t).ids
        for skip in (True, False):
            try:  # Strip panics in tokenizers on tokens shorter than its counts: not comparable
                expected = ref.decode(ids, skip_special_tokens=skip)
            except BaseException:
                continue
            checked += 1
            if tok.decode(ids, skip_special_tokens=skip) != expected:
                bad.append((t[:40], expected[:40], tok.decode(ids, skip_special_tokens=skip)[:40]))
    assert checked >= 50 and not bad, f"{len(bad)} differences, first: {bad[:3]}"


@pytest.mark.parametrize("prefix,suffix", [("##", None), (None, "</w>"), ("##", "</w>")])
def test_prefix_and_suffix(testdata, tmp_path, prefix, suffix):
    import tokenizers
    from tokenizers import models, pre_tokenizers, trainers

    kw = {k: v for k, v in (("continuing_subword_prefix", prefix), ("end_of_word_suffix", suffix)) if v}
    tok = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]", **kw))
    tok.pre_tokenizer = pre_tokenizers.CharDelimiterSplit(" ")
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["[UNK]"], **kw)
    text = (testdata / "corpus" / "en.txt").read_text(encoding="utf-8")[:60000]
    tok.train_from_iterator(text.split("\n"), trainer)
    doc = json.loads(tok.to_str())
    if suffix:
        doc["decoder"] = {"type": "BPEDecoder", "suffix": suffix}
    _check(doc, tmp_path, generated(N, ["[UNK]"], seed=27) + STRESS + text.split("\n")[:200])


RARE = ["\u3400", "\u4dbf", "\U00020000", "\U0002a6df", "\U0002b740", "\U00030000", "\U000323af", "\u9fff", "龘",
        "\ue000", "\uf8ff", "\U000f0000", "\U0010fffd", "\U000e0001", "🫨", "🧑🏿‍💻", "👩‍👩‍👧", "\ufffd", "\x00",
        "\U0001d11e", "𓀀", "ꙮ", "\u0378", "\U000e01ef"]


@pytest.mark.parametrize("name", ["llama2", "gemma3"])
def test_byte_fallback_stress(testdata, tmp_path, name):
    """10,000 generated strings with rare CJK, emoji, private-use and unassigned chars and the
    model's specials spliced in: ids, offsets and decode equal tokenizers', specials on and off."""
    import random

    import tokenizers

    import tokmap

    src = model_source(testdata, name)
    ref = tokenizers.Tokenizer.from_file(str(src))
    tokmap.export(src, tmp_path / "t.mtok")
    tok = tokmap.load(tmp_path / "t.mtok")
    specials = [t.content for t in ref.get_added_tokens_decoder().values()]
    rng = random.Random(31)
    base = generated(10_000, specials[:40], seed=32)
    bad = []
    for s in base:
        parts = list(s)
        for _ in range(rng.randint(1, 4)):
            extra = rng.choice(RARE + [rng.choice(specials)]) * rng.randint(1, 3)
            parts.insert(rng.randint(0, len(parts)), extra)
        t = "".join(parts)
        for special in (True, False):
            e = ref.encode(t, add_special_tokens=special)
            g = tok.encode_full(t, add_special_tokens=special)
            if e.ids != g.ids or e.offsets != g.offsets:
                bad.append((special, t[:50], e.ids[:10], g.ids[:10]))
        if ref.decode(e.ids) != tok.decode(e.ids) or \
                ref.decode(e.ids, skip_special_tokens=False) != tok.decode(e.ids, skip_special_tokens=False):
            bad.append(("decode", t[:50]))
    assert not bad, f"{len(bad)} of {len(base)} differ, first: {bad[:3]}"


@pytest.mark.parametrize("pre", [{"type": "Digits", "individual_digits": True}, {"type": "UnicodeScripts"}])
def test_pre_tokenizer_tables_exhaustive(base, tmp_path, pre):
    """Every code point, in order and interleaved with ASCII: the pieces equal tokenizers'."""
    import tokenizers

    import tokmap

    doc = _with(base, pre_tokenizer=pre, normalizer=None)
    src = tmp_path / "tokenizer.json"
    src.write_text(json.dumps(doc), encoding="utf-8")
    tokmap.export(src, tmp_path / "t.mtok")
    pipe = tokmap.load(tmp_path / "t.mtok").pipeline
    ref = tokenizers.Tokenizer.from_file(str(src)).pre_tokenizer
    cps = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    for text in ("".join(cps), "a".join(cps), " ".join(cps[::7]) + "x1"):
        expected = [p for p, _ in ref.pre_tokenize_str(text)]
        got = [p for p, _ in pipe.pieces(text, 0)]
        assert got == expected


def _meta_set(*path_value):
    *path, value = path_value

    def edit(m):
        obj = m
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
    return edit


@pytest.mark.parametrize("edit,field", [
    (_meta_set("model", "byte_fallback", "yes"), "model.byte_fallback"),
    (_meta_set("model", "fuse_unk", 1), "model.fuse_unk"),
    (_meta_set("model", "boundaries", 5), "model.boundaries"),
    (_meta_set("model", "continuing_subword_prefix", 7), "model.continuing_subword_prefix"),
    (_meta_set("model", "byte_tokens_merge", "no"), "model.byte_tokens_merge"),
    (_meta_set("model", "byte_tokens_first", "3"), "model.byte_tokens_first"),
    (_meta_set("model", "byte_tokens_first", 32000), "model.byte_tokens_first"),
    (_meta_set("normalizer", 0, "prepend", None), r"normalizer\[0\].prepend"),
    (_meta_set("normalizer", 1, "literal", 3), r"normalizer\[1\].literal"),
    (_meta_set("normalizer", 1, "content", [1]), r"normalizer\[1\].content"),
])
def test_hostile_char_bpe_meta(testdata, tmp_path, edit, field):
    """A crafted META for a character-level BPE is refused at load, naming the field."""
    import tokmap
    from test_hostile_files import with_meta, write

    src = tmp_path / "llama2.mtok"
    tokmap.export(model_source(testdata, "llama2"), src)
    bad = write(tmp_path, with_meta(src, edit))
    with pytest.raises(tokmap.FormatError, match=field):
        tokmap.load(bad)


@pytest.mark.parametrize("name", ["gemma3", "llama2"])
def test_long_runs_merge_in_bulk_rounds(name, exported, testdata, monkeypatch):
    """A long run that neither chunking nor _merge_run takes merges alone with rounds while they
    merge in bulk: Gemma 3's "a" runs and Llama 2's spaces never reach the scalar heap, which
    before took such a run whole (Gemma 3, 10^6 "a": 1.9 s). Ids and text as tokenizers gives,
    runs mixed with short pieces in one batch too."""
    import tokenizers

    import tokmap
    from tokmap.runtime.models import bpe, charbpe

    heap_inputs = []
    merge_heap = bpe.BPE._merge_heap
    monkeypatch.setattr(bpe.BPE, "_merge_heap", lambda self, ids, ranks=None: heap_inputs.append(len(ids))
                        or merge_heap(self, ids, ranks))
    monkeypatch.setattr(charbpe.CharBPE, "_merge_run", lambda self, piece, tok_len: None)
    ref = tokenizers.Tokenizer.from_file(str(model_source(testdata, name)))
    tok = tokmap.load(exported(name))
    bulk = "a" * 20_000 if name == "gemma3" else " " * 20_000
    for text in [bulk, "a" * 20_000, " " * 20_000, "hello world " * 30 + "a" * 3000 + " end " + " " * 3000 + "x",
                 "b" * 600 + " " + "c" * 700 + " short words here"]:
        heap_inputs.clear()
        ids = tok.encode(text)
        assert ids == ref.encode(text).ids, (name, text[:20])
        assert tok.decode(ids) == ref.decode(ids)
        if text is bulk:
            assert max(heap_inputs, default=0) < 100, heap_inputs


RUNS = ["a" * 5000, " " * 5000, "1" * 3000, "中" * 2000, "." * 4000, "=" * 1500, "x" + "a" * 5000, "a" * 5000 + "b",
        "xyz" + " " * 4000 + "!?", "a" * 512, "a" * 513, " " * 777, "ab" + "a" * 2000, "\u00e9" * 3000,
        "Q" * 17 + "a" * 3000, "a" * 3000 + "Q" * 20, "hello " + "-" * 2500 + " world"]


@pytest.mark.parametrize("name", ["gemma3", "llama2"])
def test_runs_as_chunks_merged_once(name, exported, testdata, monkeypatch):
    """Runs of one char (a few other chars at either end allowed) merge as chunks placed in the
    phase of the run's repeated token and merged once per length (_merge_run): ids and text as
    tokenizers gives, whether the chunks glue or the run falls back; and they do glue for the
    plain runs of both models (10^6 "a" or spaces took 1.3-1.9 s before, 25-40 ms so)."""
    import tokenizers

    import tokmap
    from tokmap.runtime.models import charbpe

    glued = []
    merge_run = charbpe.CharBPE._merge_run
    monkeypatch.setattr(charbpe.CharBPE, "_merge_run",
                        lambda self, piece, tok_len: glued.append(r := merge_run(self, piece, tok_len)) or r)
    ref = tokenizers.Tokenizer.from_file(str(model_source(testdata, name)))
    tok = tokmap.load(exported(name))
    for text in RUNS:
        glued.clear()
        ids = tokmap.load(exported(name)).encode(text)  # (fresh: nothing cached)
        assert ids == ref.encode(text).ids, (name, text[:20])
        assert tok.decode(ids) == ref.decode(ids)
        if text in ("a" * 5000, " " * 5000, "x" + "a" * 5000):
            assert glued and all(g is not None for g in glued), (name, text[:3])


@pytest.mark.parametrize("name", ["gemma3", "llama2"])
def test_token_lengths_in_chars(name, exported):
    """_char_lengths (each token's length in chars, summed per token by reduceat) equals the
    length of each token's decoded text; on a made-up table, empty tokens count 0 wherever they
    are, and a token that starts inside a char makes it None (chunking is then left alone)."""
    from types import SimpleNamespace

    import numpy as np

    import tokmap
    from tokmap.runtime.models.charbpe import CharBPE

    tok = tokmap.load(exported(name))
    tok.encode("warm up")
    model = tok._pipeline.model
    tb, off = bytes(model.tb), np.frombuffer(model.off, np.uint32).tolist()
    want = [len(tb[a:b].decode("utf-8", "surrogatepass")) for a, b in zip(off, off[1:])]
    assert model._char_lengths().tolist() == want

    def lengths(tokens: list[bytes]):
        bounds = np.cumsum([0] + [len(t) for t in tokens]).astype(np.uint32)
        fake = SimpleNamespace(tb=b"".join(tokens), off=bounds.tobytes(), _char_len=None)
        got = CharBPE._char_lengths(fake)
        return None if got is None else got.tolist()

    assert lengths([b"", "ab\u00e9".encode(), b"", "\u3000".encode(), b"x", b""]) == [0, 3, 0, 1, 1, 0]
    assert lengths([b"", b""]) == [0, 0]
    assert lengths(["x\u00e9".encode(), b"", b""]) == [2, 0, 0]
    assert lengths([b"a", "\u00e9".encode()[:1], "\u00e9".encode()[1:]]) is None
