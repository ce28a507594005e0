"""SentencePiece .model sources: ids and decoded text against sentencepiece itself, and malformed
.model files refused with SourceError.

Compared with SentencePieceProcessor(model_file=...).encode(text) / .decode(ids) on every corpus as
one document, every non-empty line, and 10,000+ generated strings per model (tests/gen_strings.py
plus normalization-heavy and whitespace-heavy strings).
"""

from __future__ import annotations

import random
import struct
import unicodedata
from functools import partial

import pytest
from conftest import CORPORA, require
from gen_strings import generated, long_runs

import tokmap
from tokmap.errors import SourceError, UnsupportedError
from tokmap.runtime import spm_normalizer

MODELS = ["mistral-v3", "botchan_en_bpe_1000", "botchan_en_unigram_1000"]


def _source(testdata, name):
    return require(testdata / "models" / "sentencepiece" / f"{name}.model")


@pytest.fixture(scope="module")
def pair(testdata, tmp_path_factory):
    spm = pytest.importorskip("sentencepiece")
    out = tmp_path_factory.mktemp("spm")
    cache = {}

    def get(name):
        if name not in cache:
            src = _source(testdata, name)
            dst = out / f"{name}.mtok"
            tokmap.export(src, dst)
            cache[name] = (spm.SentencePieceProcessor(model_file=str(src)), tokmap.load(dst))
        return cache[name]

    return get


def _compare(sp, tok, texts):
    bad = []
    for t in texts:
        want = sp.encode(t)
        got = tok.encode(t, add_special_tokens=False)
        if got != want:
            bad.append(("ids", t[:80], got[:12], want[:12]))
            continue
        if tok.decode(got) != sp.decode(want):
            bad.append(("decode", t[:80]))
    return bad


def _extra_strings(n: int, seed: int = 99) -> list[str]:
    """Normalization and whitespace cases: NFD input, full-width forms, ligatures, compatibility
    digits, runs of spaces/tabs/newlines at either end, control and zero-width characters, and the
    control pieces' spellings inside text."""
    rng = random.Random(seed)
    words = ["café", "naïve", "Ångström", "résumé", "ﬁne", "ﬂow", "ﬀ", "ﬃx", "Ｈｅｌｌｏ", "ｶﾞｷﾞ", "①②③",
             "¹²³", "㍻", "㎞", "™", "½", "Ⅻ", "𝟘𝟙𝟚", "x\u200by", "a\u200dz", "\ufeffbom", "<unk>", "<s>", "</s>",
             "<0x41>", "▁", "▁▁x", "hello", "world", "日本", "한국어", "ελλάδα", "ﬁ\u0301", "ｶ\u3099", "\r\n"]
    spaces = [" ", "  ", "   ", "\t", "\n", "\r", "\x0b", "\x0c", "\u3000", "\xa0", "\u2002", "\x00", "\x01",
              "\x1f", "\x7f", "\x85", "\u200b", "\u2028"]
    out = []
    for _ in range(n):
        parts = [rng.choice(words) if rng.random() < 0.6 else rng.choice(spaces) for _ in range(rng.randint(1, 8))]
        s = rng.choice(["", " ", "  "]).join(parts)
        if rng.random() < 0.3:
            s = unicodedata.normalize("NFD", s)
        if rng.random() < 0.3:
            s = rng.choice(spaces) + s + rng.choice(spaces)
        out.append(s)
    return out


@pytest.mark.parametrize("name", MODELS)
def test_small(name, pair):
    sp, tok = pair(name)
    texts = ["Hello world", "  Hello   world  ", "", "   ", "\n", "a\tb\nc", "<unk> <s> </s>", "ﬁne ｆｕｌｌ ½",
             "日本語 😀", "\u200b", "x" * 3000, "é" * 50]
    assert not _compare(sp, tok, texts)


@pytest.mark.parametrize("name", MODELS)
def test_surrogates_refused_as_sentencepiece_does(name, pair):
    """sentencepiece cannot take a str holding a surrogate (lone or half of a pair) and raises;
    tokmap raises EncodeError naming it, never ids made of its UTF-8 stand-in bytes."""
    sp, tok = pair(name)
    for text in ["a\ud800b", "x" * 300 + "\udc00", "\ud83d\ude00"]:
        with pytest.raises(Exception):
            sp.encode(text)
        for call in (tok.encode, tok.encode_ordinary):
            with pytest.raises(tokmap.EncodeError, match="surrogate"):
                call(text)


@pytest.mark.parametrize("name", MODELS)
def test_generated(name, pair):
    sp, tok = pair(name)
    texts = generated(10_000, ["<unk>", "<s>", "</s>"], seed=4321) + _extra_strings(2_000)
    bad = _compare(sp, tok, texts)
    assert not bad, f"{name}: {len(bad)} of {len(texts)} differ, first: {bad[:3]}"


@pytest.mark.parametrize("name", MODELS)
def test_lines(name, pair, corpus):
    sp, tok = pair(name)
    for c in CORPORA:
        lines = [ln for ln in corpus(c).split("\n") if ln]
        bad = _compare(sp, tok, lines)
        assert not bad, f"{name}: {len(bad)} of {len(lines)} lines of {c}.txt differ, first: {bad[:3]}"


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("c", CORPORA)
def test_document(name, c, pair, corpus):
    sp, tok = pair(name)
    assert not _compare(sp, tok, [corpus(c)])


@pytest.mark.parametrize("name", MODELS)
def test_long_runs(name, pair):
    sp, tok = pair(name)
    assert not _compare(sp, tok, long_runs())


def test_bpe_without_cuts(testdata, tmp_path):
    """The whole-text BPE path (used when a piece holds a mid-piece U+2581) gives the same ids."""
    spm = pytest.importorskip("sentencepiece")
    for name in ("mistral-v3", "botchan_en_bpe_1000"):
        src = _source(testdata, name)
        tokmap.export(src, tmp_path / "x.mtok")
        tok = tokmap.load(tmp_path / "x.mtok")
        tok.encode("x")
        tok.model.cut = False
        assert not _compare(spm.SentencePieceProcessor(model_file=str(src)), tok,
                            generated(1_000, ["<s>"], seed=11) + _extra_strings(300))


