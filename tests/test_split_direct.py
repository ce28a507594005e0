"""The splits over original code points (SplitStep.direct: the exporter's py_pattern_full as
stored engine code, else py_pattern_bmp) against the translated split they shortcut, and the ids
of whole corpora against the reference libraries.

The translated split is checked against Oniguruma / fancy-regex in tests/test_regex_compile.py;
here every path of SplitStep.direct must give the pieces it gives: the full pattern on any text;
without it (a file or engine without the stored code) BMP text, text with a few astral code points
(stand-ins of the same class, pieces re-cut), mostly astral text (translated), and
Split(invert=True) on those.
"""

from __future__ import annotations

import random

import pytest

import tokmap
from tokmap.runtime import pretokenizers

MODELS = ["llama3", "qwen3", "gpt4o", "cl100k_base", "o200k_base", "tekken"]


def _texts(corpus) -> list[str]:
    rng = random.Random(7)
    multi = corpus("multi")
    astral = [c for c in set(multi) if ord(c) > 0xFFFF] + ["\U0001f600", "\U00020000", "\U0001d400", "\U000e0001",
                                                          "\U0010fffd", "\U00010400"]
    out = [corpus("en"), corpus("wagahai"), multi[:300_000], corpus("code")]
    for _ in range(40):  # a slice of a corpus with astral code points spliced in at random places
        base = list(multi[rng.randrange(len(multi) - 5000):][:5000])
        for _ in range(rng.randrange(1, 30)):
            base.insert(rng.randrange(len(base) + 1), rng.choice(astral) * rng.choice([1, 1, 2, 5]))
        out.append("".join(base))
    out += ["\U0001f600" * 50 + " a b", "x \U00020000\U00020001 y", "\U0001d400bc 12\U0001d7ce3 \U0001f600!"]
    return out


def _kind(step, text) -> str:
    d = step.direct(text)
    return "translated" if d is None else "full" if d[2] is None else "astral" if d[2] else "bmp"


def _variants(pipe, step, text) -> dict:
    """(split_fast, spans) by each path: the full pattern, then without it (py_pattern_bmp with
    stand-ins, or translated for mostly astral text), then the translated pattern only."""
    full, bmp = step._full_regex, step.bmp
    out = {}
    try:
        for label, f, b in (("full", full, bmp), ("bmp", False, bmp), ("translated", False, "")):
            step._full_regex, step.bmp = f, b  # False: no stored full code; "": no py_pattern_bmp
            out[label] = (_kind(step, text), pipe.split_fast(text), step.spans(text))
    finally:
        step._full_regex, step.bmp = full, bmp
    return out


@pytest.mark.parametrize("name", MODELS)
def test_direct_split_equals_translated(name, exported, corpus):
    tok = tokmap.load(exported(name))
    tok.encode("x")
    pipe = tok.pipeline
    step = pipe.fast_split
    assert step is not None and step.bmp and step.full, "the file should carry py_pattern_bmp and _full"
    assert step.full_regex() is not None, "regex_full_code should serve on the engine that exported it"
    step.bmp_regex()  # compiled up front, so that short texts take the direct paths too
    kinds, bad, invert = set(), [], step.invert
    for text in _texts(corpus):
        for inv in (invert, not invert):  # Split(invert=True, removed) keeps the matches only
            step.invert = inv
            try:
                got = _variants(pipe, step, text)
            finally:
                step.invert = invert
            kinds |= {k for k, _p, _s in got.values()}
            want = got["translated"][1:]
            bad += [(label, inv, text[:30]) for label, g in got.items() if g[1:] != want]
    assert kinds == {"full", "translated", "astral", "bmp"}, kinds
    assert not bad, f"{name}: {len(bad)} differences, first {bad[0]!r}"


