"""Texts cut at the spaces no piece crosses (exporter/regex_compile.space_cut_unsafe,
runtime/spacecut.py), against the references on the real files.

The exporter proves for each split pattern after which chars a text may be cut before a space;
the runtime then encodes a text met before by chunks between such spaces, each distinct chunk
split once and remembered. Ids must equal tiktoken's / tokenizers' whichever way a text goes.
"""

from __future__ import annotations

import random

import pytest

import tokmap
from tokmap import mtok
from tokmap.exporter.regex_compile import _Parser, compile_pattern, space_cut_unsafe
from tokmap.runtime import spacecut

from conftest import model_source
from test_hostile_files import check_error, with_meta, without_split_field, write

TIKTOKEN = ("gpt2", "cl100k_base", "o200k_base")
HF = ("llama3", "qwen3", "gpt4o")
MODELS = TIKTOKEN + HF
# Chars and strings the patterns treat differently around a space: whitespace of every kind
# (ASCII, NBSP, ideographic space, NEL, line separator, \x1c which stdlib re calls a space),
# letters of both cases and scripts, marks, digits, apostrophes (contractions), punctuation, emoji.
ALPHABET = [" ", " ", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\x0b", "\x0c", "\x1c", "\u00a0", "\u3000", "\u0085",
            "\u2028", "a", "Z", "word", "The", "é", "\u0301", "日本", "мир", "1", "2026", "3.14", "'s", "'T", ".",
            ",", "/", "(", "\U0001F600", "\U00020000", "-", "_"]


@pytest.fixture(scope="module")
def refs(testdata):
    import tokenizers

    from test_conformance import Ref

    out = {}
    for name in MODELS:
        if name in TIKTOKEN:
            out[name] = Ref(name, model_source(testdata, name)).tok.encode_ordinary
        else:
            t = tokenizers.Tokenizer.from_file(str(model_source(testdata, name)))
            out[name] = lambda s, t=t: t.encode(s, add_special_tokens=False).ids
    return out


def _encode(tok, name, text):
    return tok.encode_ordinary(text) if name in TIKTOKEN else tok.encode(text, add_special_tokens=False)


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        out.append("".join(rng.choice(ALPHABET) for _ in range(rng.randrange(3, 400))))
    return out


def _cut_ok(bits: bytes, c: int) -> bool:
    return bool(bits[c >> 3] >> (c & 7) & 1)


def _ascii_cut_after(bits: bytes) -> set[str]:
    return {chr(c) for c in range(128) if _cut_ok(bits, c)}


# -- the exporter's proof ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_real_patterns_cut_after_any_ascii_but_whitespace(name, exported, testdata):
    """The real patterns' cut set, and the reference engine agrees: after every ASCII char the
    proof allows, no piece of the reference split holds that char and the space after it (many
    contexts); after every ASCII char it refuses, some piece does."""
    tok = tokmap.load(exported(name))
    step = tok.pipeline.fast_split
    assert tok.pipeline.space_cuts is not None and step.space_cut is not None
    allowed = _ascii_cut_after(step.space_cut)
    from tokenizers import Regex, pre_tokenizers

    split = pre_tokenizers.Split(Regex(_reference_pattern(name, testdata)), "isolated")
    crossing = set()
    after = [" ", "  ", "\n", "\t", "x", "X", ".", "1", "'s", "é", ""]
    for x in map(chr, range(128)):
        for y in after:
            for before in ("", "a", " ", "1", "."):
                text = f"{before}{x} {y}"
                if any(f"{x} " in p for p, _ in split.pre_tokenize_str(text)):
                    crossing.add(x)
    assert crossing and not crossing & allowed, sorted(crossing & allowed)
    assert set(map(chr, range(128))) - allowed == crossing, sorted(set(map(chr, range(128))) - allowed - crossing)