@pytest.mark.parametrize("name", MODELS)
def test_decode_ids(name, pair):
    """Decoding arbitrary id sequences (control, unk and invalid byte runs included)."""
    sp, tok = pair(name)
    rng = random.Random(7)
    n = sp.get_piece_size()
    for _ in range(500):
        ids = [rng.randrange(n) for _ in range(rng.randint(0, 12))]
        assert tok.decode(ids) == sp.decode(ids), ids
    if sp.piece_to_id("<0xE2>") != sp.unk_id():
        byte = [sp.piece_to_id(f"<0x{b:02X}>") for b in (0xE2, 0x82, 0x41, 0xE2, 0x82, 0xAC, 0xFF)]
        assert tok.decode(byte) == sp.decode(byte)
    ws = sp.piece_to_id("\u2581")
    for ids in ([ws, sp.bos_id(), ws], [sp.bos_id(), ws, ws], [sp.unk_id(), ws], [ws, sp.unk_id()], [ws] * 3):
        assert tok.decode(ids) == sp.decode(ids), ids
    with pytest.raises(tokmap.TokmapError):
        tok.decode([n])


def test_bos(pair):
    sp, tok = pair("mistral-v3")
    assert tok.encode("Hi there") == [sp.bos_id()] + sp.encode("Hi there")


def test_detected_by_content(testdata, tmp_path):
    from tokmap.exporter import detect_format

    src = _source(testdata, "botchan_en_unigram_1000")
    assert detect_format(src, src.read_bytes()) == "sentencepiece"


# -- malformed .model files -------------------------------------------------------------------
def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num, wt, payload):
    key = _varint(num << 3 | wt)
    if wt == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def _piece(p, score=0.0, typ=1):
    return _field(1, 2, _field(1, 2, p.encode()) + _field(2, 5, struct.pack("<f", score)) + _field(3, 0, _varint(typ)))


def _minimal(model_type=2):
    pieces = _piece("<unk>", 0, 2) + _piece("<s>", 0, 3) + _piece("a", -1) + _piece("b", -2) + _piece("ab", -0.5)
    return pieces + _field(2, 2, _field(3, 0, _varint(model_type)))


def test_minimal_model_exports(tmp_path):
    p = tmp_path / "m.model"
    p.write_bytes(_minimal())
    tokmap.export(p, tmp_path / "m.mtok")
    tok = tokmap.load(tmp_path / "m.mtok")
    assert tok.encode("ab a", add_special_tokens=False) == [0, 4, 0, 2]  # "▁" is unknown


@pytest.mark.parametrize("model_type", [1, 2])  # unigram, bpe
@pytest.mark.parametrize("extra, cut", [
    (_piece("x\u2581y", -3), False),    # a mid-piece "▁" after another char: no cutting at "▁"
    (_piece("\u2581\u2581y", -3), True),  # "▁" only after "▁": cutting stays exact
    (_piece("u", -5, 4) + _piece("v", -6, 5), False),  # an UNUSED piece: no cutting either
])
def test_piece_tables(tmp_path, model_type, extra, cut):
    """The tables built on the first encode: pieces by string, reserved pieces apart, user-defined
    symbols, the unknown score (lowest NORMAL score - 10), unigram prefixes, and the cut decision."""
    p = tmp_path / "m.model"
    p.write_bytes(_minimal(model_type)[:-len(_field(2, 2, _field(3, 0, _varint(model_type))))] + extra
                  + _field(2, 2, _field(3, 0, _varint(model_type))))
    tokmap.export(p, tmp_path / "m.mtok")
    tok = tokmap.load(tmp_path / "m.mtok")
    tok.encode("a")
    m = tok.model
    assert m.cut is cut
    assert m.reserved == {"<unk>": 0, "<s>": 1}
    assert {k: v for k, v in m.pieces.items() if v < 5} == {"a": 2, "b": 3, "ab": 4}
    assert m.user == ({"u"} if "v" in m.pieces else set())
    assert m.unk_score == (-13.0 if "x\u2581y" in m.pieces or "\u2581\u2581y" in m.pieces else -12.0)
    if model_type == 1:
        assert {"a", "b", "ab"} <= m.prefixes and m.max_len == max(map(len, m.pieces))
        assert all(w[:k] in m.prefixes for w in m.pieces for k in range(1, len(w) + 1))


@pytest.mark.parametrize("model_type", [1, 2])
def test_piece_tables_with_a_string_both_reserved_and_kept(tmp_path, model_type):
    """The exporter refuses such a .model, but a .mtok can hold it: the piece tables then map the
    string to its first kept id and keep the reserved id apart, as a loop over the ids would."""
    from test_hostile_files import with_section, write
    from tokmap import mtok

    p = tmp_path / "m.model"
    p.write_bytes(_minimal(model_type)[:-len(_field(2, 2, _field(3, 0, _varint(model_type))))]
                  + _piece("<z>", -3) + _piece("<y>", -4) + _field(2, 2, _field(3, 0, _varint(model_type))))
    tokmap.export(p, tmp_path / "m.mtok")
    tok = tokmap.load(tmp_path / "m.mtok")
    tb = bytes(tok._f.view(mtok.SECTION_TOKEN_BYTES))
    assert tb.count(b"<z>") == tb.count(b"<y>") == 1
    edited = write(tmp_path, with_section(tmp_path / "m.mtok", mtok.SECTION_TOKEN_BYTES,
                                          tb.replace(b"<z>", b"<s>").replace(b"<y>", b"<s>")))
    tok = tokmap.load(edited)
    tok.encode("a")
    m = tok.model
    assert m.reserved == {"<unk>": 0, "<s>": 1}
    assert {k: v for k, v in m.pieces.items()} == {"a": 2, "b": 3, "ab": 4, "<s>": 5}


@pytest.mark.parametrize("mutate", ["truncated", "bad_varint", "wrong_type", "overlong", "no_unk", "empty_piece"])
def test_malformed(tmp_path, mutate):
    data = _minimal()
    if mutate == "truncated":
        data = data[:-3]
    elif mutate == "bad_varint":
        data = data + b"\x08" + b"\xff" * 11
    elif mutate == "wrong_type":
        data = data + _field(2, 0, _varint(5))  # trainer_spec as a varint
    elif mutate == "overlong":
        data = data + _field(3, 2, b"")[:-1] + b"\x7f"
    elif mutate == "no_unk":
        data = _piece("a") + _piece("b")
    elif mutate == "empty_piece":
        data = data + _field(1, 2, _field(2, 5, b"\0\0\0\0"))
    p = tmp_path / "bad.model"
    p.write_bytes(data)
    with pytest.raises(SourceError) as e:
        tokmap.export(p, tmp_path / "bad.mtok", fmt="sentencepiece")
    assert "bad.model" in str(e.value)


def test_unsupported_model_type(tmp_path):
    p = tmp_path / "w.model"
    p.write_bytes(_minimal(model_type=3))
    with pytest.raises(UnsupportedError):
        tokmap.export(p, tmp_path / "w.mtok")