@pytest.mark.parametrize("name", ["llama3", "cl100k_base"])
def test_direct_split_ids_equal_reference(name, exported, corpus, testdata):
    """Whole corpora (the full pattern on all of them; without it, stand-ins for the astral code
    points of multi and code) give the reference library's ids."""
    from conftest import model_source

    tok = tokmap.load(exported(name))
    if name == "llama3":
        import tokenizers

        ref = tokenizers.Tokenizer.from_file(str(model_source(testdata, name)))
        encode_ref = lambda t: ref.encode(t, add_special_tokens=False).ids  # noqa: E731
        encode_mine = lambda t: tok.encode(t, add_special_tokens=False)  # noqa: E731
    else:
        import tiktoken
        import tiktoken.load

        from tokmap.formats.tiktoken import ENCODINGS

        _sha, pattern, specials = ENCODINGS[name]
        ref = tiktoken.Encoding(name=name, pat_str=pattern, special_tokens=specials,
                                mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(model_source(testdata, name))))
        encode_ref, encode_mine = ref.encode_ordinary, tok.encode_ordinary
    step = tok.pipeline.fast_split
    for c in ("en", "wagahai", "multi", "code"):
        text = corpus(c)
        want = encode_ref(text)
        assert _kind(step, text) == "full"
        assert encode_mine(text) == want, f"{name} {c}"
        step._full_regex, full = False, step._full_regex
        try:
            assert _kind(step, text) == ("astral" if c in ("multi", "code") else "bmp")
            assert encode_mine(text) == want, f"{name} {c}, without the full pattern"
        finally:
            step._full_regex = full


def test_stand_in_has_the_same_class(exported):
    tok = tokmap.load(exported("llama3"))
    tok.encode("x")
    step = tok.pipeline.fast_split
    for cp in (0x1F600, 0x20000, 0x1D400, 0x1D7CE, 0x10400, 0xE0001, 0x10FFFD):
        c = step._stand_in(cp)
        assert c is not None and ord(c) < 0x10000
        assert pretokenizers.bmp_only(c)
        assert step.translate(c) == step.translate(chr(cp))


def test_inverted_split_over_changed_text_is_recut_not_respanned(exported, corpus, monkeypatch):
    """gpt4o's Split(invert=True, removed): over text with a few astral chars (stand-ins) or
    translated text, whose matches still tile it, split_fast re-cuts the changed pieces rather
    than walking every match in Python (SplitStep.spans, ~2.5x slower on the code corpus)."""
    tok = tokmap.load(exported("gpt4o"))
    tok.encode("x")
    pipe, step = tok.pipeline, tok.pipeline.fast_split
    step._full_regex = False  # the stand-in path (a file or engine without the full pattern's code)
    assert step.invert and step.behavior == "removed"
    texts = [corpus("code")[:200_000] + "\U0001f600 x", "\U0001f600" * 40 + " ab 12 \U00020000"]
    want = [[t[s:e] for s, e in step.spans(t)] for t in texts]
    monkeypatch.setattr(step, "spans", lambda text: pytest.fail("split_fast walked the matches"))
    assert [pipe.split_fast(t) for t in texts] == want


def test_tiles_flag_and_a_pattern_with_gaps(exported, testdata, tmp_path):
    """The real patterns are exported with `tiles` (the runtime takes findall's matches as the
    pieces unchecked); a Split whose matches leave gaps (letters no alternative takes) is not,
    and its gaps stay pieces of their own, as tokenizers makes them. A file without the flag
    (older) encodes alike."""
    import json

    from conftest import export_variant, model_source
    from test_hostile_files import with_meta, write

    assert tokmap.load(exported("llama3")).pipeline.fast_split.tiles
    assert tokmap.load(exported("cl100k_base")).pipeline.fast_split.tiles
    doc = json.loads(model_source(testdata, "llama3").read_text(encoding="utf-8"))
    split = doc["pre_tokenizer"]["pretokenizers"][0]
    assert split["type"] == "Split"
    split["pattern"]["Regex"] = r"\p{N}+|\s+"
    ref, tok = export_variant(doc, tmp_path, "gaps")
    assert not tok.pipeline.fast_split.tiles
    rng = random.Random(4)
    text = " ".join("".join(rng.choice("ab1 é中\n") for _ in range(rng.randrange(1, 9))) for _ in range(400))
    assert tok.encode(text) == ref.encode(text).ids

    def untiled(meta):
        for step in meta["pre_tokenizer"]:
            step.pop("tiles", None)

    path = exported("llama3")
    old = tokmap.load(write(tmp_path, with_meta(path, untiled), "untiled.mtok"))
    assert not old.pipeline.fast_split.tiles
    text = "Hello, world! 123 日本語 " * 50
    assert old.encode(text) == tokmap.load(path).encode(text)