def _reference_pattern(name: str, testdata) -> str:
    import json

    from test_conformance import Ref

    if name in TIKTOKEN:
        return Ref(name, model_source(testdata, name)).tok._pat_str
    doc = json.loads(model_source(testdata, name).read_text(encoding="utf-8"))
    pre = doc["pre_tokenizer"]
    steps = pre.get("pretokenizers", [pre])
    return next(s["pattern"]["Regex"] for s in steps if s["type"] == "Split")


def _unsafe_ascii(pattern: str, flavor: str = "onig") -> set[str] | None:
    u = space_cut_unsafe(_Parser(pattern, flavor).parse())
    if u is None:
        return None
    return {chr(c) for c in range(128) if any(a <= c < b for a, b in zip(u[::2], u[1::2]))}


def test_unsafe_chars_of_small_patterns():
    """What the proof counts: a space inside a match after letters, an end anchor or a one-char
    lookahead holding the space after them; what it refuses: lookbehind, start anchors, wider
    lookaheads. Chars it need not count stay out."""
    letters = {chr(c) for c in range(128) if chr(c).isalnum() or chr(c) == "_"}
    assert _unsafe_ascii(r"\w+ \w+|\s+|.") >= letters
    assert _unsafe_ascii(r"[a-z]+|\s+|.") & letters == set()
    assert _unsafe_ascii(r"[a-z]+$|\s+|.") >= set("abcxyz")  # $: the end of a line, or of the text
    assert "q" in _unsafe_ascii(r"q\Z|\s+|.")  # (Oniguruma) \Z: the end, or before a final newline
    assert "\n" in _unsafe_ascii(r"q\Z|\s+|.")
    assert "q" in _unsafe_ascii(r"q\z|\s+|.") and "\n" not in _unsafe_ascii(r"q\z|[a-z]+|.")
    assert "k" in _unsafe_ascii(r"k(?=[ x])|\s+|.")  # a lookahead that takes the space
    assert "k" not in _unsafe_ascii(r"k(?![x\n])|\s+|.")  # one that never sees it differently
    assert "k" in _unsafe_ascii(r"(?:k(?= ))+|\s+|.")  # at the start of a later iteration
    assert "m" in _unsafe_ascii(r"(?:m ?)+|.")
    assert _unsafe_ascii(r"(?<=a) b|.") is None
    assert _unsafe_ascii(r"^a|.") is None
    assert _unsafe_ascii(r"a(?=bc)|.") is None
    # What compile_pattern stores: the same, over the translated alphabet.
    bits = compile_pattern(r"\w+ \w+|\s+|.", "onig").space_cut
    assert not _ascii_cut_after(bits) & letters and "." in _ascii_cut_after(bits)
    assert compile_pattern(r"(?<=a) b|.", "onig").space_cut is None


def test_refused_and_conservative_patterns_encode_alike(tmp_path, exported, testdata):
    """A tokenizer.json whose Split keeps a space inside its pieces after letters: the file says
    no cut follows a letter, and a text encoded again (by chunks) keeps tokenizers' ids."""
    import json

    from conftest import export_variant

    doc = json.loads(model_source(testdata, "llama3").read_text(encoding="utf-8"))
    for s in doc["pre_tokenizer"]["pretokenizers"]:
        if s["type"] == "Split":
            s["pattern"]["Regex"] = r"\p{L}+ \p{L}+|\p{L}+|\s+(?!\S)|\s+|\p{N}{1,3}|[^\s\p{L}\p{N}]+"
    ref, tok = export_variant(doc, tmp_path)
    assert not {"a", "Z"} & _ascii_cut_after(tok.pipeline.fast_split.space_cut)
    assert tok.pipeline.space_cuts is not None
    text = "ab cd ef, gh 12 ij\n kl  mn " * 400
    want = ref.encode(text, add_special_tokens=False).ids
    for _ in range(3):
        assert tok.encode(text, add_special_tokens=False) == want