def test_damaged_charsmap_section(testdata, tmp_path):
    """A hostile charsmap (trie units pointing anywhere) never crashes or hangs an encode: it
    gives some ids or a FormatError naming the file."""
    from tokmap import mtok
    from tokmap.runtime.reader import MtokFile

    src = _source(testdata, "botchan_en_unigram_1000")
    dst = tmp_path / "u.mtok"
    tokmap.export(src, dst)
    sec = MtokFile(dst).sections[mtok.SECTION_SPM_CHARSMAP]
    off, length = sec[1], sec[2]
    rng = random.Random(5)
    data = bytearray(dst.read_bytes())
    for k in range(off + 4, off + length, 4):
        data[k : k + 4] = rng.getrandbits(32).to_bytes(4, "little")
    dst.write_bytes(bytes(data))
    tok = tokmap.load(dst)
    for text in ["Hello ﬁne ｆｕｌｌ", "日本語 ①", "x" * 100]:
        try:
            ids = tok.encode(text)
        except tokmap.FormatError as e:
            assert "u.mtok" in str(e)
        else:
            assert all(isinstance(i, int) for i in ids)


@pytest.mark.parametrize("name", MODELS)
def test_hypothesis_text(name, pair):
    """Arbitrary Unicode (any code point but surrogates) encodes and decodes as sentencepiece does."""
    hyp = pytest.importorskip("hypothesis")
    st = pytest.importorskip("hypothesis.strategies")
    sp, tok = pair(name)

    @hyp.settings(max_examples=300, deadline=None, derandomize=True)
    @hyp.given(st.text(max_size=40))
    def check(text):
        assert not _compare(sp, tok, [text])

    check()


TRAINED = {
    "user_defined_unigram": dict(model_type="unigram", user_defined_symbols=["<sep>", "foo bar", "▁the", "@@"],
                                 control_symbols=["<ctl>"]),
    "user_defined_bpe_bytes": dict(model_type="bpe", user_defined_symbols=["<sep>", "@@"], byte_fallback=True),
    "suffix_unigram_nfkc_cf": dict(model_type="unigram", treat_whitespace_as_suffix=True,
                                   remove_extra_whitespaces=False, normalization_rule_name="nfkc_cf"),
    "suffix_bpe_no_dummy": dict(model_type="bpe", treat_whitespace_as_suffix=True, add_dummy_prefix=False),
}


@pytest.mark.parametrize("kind", sorted(TRAINED))
def test_trained_options(kind, corpus, tmp_path, monkeypatch):
    """Options the three real models do not use (user-defined symbols, byte fallback in BPE,
    whitespace as suffix, no dummy prefix, kept extra spaces, nfkc_cf), on models trained here;
    BPE also with every run merged by the numpy batch over the pair table (spm_chunks.py)."""
    spm = pytest.importorskip("sentencepiece")
    src = tmp_path / "train.txt"
    src.write_text(corpus("en"), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(src), model_prefix=str(tmp_path / kind), vocab_size=600,
                                   minloglevel=2, num_threads=1, **TRAINED[kind])
    model = tmp_path / f"{kind}.model"
    tokmap.export(model, tmp_path / f"{kind}.mtok")
    sp, tok = spm.SentencePieceProcessor(model_file=str(model)), tokmap.load(tmp_path / f"{kind}.mtok")
    texts = ["<sep>foo bar<sep>", "the the  thethe", "@@x@@", "<ctl> <s> </s> <unk>", " foo bar ", "  a  b  "]
    texts += generated(2_000, ["<sep>", "@@", "<ctl>"], seed=8) + _extra_strings(500)
    texts += [ln for ln in corpus("pride").split("\n")[:1500] if ln]
    texts += [corpus("multi")[:300_000]]  # (long: the normalizer learns which chars stay as they are)
    bad = _compare(sp, tok, texts)
    assert not bad, f"{kind}: {len(bad)} of {len(texts)} differ, first: {bad[:3]}"
    if TRAINED[kind]["model_type"] == "bpe":
        batched = _force_numpy_batches(monkeypatch)
        tok = tokmap.load(tmp_path / f"{kind}.mtok")
        bad = _compare(sp, tok, texts + [corpus("en")])
        assert not bad, f"{kind}, batched: {len(bad)} of {len(texts)} differ, first: {bad[:3]}"
        # (whitespace as suffix: pieces hold "x▁", the text is not cut into runs, and BPE runs whole)
        assert any(g is not None for got in batched for g in got) == tok.model.cut
    else:
        runs = _force_unigram_batches(monkeypatch)
        tok = tokmap.load(tmp_path / f"{kind}.mtok")
        bad = _compare(sp, tok, texts + [corpus("en")])
        assert not bad, f"{kind}, batched: {len(bad)} of {len(texts)} differ, first: {bad[:3]}"
        assert bool(runs) == tok.model.cut  # (whitespace as suffix: the text is not cut into runs)
    rng = random.Random(2)
    for _ in range(300):
        ids = [rng.randrange(sp.get_piece_size()) for _ in range(rng.randint(0, 10))]
        assert tok.decode(ids) == sp.decode(ids), ids


# -- the word caches and the inert-text fast path --------------------------------------------
def _piece_strings(sp, n: int, seed: int) -> list[str]:
    """Texts made of the model's own pieces ("▁" as a space), glued or spaced, so that runs
    between cuts recur in many contexts and long pieces meet at every boundary."""
    rng = random.Random(seed)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
              if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i))]
    out = []
    for _ in range(n):
        k = rng.randint(1, 12)
        glue = rng.choice(["", "", " ", "  "])
        s = glue.join(rng.choice(pieces) for _ in range(k)).replace("\u2581", " ")
        out.append(s if rng.random() < 0.8 else s.replace(" ", ""))
    return out


@pytest.mark.parametrize("name", MODELS)
def test_runs_from_pieces(name, pair):
    """Cutting before "▁" and remembering each run's ids (BPE outright, Unigram when its choices
    survive float32 rounding) gives sentencepiece's ids: strings built from the vocabulary, each
    encoded twice (the second time from the cache, in a context other than where it was filled),
    and long texts of them (Unigram: past the scores where the lattice rebases)."""
    sp, tok = pair(name)
    texts = _piece_strings(sp, 3_000, seed=17)
    assert not _compare(sp, tok, texts)
    assert not _compare(sp, tok, texts[::-1])
    longs = [" ".join(texts[k:k + n]) for k, n in ((0, 500), (500, 1500), (100, 2900), (7, 40))]
    assert not _compare(sp, tok, longs + [t.replace(" ", "") for t in longs])


def test_unigram_near_tie(tmp_path):
    """A Unigram run whose best path wins by less than float32 rounding at the score the text has
    reached before it: its remembered ids must not be reused there. With these scores "▁b" beats
    "▁" + "b" by 9e-8 in exact arithmetic, but after three "▁c" (score -300) sentencepiece's
    float32 sums pick "▁" + "b"."""
    spm = pytest.importorskip("sentencepiece")
    b, c, a = -0.35529205203056335, -1.710124135017395, -2.065416097640991
    blob = (_piece("<unk>", 0, 2) + _piece("<s>", 0, 3) + _piece("</s>", 0, 3) + _piece("\u2581", b)
            + _piece("b", c) + _piece("\u2581b", a) + _piece("\u2581c", -100.0) + _piece("\u2581\u2581", -0.1)
            + _field(2, 2, _field(3, 0, _varint(1))))
    (tmp_path / "t.model").write_bytes(blob)
    tokmap.export(tmp_path / "t.model", tmp_path / "t.mtok")
    sp, tok = spm.SentencePieceProcessor(model_file=str(tmp_path / "t.model")), tokmap.load(tmp_path / "t.mtok")
    texts = ["b", "c b", "c c b", "c c c b", "c c c c c b", "c c c b c b", "b c c c b"] * 2
    # (and "\u2581" typed in the text: runs the short path's str.split must not be given)
    texts += ["c \u2581b", "\u2581\u2581c c", "c c\u2581", "c\u2581\u2581b", "c \u2581\u2581 b", "\u2581"] * 2
    assert sp.encode("c c c b")[-2:] == [3, 4] and sp.encode("b") == [5]  # the case is a real one
    assert not _compare(sp, tok, texts)
    ids, slack, _path = tok.model.word_cache["\u2581b"]
    assert ids == (5,) and slack < tok.model._rounding(len("\u2581c\u2581c\u2581c\u2581b"))
    # A short text's runs give their ids straight from _sure only when each holds at any short
    # length: "▁c" does (the repeated texts took it from there), "▁b" never does.
    assert "b" not in tok.model._sure and tok.model._sure["c"] == (6,)
    # Long texts: the lattice rebases its scores past 1e5 (every 1,000 "▁c"), at a cut; X is
    # followed run by run (_unigram_follow), and "▁b" flips wherever the float32 sums say.
    rng = random.Random(4)
    longs = ["c " * k + "b" for k in (999, 1000, 1001, 1003, 1999, 2000, 2001, 3500)]
    longs += [" ".join(rng.choice(["c", "c", "c", "b", "cb", "bc", "bb"]) for _ in range(n)) for n in (3000, 9000)]
    tok = tokmap.load(tmp_path / "t.mtok")
    assert not _compare(sp, tok, longs + texts)


@pytest.mark.parametrize("model_type", [1, 2])  # unigram, bpe
def test_short_runs_keep_spaces(tmp_path, model_type):
    """Without remove_extra_whitespaces a text may end in "\u2581" or hold "\u2581\u2581": the short
    path's str.split gives an empty word there, which no _sure key matches, so such texts take the
    general way and keep sentencepiece's runs ("\u2581\u2581" + "b" is one run, as is a final "\u2581")."""
    spm = pytest.importorskip("sentencepiece")
    blob = (_piece("<unk>", 0, 2) + _piece("<s>", 0, 3) + _piece("</s>", 0, 3) + _piece("\u2581", -3.0)
            + _piece("b", -1.0) + _piece("\u2581b", -1.0) + _piece("\u2581c", -1.0) + _piece("\u2581\u2581", -0.5)
            + _piece("\u2581\u2581b", -9.0) + _piece("c", -5.0)
            + _field(2, 2, _field(3, 0, _varint(model_type)))  # (trainer_spec: the model type)
            + _field(3, 2, _field(3, 0, _varint(1)) + _field(4, 0, _varint(0))))  # (normalizer_spec)
    (tmp_path / "t.model").write_bytes(blob)
    tokmap.export(tmp_path / "t.model", tmp_path / "t.mtok")
    sp, tok = spm.SentencePieceProcessor(model_file=str(tmp_path / "t.model")), tokmap.load(tmp_path / "t.mtok")
    texts = ["c ", "b c ", "c  b", " b", "c   c", "b  ", "c b", "b", "bc c", "cb  b"] * 3
    if model_type == 1:
        assert sp.encode("c  b") == [6, 7, 4] and sp.encode("c ") == [6, 3]  # (runs "▁c", "▁▁b"; "▁c", "▁")
    assert not _compare(sp, tok, texts)
    assert "" not in tok.model._sure and tuple(tok.model._sure["c"]) == (6,)


def _byte_loop(nz, s: str) -> str:
    """The normalizer's byte loop over s, walking the charsmap at every position (no inert runs)."""
    plain, nz.plain_run = nz.plain_run, None
    try:
        return nz.normalize_bytes(s.encode("utf-8", "surrogatepass")).decode("utf-8")
    finally:
        nz.plain_run = plain


@pytest.mark.parametrize("name", MODELS)
def test_inert_characters(name, pair):
    """The characters the normalizer proves inert (copied through without a trie walk) are: the
    fast paths agree with the plain byte loop, which walks the charsmap at every position, on each
    code point of a wide sample followed by each character that continues some key."""
    _sp, tok = pair(name)
    tok.encode("x")
    nz = tok.pipeline.normalizers[0]
    nz._build_mixed()  # the byte loop below must run without its inert-run regex
    followers = sorted({"", " ", "a", "A", "\u0300", "\u0301", "\u0308", "\u0338", "\u3099", "\u309a", "\uff9e",
                        "\u2581", "[", "\ud800"} | {chr(b) for b in range(0x20, 0x7F)})
    cps = list(range(0x80)) + list(range(0x80, 0x3100)) + list(range(0x3100, 0x110000, 97))
    texts = [chr(cp) + f for cp in cps if not 0xD800 <= cp < 0xE000 for f in followers[:: 1 if cp < 0x80 else 9]]

    bad = [s for s in texts if nz.normalize(s)[0] != _byte_loop(nz, s)]
    assert not bad, f"{len(bad)} differ, first: {bad[:5]!r}"


def _context_texts(seed: int, n: int) -> list[str]:
    """Text where charsmap keys span several characters: kana with combining voiced marks,
    half-width katakana with their marks, Latin letters with combining accents (NFD), Hangul
    jamo, among plain text, spaces and other marks, at every position (ends included)."""
    rng = random.Random(seed)
    bits = ["\u304b", "\u3099", "\u309a", "\u30cf", "\u3046", "\uff76", "\uff9e", "\uff9f", "e", "a", "\u0301",
            "\u0300", "\u0308", "\u0327", "\u1100", "\u1161", "\u11a8", "\u3000", " ", "  ", "x", "\u732b",
            "\u3002", "\uff21", "\u2460", "\u00e9", "\u0338", "=", "<", "A", "\u212b", "\u1e9b", "\u0323"]
    return ["".join(rng.choice(bits) for _ in range(rng.randint(1, 14))) for _ in range(n)]