# -- the runtime ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_chunks_equal_pieces_and_the_reference(name, exported, refs, monkeypatch):
    """Random texts of every kind of space and its neighbours: by chunks (cold cache, then warm)
    as by pieces, and, through the whole pipeline (normalizers too), as the reference."""
    from tokmap.runtime import pipeline

    tok = tokmap.load(exported(name))
    pipe = tok.pipeline
    cuts = pipe.space_cuts
    texts = _texts(7, 150)
    for text in texts:
        want = pipe._piece_ids(text)
        assert cuts.ids(text) == want, repr(text[:80])
        assert cuts.ids(text) == want, repr(text[:80])
    assert len(cuts.cache) > 1000
    monkeypatch.setattr(pipeline, "CHUNK_TEXT", 1)  # every text by chunks, met before or not
    monkeypatch.setattr(spacecut.SpaceCuts, "repeats", lambda self, text: True)
    fresh = tokmap.load(exported(name))
    for text in texts[:60]:
        want = refs[name](text)
        assert _encode(fresh, name, text) == want, repr(text[:80])
        assert _encode(fresh, name, text) == want, repr(text[:80])


@pytest.mark.parametrize("name", ["o200k_base", "llama3"])
def test_a_text_met_again_goes_by_chunks(name, exported, refs, corpus, monkeypatch):
    """The first and second time a long text comes it goes by pieces (a second call costs no chunk
    filling); the third by chunks, filling the cache; the fourth from the cache alone; the text
    grown at its end by chunks too. New documents after it go by pieces again, although most of
    their words are in the cache. Every time the reference's ids."""
    calls = []
    real_ids, real_fill = spacecut.SpaceCuts.ids, spacecut.SpaceCuts._fill
    monkeypatch.setattr(spacecut.SpaceCuts, "ids", lambda self, t: calls.append("ids") or real_ids(self, t))
    monkeypatch.setattr(spacecut.SpaceCuts, "_fill", lambda self, k: calls.append("fill") or real_fill(self, k))
    tok = tokmap.load(exported(name))
    text, other = corpus("en"), corpus("code")
    want = refs[name](text)
    got = []
    for k in range(4):
        got.append(_encode(tok, name, text))
        assert calls == [[], [], ["ids", "fill"], ["ids", "fill", "ids"]][k], k
    assert got == [want] * 4
    calls.clear()
    grown = text + " And one more turn of the conversation, appended at its end. " * 200
    assert _encode(tok, name, grown) == refs[name](grown)  # a text that grew: its windows were met
    assert calls[0] == "ids"
    calls.clear()
    for new in (other, corpus("pride")):  # new documents, even of the same words: by pieces
        assert _encode(tok, name, new) == refs[name](new)
    assert calls == []
    japanese = corpus("wagahai")  # few spaces: chunks as long as lines, never by chunks
    for _ in range(3):
        assert _encode(tok, name, japanese) == refs[name](japanese)
    assert calls == []
    monkeypatch.setattr(spacecut, "CHUNK_CACHE_MAX", 1000)  # more chunks than the cache holds
    for _ in range(3):
        assert _encode(tok, name, other) == refs[name](other)
    assert calls == []


@pytest.mark.parametrize("name", ["cl100k_base", "gpt4o"])
def test_small_caches_and_long_chunks(name, exported, refs, monkeypatch):
    """A chunk cache emptied between texts, long chunks (whole lines of unspaced text) held within
    the long-chunk budget or let go: the same ids."""
    from tokmap.runtime import models

    monkeypatch.setattr(spacecut, "CHUNK_CACHE_MAX", 50)
    monkeypatch.setattr(spacecut, "CHUNK_CACHE_CHARS", 4)
    monkeypatch.setattr(models, "LONG_CACHE_CHARS", 200)  # long chunks let go within a call too
    tok = tokmap.load(exported(name))
    cuts = tok.pipeline.space_cuts
    rng = random.Random(3)
    for k in range(30):
        text = " ".join("".join(rng.choice("abcé日\n.") for _ in range(rng.randrange(1, 300))) for _ in range(20))
        assert cuts.ids(text) == refs[name](text), k
        assert cuts.ids(text) == refs[name](text), k