@pytest.mark.parametrize("name", MODELS)
def test_keys_across_characters(name, pair):
    """Where a charsmap key goes on from a character into the next (NormalizePrefix's longest
    match over "か" + U+3099, "e" + U+0301), the str path (normalize: _alone and _key_at) makes
    what the byte loop makes, and the ids are sentencepiece's."""
    sp, tok = pair(name)
    tok.encode("x")
    nz = tok.pipeline.normalizers[0]
    texts = _context_texts(31, 4000) + ["\u304b\u3099" * 300 + "\u3099", "e\u0301" * 500, "\u304b" * 5 + "e"]
    nz._build_mixed()
    byte_loop = partial(_byte_loop, nz)

    bad = [s for s in texts if nz.normalize(s)[0] != byte_loop(s)]
    assert not bad, f"{len(bad)} differ, first: {bad[:5]!r}"
    assert not _compare(sp, tok, texts[:1500])


def _user_symbol_texts(symbols: list[str], seed: int, n: int) -> list[str]:
    """Text around user-defined symbols: whole ones, cut ones, doubled brackets and first
    characters, spaces (single, repeated, leading, trailing) and ordinary words, in every order."""
    rng = random.Random(seed)
    bits = symbols + [s[:k] for s in symbols for k in (1, 2, len(s) - 1) if 0 < k < len(s)]
    bits += [" ", "  ", "x", "word", "\u732b", "\u2581", "]", "[[", "é", "\n", "0"]
    return ["".join(rng.choice(bits) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def _no_byte_loop(monkeypatch, nz):
    """Make the normalizer's byte loop raise: what follows must take the str path."""
    def refuse(data):
        raise AssertionError(f"byte loop on {bytes(data[:40])!r}")

    monkeypatch.setattr(nz, "normalize_bytes", refuse)


def test_user_symbols_on_the_str_path(pair, corpus, monkeypatch):
    """A character a user-defined symbol may start with ("[" for Mistral's "[REFERENCE_DOC_n]")
    is told on the str path where it stands: the longest symbol there is kept, else the char
    is what the charsmap makes of it. One such character had sent the whole text to the byte
    loop (multi.txt's first 1M chars: 1.2 s of a 1.5 s call). The str path makes what the byte
    loop makes, the byte loop is never taken, and the ids are sentencepiece's."""
    sp, tok = pair("mistral-v3")
    tok = tokmap.load(tok.path)
    tok.encode("x")
    nz = tok.pipeline.normalizers[0]
    nz._build_mixed()
    symbols = sorted(u.decode("utf-8") for u in nz.user)
    assert symbols and all(s.startswith("[") for s in symbols)
    texts = _user_symbol_texts(symbols, 17, 3000) + ["[" * 40, "[REFERENCE_DOC_1] [REFERENCE_DOC_10]" * 50]
    want = [_byte_loop(nz, t) for t in texts]
    _no_byte_loop(monkeypatch, nz)
    bad = [(t, w) for t, w in zip(texts, want) if nz.normalize(t)[0] != w]
    assert not bad, f"{len(bad)} differ, first: {bad[:3]!r}"
    doc = corpus("code")[:200_000] + "".join(texts[:300])
    assert "[" in doc
    assert tok.encode(doc, add_special_tokens=False) == sp.encode(doc)
    assert not _compare(sp, tok, texts[:1500])


@pytest.mark.parametrize("name", MODELS)
def test_space_like_characters(name, pair, monkeypatch):
    """Characters the charsmap makes a plain space wherever they stand (nmt_nfkc's newline, tab,
    ideographic space) are matched where spaces are, inside runs and in runs of spaces, and become
    spaces there: the str path makes what the byte loop makes on whitespace-heavy text (every mix
    of them with spaces, words, marks, keys into the next char), and the ids are sentencepiece's."""
    sp, tok = pair(name)
    tok = tokmap.load(tok.path)
    tok.encode("x")
    nz = tok.pipeline.normalizers[0]
    nz._build_mixed()
    rng = random.Random(41)
    ws = list(spm_normalizer.SPACE_LIKE) + [" ", "  ", "\r\n", "\n\n"]
    words = ["x", "word", "\u732b", "e\u0301", "\u304b\u3099", "[", "\u2581", ".", "\uff76\uff9e", "A"]
    texts = ["".join(rng.choice(ws if rng.random() < 0.5 else words) for _ in range(rng.randint(1, 16)))
             for _ in range(4000)]
    texts.append("".join(rng.choice(ws + words) for _ in range(20000)))
    want = [_byte_loop(nz, t) for t in texts]
    _no_byte_loop(monkeypatch, nz)
    bad = [(t, w) for t, w in zip(texts, want) if nz.normalize(t)[0] != w]
    assert not bad, f"{len(bad)} differ, first: {bad[:3]!r}"
    if nz.charsmap is not None:  # (Mistral has none: no char becomes a space)
        like = [c for c in spm_normalizer.SPACE_LIKE if nz._space_like.fullmatch(c)]
        assert like and all(nz._alone(c) == " " for c in like)
    assert not _compare(sp, tok, texts[:1500] + texts[-1:])


@pytest.mark.parametrize("name", MODELS)
def test_inert_runs_are_one_class(name, pair):
    """A run of characters inert whatever follows is matched by one character class (sre's tight
    loop), never by an alternation tried at each char: str_parts' ranges hold exactly the free
    ones (with the learned characters, without the space), and the pieces pattern repeats their
    class alone or possessively ahead of the lookahead alternatives; for a text where no char is
    followed by one that spoils it, the class takes those chars too."""
    import re

    from tokmap.runtime.spm_normalizer import _merge, _str_set

    _sp, tok = pair(name)
    tok = tokmap.load(tok.path)
    tok.encode("x")
    nz = tok.pipeline.normalizers[0]
    nz._build_mixed()
    extra = {0x3042, 0x0416}
    ranges, groups = nz._inert.str_parts(" ", nz._free, extra)
    member = re.compile(_str_set(ranges)).fullmatch
    for cp in list(range(0x3100)) + list(range(0x3100, 0x110000, 61)):
        if 0xD800 <= cp < 0xE000:
            continue
        inside = cp != 0x20 and (cp in extra or any(a <= cp <= z for a, z in nz._free))
        assert (member(chr(cp)) is not None) == inside, hex(cp)
    ranges, groups = nz._inert.str_parts(" ", nz._free, nz._plain_chars)  # (the pattern's own)
    cls = _str_set(ranges)
    assert ("(?:" + cls + "++|" if groups else cls + "++") in nz._piece_texts[False]
    assert bool(groups) == bool(nz._inert.cond) == (nz._spoiled is not None)
    if groups:
        spoiled = "e\u0301" if name != "mistral-v3" else None
        assert nz._spoiled.search("plain English text, no marks") is None
        assert spoiled is None or nz._spoiled.search("caf" + spoiled) is not None
        plain = _str_set(_merge(ranges + [(c, c) for chars, _s in groups for c in chars])) + "++"
        plain_text = nz._piece_texts[True]
        assert plain in plain_text and "(?!" not in plain_text


@pytest.mark.parametrize("name", MODELS)
def test_learned_inert_characters(name, pair, corpus):
    """A long text with many characters Inert's analysis cannot prove inert (Cyrillic, kana, and
    those a key goes on from) teaches the normalizer those that stay as they are (_learn); its
    runs then take them, with spaces before and between (collapsed, or kept, as the whitespace
    steps say). The str path makes what the byte loop makes, before and after, and the ids
    are sentencepiece's."""
    sp, tok = pair(name)
    tok = tokmap.load(tok.path)
    tok.encode("x")
    nz = tok.pipeline.normalizers[0]
    rng = random.Random(12)
    words = [w for w in corpus("multi").split() if not w.isascii()][:20000] + _context_texts(5, 3000)
    text = "".join(rng.choice(words) + rng.choice([" ", " ", "  ", "   ", "", "\n", " \u3000 "]) for _ in range(30000))
    assert len(text) >= spm_normalizer.LEARN_TEXT
    nz._build_mixed()
    byte_loop = partial(_byte_loop, nz)

    want = byte_loop(text)
    assert nz.normalize(text)[0] == want
    if nz.charsmap is not None:  # (mistral-v3 has none: every char is inert to begin with)
        assert nz._learned >= spm_normalizer.LEARN_MIN
    assert nz.normalize(text)[0] == want
    shorts = [text[a:a + 40] for a in range(0, 60000, 37)] + _context_texts(6, 1000)
    bad = [s for s in shorts if nz.normalize(s)[0] != byte_loop(s)]
    assert not bad, f"{len(bad)} differ, first: {bad[:5]!r}"
    assert tok.encode(text, add_special_tokens=False) == sp.encode(text)
    assert not _compare(sp, tok, shorts[:800])


SPM_RUNS = ["a" * 5000, " " * 5000, "1" * 3000, "中" * 2000, "." * 4000, "x" + "a" * 5000, "a" * 5000 + "b",
            "xyz" + " " * 4000 + "!?", "a" * 512, "a" * 513, "ab" + "a" * 2000, "\u00e9" * 3000, "Q" * 17 + "a" * 3000,
            "a" * 3000 + "Q" * 20, "hello " + "-" * 2500 + " world", "\U0001F600" + "a" * 3000, "\U0001F600" * 2000,
            "a" * 1000 + " " + "b" * 1000]


@pytest.mark.parametrize("name", ["mistral-v3", "botchan_en_bpe_1000"])
def test_bpe_runs_as_chunks(name, pair, monkeypatch):
    """Long runs of one char (a few other chars at either end allowed) merge as chunks in the
    phase of the piece they repeat, each distinct chunk once (SentencePiece._bpe_run): ids and
    text as sentencepiece gives, whether the chunks glue or the run falls back to the heap, and
    they do glue for the plain runs (10^6 "a" took 4 s before, 21 ms so)."""
    from tokmap.runtime.models import spm as spm_model

    sp, _tok = pair(name)
    glued = []
    bpe_run = spm_model.SentencePiece._bpe_run
    monkeypatch.setattr(spm_model.SentencePiece, "_bpe_run", lambda self, w: glued.append(r := bpe_run(self, w)) or r)
    for text in SPM_RUNS:
        glued.clear()
        tok = tokmap.load(_tok.path)  # (fresh: no run cached)
        ids = tok.encode(text, add_special_tokens=False)
        assert ids == sp.encode(text), (name, text[:20])
        assert tok.decode(ids) == sp.decode(ids)
        # (botchan_en_bpe_1000 removes extra whitespace: its spaces leave no run)
        if text in ("a" * 5000, "x" + "a" * 5000) or (text == " " * 5000 and name == "mistral-v3"):
            assert glued and all(g is not None for g in glued), (name, text[:3], glued)


def _long_runs_of_chars(seed: int = 5) -> list[str]:
    """Runs of 2,000-9,000 chars with no space inside that are not one char repeated."""
    rng = random.Random(seed)

    def pick(alphabet, n):
        return "".join(rng.choice(alphabet) for _ in range(n))

    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    cjk = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    return [pick(letters, 5000), pick(letters[:26], 4000), pick("0123456789", 3000), pick(cjk, 2500),
            pick(letters + "0123456789+/", 9000), pick(letters[:26] + "\u00e9\u00f1\u00fc", 3000),
            pick(letters[:26] + "\U0001F600\U0001F680", 3000), "abc" * 1000, "ab" * 1500, "x=1;y=2;" * 400,
            "  " + pick(letters, 3000), "x " + pick(letters, 2500) + " " + pick(cjk, 2100) + "!",
            pick("abcdefghij", 2048), pick("ab", 4000)]


@pytest.mark.parametrize("name", ["mistral-v3", "botchan_en_bpe_1000"])
def test_bpe_long_runs_as_numpy_chunks(name, pair, monkeypatch):
    """Long runs that are not one char repeated merge as glued chunks by the numpy batch merge over
    the pair table derived from the pieces (spm_chunks.py): ids and text as sentencepiece gives
    them (unknown chars: byte fallback in mistral-v3, collapsed unks in botchan), and the chunks
    did glue for the random ones (10^6 random letters: 1.9 s by the heap, ~0.2 s so)."""
    from tokmap.runtime.models import spm as spm_model
    from tokmap.runtime.models import spm_chunks

    sp, _tok = pair(name)
    monkeypatch.setattr(spm_model, "TABLE_CHARS_PER_PIECE", 0)  # the table at the first long run
    glued = []
    merge_run = spm_chunks.merge_run
    monkeypatch.setattr(spm_chunks, "merge_run", lambda *a: glued.append(r := merge_run(*a)) or r)
    texts = _long_runs_of_chars()
    tok = tokmap.load(_tok.path)
    assert not _compare(sp, tok, texts)
    assert tok.model._pairs, "no pair table"
    assert sum(g is not None for g in glued) >= 8, [None if g is None else len(g) for g in glued]
    for text in texts[:5]:  # (fresh: nothing cached; the runs of letters, digits, CJK, base64)
        glued.clear()
        tok = tokmap.load(_tok.path)
        assert tok.encode(text, add_special_tokens=False) == sp.encode(text)
        assert glued and glued[-1] is not None, (name, text[:10])


def test_bpe_pair_table_is_built_when_it_pays(pair):
    """The pair table waits until the heap would have merged TABLE_CHARS_PER_PIECE chars a piece
    (one long run does not pay for it), then serves the runs after, with the same ids."""
    from tokmap.runtime.models import spm as spm_model

    sp, _tok = pair("mistral-v3")
    tok = tokmap.load(_tok.path)
    text = _long_runs_of_chars(seed=8)[0][:spm_model.CHUNK_CHARS + 10]
    tok.encode("x")
    n = -(-spm_model.TABLE_CHARS_PER_PIECE * len(tok.model.pieces) // (len(text) + 1))  # (+ its "▁")
    for k in range(n + 1):
        assert tok.encode(text[k:] + text[:k], add_special_tokens=False) == sp.encode(text[k:] + text[:k])
        assert (tok.model._pairs is None) == (k < n - 1), k


def test_bpe_pair_table_ties(tmp_path, monkeypatch):
    """Two results of one score ("ab" and "ba", -1) need leftmost-first across them, which ranks
    cannot give: the table lists them as ties and a run holding either goes to the heap, with
    sentencepiece's ids ("bab": "ba" + "b", where ranking "ab" first would give "b" + "ab").
    A piece holding a char that is no piece of its own gives no table at all."""
    spm = pytest.importorskip("sentencepiece")
    from tokmap.runtime.models import spm as spm_model
    from tokmap.runtime.models import spm_chunks

    monkeypatch.setattr(spm_model, "TABLE_CHARS_PER_PIECE", 0)
    glued = []
    merge_run = spm_chunks.merge_run
    monkeypatch.setattr(spm_chunks, "merge_run", lambda *a: glued.append(r := merge_run(*a)) or r)
    tail = _field(2, 2, _field(3, 0, _varint(2)))
    base = _piece("<unk>", 0, 2) + _piece("<s>", 0, 3) + _piece("</s>", 0, 3) + _piece("a", -3) + _piece("b", -4)
    (tmp_path / "t.model").write_bytes(base + _piece("ab", -1) + _piece("ba", -1) + _piece("c", -5)
                                       + _piece("ca", -2) + tail)
    tokmap.export(tmp_path / "t.model", tmp_path / "t.mtok")
    sp, tok = spm.SentencePieceProcessor(model_file=str(tmp_path / "t.model")), tokmap.load(tmp_path / "t.mtok")
    tok.encode("a")
    table = spm_chunks.pair_table(tok.model.pieces, tok.model.scores)
    assert sorted(table.ties) == ["ab", "ba"]
    rng = random.Random(3)
    texts = ["bab", "".join(rng.choice("ab") for _ in range(3000)), "".join(rng.choice("ac") for _ in range(3000)),
             "".join(rng.choice("abc") for _ in range(5000)) * 8]
    assert sp.encode("bab")[-2:] == [6, 4]  # ("▁" is unknown here)
    assert not _compare(sp, tok, texts)
    assert [g is not None for g in glued] == [False, True, False]  # (only the run without a tie)
    assert spm_chunks.pair_table({"a": 1, "xa": 2}, [0.0, -1.0, -2.0]) is None


@pytest.mark.parametrize("name", ["mistral-v3", "botchan_en_bpe_1000"])
def test_pair_table_splits_by_hash(name, pair, monkeypatch):
    """The pair table's splits (every piece cut into two pieces) found by numpy hashes are those a
    dict lookup of each half finds: on the real models' pieces, and on pieces whose hashes are
    made to collide (multiplier 1: a hash is the sum of the code points), where a substring that
    is an anagram of a piece is refused char by char ("cba" -> "c" + "ba", "ba" not "ab"), and
    two pieces of one hash send the whole table to the dict lookups."""
    from tokmap.runtime.models import spm_chunks

    _sp, tok = pair(name)
    tok.encode("x")
    as_set = (lambda got: set(zip(*(a.tolist() for a in got))))  # noqa: E731
    want = as_set(spm_chunks._splits_by_dict(tok.model.pieces))
    assert len(want) > 1000 and as_set(spm_chunks._splits(tok.model.pieces)) == want
    monkeypatch.setattr(spm_chunks, "_HASH_B", 1)
    pieces = {p: i for i, p in enumerate(["a", "b", "c", "d", "ab", "bc", "cba", "abcd", "dcb", "db"])}
    got = spm_chunks._splits(pieces)
    assert got is not None and as_set(got) == as_set(spm_chunks._splits_by_dict(pieces))
    assert as_set(got) == {(0, 1, 4), (1, 2, 5), (3, 1, 9)}  # ("cb", "ba", "bcd", "abc" are no pieces)
    assert spm_chunks._splits({"ab": 0, "ba": 1, "a": 2, "b": 3}) is None


def _force_unigram_batches(monkeypatch) -> list:
    """Every call's new Unigram runs through spm_unigram.words; the list of the runs it took."""
    from tokmap.runtime.models import spm as spm_model
    from tokmap.runtime.models import spm_unigram

    monkeypatch.setattr(spm_model, "BATCH_RUNS", 1)
    took = []
    words = spm_unigram.words
    monkeypatch.setattr(spm_unigram, "words", lambda m, lat, runs: took.extend(runs) or words(m, lat, runs))
    return took


def test_unigram_runs_in_numpy_batches(pair, corpus, monkeypatch):
    """spm_unigram.words gives each run what _unigram_word gives it (ids, slack to the last bit,
    node scores): runs made of pieces, of unknown chars and of random text; and the ids as
    sentencepiece gives them with every call's runs decoded that way."""
    from tokmap.runtime.models import spm_unigram

    sp, tok = pair("botchan_en_unigram_1000")
    tok.encode("x")
    m = tok.model
    rng = random.Random(12)
    runs = ["\u2581" + t.replace(" ", "\u2581") for t in _piece_strings(sp, 2_000, seed=3)]
    runs += ["".join(rng.choice("ab\u2581xyzQ7é日本<>") for _ in range(rng.randint(1, 30))) for _ in range(2_000)]
    runs += ["\u2581" + w for w in corpus("pride").split()[:3_000]] + ["\u2581" * k for k in range(1, 20)]
    runs = [r for r in dict.fromkeys(runs) if len(r) <= spm_unigram.DP_CHARS]
    got = spm_unigram.words(m, spm_unigram.lattice(m), runs)
    bad = [(r, g, w) for r, g, w in zip(runs, got, map(m._unigram_word, runs)) if g != w]
    assert not bad, f"{len(bad)} of {len(runs)} differ, first: {bad[:2]}"
    took = _force_unigram_batches(monkeypatch)
    tok = tokmap.load(tok.path)
    texts = _piece_strings(sp, 2_000, seed=19) + [corpus("en"), corpus("code")[:200_000], corpus("pride")]
    assert not _compare(sp, tok, texts)
    assert len(took) > 10_000


def test_unigram_batch_exact_ties(tmp_path, monkeypatch):
    """Scores whose sums tie exactly ("ab" = "a" + "b", "abc" = "ab" + "c" = "a" + "bc"): the batch
    keeps the first best as the scalar loop does (slack 0), and the ids stay sentencepiece's."""
    spm = pytest.importorskip("sentencepiece")
    from tokmap.runtime.models import spm_unigram

    blob = (_piece("<unk>", 0, 2) + _piece("<s>", 0, 3) + _piece("</s>", 0, 3) + _piece("\u2581", -1.0)
            + _piece("a", -1.0) + _piece("b", -1.0) + _piece("c", -1.0) + _piece("ab", -2.0) + _piece("bc", -2.0)
            + _piece("abc", -3.0) + _piece("\u2581a", -2.0) + _piece("ca", -2.0) + _piece("cab", -3.0)
            + _field(2, 2, _field(3, 0, _varint(1))))
    (tmp_path / "t.model").write_bytes(blob)
    tokmap.export(tmp_path / "t.model", tmp_path / "t.mtok")
    sp, tok = spm.SentencePieceProcessor(model_file=str(tmp_path / "t.model")), tokmap.load(tmp_path / "t.mtok")
    tok.encode("a")
    m = tok.model
    rng = random.Random(6)
    runs = list(dict.fromkeys("\u2581" + "".join(rng.choice("abcx") for _ in range(rng.randint(0, 14)))
                              for _ in range(3_000)))
    got = spm_unigram.words(m, spm_unigram.lattice(m), runs)
    assert got == list(map(m._unigram_word, runs))
    assert sum(g[1] == 0 for g in got) > 100  # (exact ties: slack 0)
    _force_unigram_batches(monkeypatch)
    tok = tokmap.load(tmp_path / "t.mtok")
    assert not _compare(sp, tok, [r[1:].replace("\u2581", " ") for r in runs] + [" ".join(r[1:] for r in runs)])


def _force_numpy_batches(monkeypatch) -> list:
    """Every BPE run up to BATCH_WORD_CHARS through spm_chunks.merge_words, the pair table built
    at once; the list of what each merge_words call returned."""
    from tokmap.runtime.models import spm as spm_model
    from tokmap.runtime.models import spm_chunks

    monkeypatch.setattr(spm_model, "TABLE_CHARS_PER_PIECE", 0)
    monkeypatch.setattr(spm_model, "BATCH_CHARS", 1)
    batched = []
    merge_words = spm_chunks.merge_words
    monkeypatch.setattr(spm_chunks, "merge_words", lambda *a: batched.append(r := merge_words(*a)) or r)
    return batched


@pytest.mark.parametrize("name", ["mistral-v3", "botchan_en_bpe_1000"])
def test_bpe_runs_in_numpy_batches(name, pair, corpus, monkeypatch):
    """A call's distinct new runs merge in one numpy batch over the pair table (spm_chunks.
    merge_words; mistral-v3's tied results, runs of 2-16 U+2581, merge after it, run by run):
    ids and text as sentencepiece gives them, text by text and over whole documents (code.txt,
    cold: 1.5 s -> 0.5 s; sentencepiece 0.36 s)."""
    sp, _tok = pair(name)
    batched = _force_numpy_batches(monkeypatch)
    tok = tokmap.load(_tok.path)
    texts = _piece_strings(sp, 2_000, seed=23) + generated(1_000, [], seed=24) + _extra_strings(300, seed=25)
    texts += [ln for c in ("code", "multi") for ln in corpus(c).split("\n")[:400] if ln]
    texts += [" " * k + w for k in range(1, 40) for w in ("x", "return", "", "\u4e2d", " }")]
    texts += ["a" + " " * k + "b" + " " * j for k in range(1, 25) for j in (0, 1, 3, 17)]
    assert not _compare(sp, tok, texts)
    tok = tokmap.load(_tok.path)
    assert not _compare(sp, tok, [corpus("code"), corpus("en")])
    got = [g for b in batched for g in b]
    assert sum(g is not None for g in got) > 10_000, len(got)
    if name == "mistral-v3":
        assert tok.model._pairs.block is not None and not tok.model._pairs.ties
        assert None not in got  # (the indented lines' runs too)


def test_an_empty_piece_is_refused(tmp_path):
    """A .mtok whose piece tables hold an empty piece (the exporter refuses one, as SentencePiece
    does) fails the first encode with a FormatError naming token_offsets and the entry that ends
    the empty piece. An empty user-defined symbol had made the symbol split loop forever."""
    from test_hostile_files import Container, check_error, watchdog, with_section, write

    from tokmap import mtok
    from tokmap.runtime.reader import MtokFile

    src = tmp_path / "m.model"
    src.write_bytes(_minimal()[:-len(_field(2, 2, _field(3, 0, _varint(2))))] + _piece("u", -5, 4)
                    + _field(2, 2, _field(3, 0, _varint(2))))
    good = tmp_path / "m.mtok"
    tokmap.export(src, good)
    assert tokmap.load(good).encode("uab", add_special_tokens=False)  # (the user symbol "u" is id 5)
    off = list(struct.unpack("<7I", Container(good.read_bytes()).sections()[mtok.SECTION_TOKEN_OFFSETS][1]))
    off[5] = off[6]  # piece 5 ("u") empty, piece 4 ("ab") now "abu"
    bad = write(tmp_path, with_section(good, mtok.SECTION_TOKEN_OFFSETS, struct.pack("<7I", *off)))
    tok = tokmap.load(bad)
    with watchdog(10), pytest.raises(tokmap.FormatError) as ei:
        tok.encode("uab", add_special_tokens=False)
    check_error(ei.value, bad, "token_offsets", MtokFile(bad).sections[mtok.SECTION_TOKEN_OFFSETS][1] + 4 * 6,
                "piece 5 is empty")