@pytest.mark.parametrize("name", ["o200k_base", "qwen3"])
def test_chunks_holding_long_pieces(name, exported, refs):
    """A chunk of a piece longer than the piece cache keeps whole (its ids may come as a list)
    and more pieces after it: the chunk's ids, once and again."""
    tok = tokmap.load(exported(name))
    cuts = tok.pipeline.space_cuts
    rng = random.Random(5)
    ideographs = lambda n: "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(n))  # noqa: E731
    for k in range(3):
        # Thousands of new chunks (the misses merge as one batch), and long runs of random
        # ideographs with punctuation after them in the same chunk.
        words = " ".join(ideographs(rng.randrange(2, 8)) for _ in range(3000))
        long = ideographs(400 + 300 * k)
        text = f"{words} {long}, b {long}. c {long}\n{long} d 12 {words}"
        want = refs[name](text)
        assert cuts.ids(text) == want, k
        assert cuts.ids(text) == want, k


@pytest.mark.parametrize("name", ["o200k_base", "gpt4o", "qwen3", "llama3"])
def test_chunks_holding_pieces_long_in_bytes(name, exported, refs, monkeypatch):
    """Pieces longer in bytes than a batch word but short enough in chars for the piece cache
    (90-250 Thai chars, 3 bytes each), enough of them to be merged as chunks, each in a chunk with
    more pieces: the text met a third and fourth time goes by chunks, whose ids add up the
    pieces' cached ids. (A list cached for such a piece once made the chunks fail: 40K chars of
    multi.txt encoded three times under GPT-4o raised.)"""
    fills = []
    real_fill = spacecut.SpaceCuts._fill
    monkeypatch.setattr(spacecut.SpaceCuts, "_fill", lambda self, k: fills.append(1) or real_fill(self, k))
    tok = tokmap.load(exported(name))
    rng = random.Random(11)
    thai = [chr(c) for c in range(0x0E01, 0x0E30)]
    words = " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(3, 12)))
                     for _ in range(3000))
    longs = ["".join(rng.choice(thai) for _ in range(rng.randrange(90, 250))) for _ in range(30)]
    text = words + " " + " ".join(p + ", b" for p in longs) + " " + words
    want = refs[name](text)
    for k in range(4):
        assert _encode(tok, name, text) == want, k
    assert fills == [1]  # (the third call filled the chunks, the fourth read them)
    assert all(type(v) is tuple for v in tok.pipeline.model.piece_cache.values())


@pytest.mark.parametrize("name", ["o200k_base", "gpt4o", "qwen3", "llama3"])
def test_multilingual_slices_met_again(name, exported, refs, corpus):
    """Stretches of multi.txt (every script it holds, at eight places), each encoded four times by
    one tokenizer whose caches the stretches before it filled: the first two calls by pieces; where
    a stretch has spaces enough (not the Chinese or Japanese ones), the third filling chunks and
    the fourth from them. Every call the reference's ids."""
    tok = tokmap.load(exported(name))
    text = corpus("multi")
    step = len(text) // 8
    for off in range(0, 8 * step, step):
        stretch = text[off:off + 30000]
        want = refs[name](stretch)
        for k in range(4):
            assert _encode(tok, name, stretch) == want, (off, k)


def test_space_count_stops_past_the_cap(exported, monkeypatch):
    """repeats() counts a text's spaces a block at a time, and stops once past the chunk cache's
    cap or once they are enough and the chars left could not pass the cap: a text met twice goes
    by chunks exactly when counting all of its spaces says it may (at most the cap, at least one
    in MIN_SPACES chars), at either side of both limits, with the spaces spread evenly, all at the
    start (enough early, and the rest short or long) or all at the end."""
    tok = tokmap.load(exported("o200k_base"))
    cuts = tok.pipeline.space_cuts
    cap = 40
    monkeypatch.setattr(spacecut, "CHUNK_CACHE_MAX", cap)
    monkeypatch.setattr(spacecut, "COUNT_BLOCK", 7)  # the cap passed in any block, the last one too
    counted = 0
    for n_spaces in (cap - 1, cap, cap + 1, 3 * cap):
        for gap in (spacecut.MIN_SPACES - 1, spacecut.MIN_SPACES):  # chars per space
            for tail in ("", "y" * 50):
                spaced = ("x" * (gap - 1) + " ") * n_spaces
                for text in (spaced + tail, " " * n_spaces + "z" * (len(spaced) - n_spaces) + tail,
                             " " * n_spaces + "z" * (n_spaces * spacecut.MIN_SPACES - n_spaces),
                             " " * n_spaces + "z" * (n_spaces * spacecut.MIN_SPACES - n_spaces + 1),
                             tail + "z" * (len(spaced) - n_spaces) + " " * n_spaces):
                    may = text.count(" ") <= cap and text.count(" ") * spacecut.MIN_SPACES >= len(text)
                    counted += may
                    cuts._met.clear()
                    assert not cuts.repeats(text)  # met for the first time ...
                    assert not cuts.repeats(text)  # ... and the second
                    assert cuts.repeats(text) == may, (n_spaces, gap, len(tail), text[:20])
    assert counted  # (some texts do go by chunks)


def test_never_a_cut_after_a_space_or_at_the_start(exported):
    """Whatever the file's bits say, a space right after a space or at the text's start is no cut
    (the part before it is empty): with every bit set, cl100k still splits '  x' whole."""
    tok = tokmap.load(exported("cl100k_base"))
    pipe = tok.pipeline
    cuts = spacecut.SpaceCuts(pipe, pipe.fast_split, b"\xff" * 32)
    for text in ["  x y z", " a  b   c    d", "x  y   z", "   ", "a   b c"]:
        assert cuts.ids(text) == pipe._piece_ids(text), repr(text)


# -- the file --------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["zz" * 32, "ff" * 31, 7])
def test_damaged_space_cut_refused(exported, tmp_path, value):
    path = exported("cl100k_base")

    def edit(meta):
        meta["pre_tokenizer"][0]["space_cut"] = value

    bad = write(tmp_path, with_meta(path, edit), "badcut.mtok")
    with pytest.raises(tokmap.FormatError) as ei:
        tokmap.load(bad).encode_ordinary("x y")
    check_error(ei.value, bad, "meta", tokmap.load(path)._f.sections[mtok.SECTION_META][1], "space_cut")


def test_a_false_cut_claim_is_caught(tmp_path, testdata):
    """A file claiming cuts its pattern does not allow (every bit set for a pattern whose pieces
    hold 'letter space letter'): the chunk path finds a piece across a cut and says so."""
    import json

    from conftest import export_variant

    doc = json.loads(model_source(testdata, "llama3").read_text(encoding="utf-8"))
    for s in doc["pre_tokenizer"]["pretokenizers"]:
        if s["type"] == "Split":
            s["pattern"]["Regex"] = r"\p{L}+ \p{L}+|\s+|."
    _ref, _tok = export_variant(doc, tmp_path)
    path = tmp_path / "variant.mtok"

    def edit(meta):
        meta["pre_tokenizer"][0]["space_cut"] = "ff" * 32

    bad = write(tmp_path, with_meta(path, edit), "falsecut.mtok")
    tok = tokmap.load(bad)
    with pytest.raises(tokmap.FormatError) as ei:
        tok.pipeline.space_cuts.ids("ab cd ef gh ij kl")
    check_error(ei.value, bad, "meta", tok._f.sections[mtok.SECTION_META][1], "space_cut")


def test_files_without_space_cut_encode_alike(exported, tmp_path, corpus):
    """A file written before the field splits every text by pieces, with the same ids."""
    path = exported("o200k_base")
    bare = tokmap.load(without_split_field(path, tmp_path, "space_cut"))
    tok = tokmap.load(path)
    assert tok.pipeline.space_cuts is not None and bare.pipeline.space_cuts is None
    text = corpus("pride")
    for _ in range(3):
        assert bare.encode_ordinary(text) == tok.encode_ordinary(text)
