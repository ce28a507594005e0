"""The runtime's promises apart from exactness: import hygiene, determinism, API conventions, CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

import tokmap
from tokmap import cli, mtok

from conftest import ROOT, require

GPT2 = ROOT / "testdata" / "gpt2.tiktoken"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpt2") / "gpt2.mtok"
    tokmap.export(GPT2, out)
    return out


def _unigram_mtok(name, exported, testdata, tmp_path_factory):
    """botchan-unigram (tokenizer.json) or botchan_en_unigram_1000 (.model) exported."""
    if name != "botchan_en_unigram_1000":
        return exported(name)
    out = tmp_path_factory.mktemp("spm") / f"{name}.mtok"
    tokmap.export(require(testdata / "models" / "sentencepiece" / f"{name}.model"), out)
    return out


@pytest.mark.parametrize("name", ["llama3", "botchan-unigram", "botchan_en_unigram_1000"])
def test_import_and_short_encode_stay_stdlib(exported, testdata, tmp_path_factory, name):
    """import tokmap -> load -> first short encodes never import numpy, regex, click or the exporter
    (Unigram: a text past the Precompiled normalizer's bulk classification and with more words
    than the numpy lattice takes once numpy is imported, which is not enough to import it)."""
    path = _unigram_mtok(name, exported, testdata, tmp_path_factory)
    code = (
        "import sys, tokmap\n"
        f"t = tokmap.load({str(path)!r})\n"
        "t.encode('Hello world'); t.encode('日本語のテキスト ünïcode 👍'); t.decode(t.encode('x y'))\n"
        "t.encode(' '.join(f'w{k}x{k * 7} naïve\\nline' for k in range(300)))\n"
        "bad = [m for m in ('numpy', 'regex', 'click', 'tokmap.exporter', 'tokmap.formats', 'unicodedata',"
        " 'tokenizers', 'tiktoken') if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_encode_only_process_builds_no_decoder(exported):
    """The cold path import -> load -> short encode imports neither the decoders nor `array` (an
    extension module: a dlopen per process); the first decode brings the decoder in."""
    path = exported("llama3")
    code = (
        "import sys, tokmap\n"
        f"t = tokmap.load({str(path)!r})\n"
        "t.encode('Hello world'); t.encode('日本語のテキスト ünïcode 👍')\n"
        "late = ('tokmap.runtime.decoders', 'tokmap.runtime.sp_decoders', 'array')\n"
        "print([m for m in late if m in sys.modules])\n"
        "print(t.decode(t.encode('Hello world')), 'tokmap.runtime.decoders' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "Hello world True"]


@pytest.mark.parametrize("name", ["llama3", "gemma3", "botchan-unigram", "botchan_en_unigram_1000"])
def test_long_encodes_import_no_more_of_numpy(exported, testdata, tmp_path_factory, name):
    """A first long encode imports only numpy itself: np.unique / np.isin import numpy.ma (~6 ms,
    paid by the first cold encode of every process); byte-level BPE, the char-level cut table and
    the Unigram lattice use sort-based equivalents."""
    path = _unigram_mtok(name, exported, testdata, tmp_path_factory)
    corpus = testdata / "corpus"
    code = (
        "import sys, numpy, tokmap\n"
        "before = set(sys.modules)\n"
        f"t = tokmap.load({str(path)!r})\n"
        f"for c in ('en', 'multi', 'wagahai'): t.encode(open({str(corpus)!r} + '/' + c + '.txt', encoding='utf-8').read()[:200000])\n"
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('numpy')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_export_is_deterministic(tmp_path):
    a, b = tmp_path / "a.mtok", tmp_path / "b.mtok"
    tokmap.export(GPT2, a)
    tokmap.export(GPT2, b)
    assert a.read_bytes() == b.read_bytes()


def test_sections_are_aligned_and_described(gpt2):
    tok = tokmap.load(gpt2, verify=True)
    for s in tok._f.describe():
        assert s["offset"] % mtok.ALIGN == 0
    prov = tok.provenance
    assert prov["source_format"] == "tiktoken" and len(prov["source_sha256"]) == 64
    assert prov["unicode_versions"] == ["16.0.0"]
    assert tok.meta["extra"]["encoding"] == "r50k_base"


def test_tiktoken_disallowed_special_raises_with_fix(gpt2):
    tok = tokmap.load(gpt2)
    with pytest.raises(tokmap.EncodeError, match="allowed_special"):
        tok.encode("x <|endoftext|>")
    assert tok.encode("x <|endoftext|>", allowed_special="all")[-1] == 50256
    assert 50256 not in tok.encode("x <|endoftext|>", disallowed_special=())
    assert tok.encode_ordinary("x <|endoftext|>") == tok.encode("x <|endoftext|>", disallowed_special=())


def test_tiktoken_unknown_encoding_refused(tmp_path):
    src = tmp_path / "custom.tiktoken"
    src.write_bytes(GPT2.read_bytes().replace(b" 50255\n", b" 50255\n", 1) + b"\n")
    with pytest.raises(tokmap.SourceError, match="--encoding"):
        tokmap.export(src, tmp_path / "x.mtok")
    tokmap.export(src, tmp_path / "x.mtok", encoding="gpt2")


def test_numpy_array_and_batch(gpt2):
    tok = tokmap.load(gpt2)
    arr = tok.encode("Hello world, hello numpy", as_array=True)
    assert str(arr.dtype) == "uint32" and arr.tolist() == tok.encode("Hello world, hello numpy")
    texts = ["a b c", "Hello", "", "日本"]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]


def test_vocab_lookups(gpt2):
    tok = tokmap.load(gpt2)
    assert tok.vocab_size == 50257
    for i in (0, 100, 31373, 50255, 50256):
        t = tok.id_to_token(i)
        assert tok.token_to_id(t) == i
    assert tok.id_to_token(50257) is None


def test_cli_roundtrip(gpt2, tmp_path):
    runner = CliRunner()
    out = tmp_path / "cli.mtok"
    r = runner.invoke(cli.export_main, [str(GPT2), "-o", str(out)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli.main, ["encode", str(out), "Hello world", "--timing"])
    assert r.exit_code == 0 and "load" in r.output
    ids = r.output.strip().splitlines()[-1].split()
    assert list(map(int, ids)) == tokmap.load(out).encode("Hello world")
    r = runner.invoke(cli.main, ["decode", str(out), *ids])
    assert r.output.strip() == "Hello world"
    r = runner.invoke(cli.main, ["inspect", str(out)])
    assert r.exit_code == 0 and "merge_keys" in r.output and "r50k_base" in r.output
    r = runner.invoke(cli.main, ["verify", str(out)])
    assert r.exit_code == 0 and "OK" in r.output


def test_load_time_is_small(exported):
    """Not a speed gate: checks load touches only header, table and meta (no per-token objects)."""
    path = exported("llama3")
    code = (
        "import time, tokmap, sys\n"
        f"t0 = time.perf_counter(); t = tokmap.load({str(path)!r}); dt = time.perf_counter() - t0\n"
        "print(t._model is None and t._pipeline is None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_user_errors_are_not_reported_as_corruption(gpt2):
    tok = tokmap.load(gpt2)
    for call in (lambda: tok.decode(["x"]), lambda: tok.encode(b"bytes"), lambda: tok.id_to_token("7"),
                 lambda: tok.token_to_id(7), lambda: tok.encode("x", allowed_special=7),
                 lambda: tok.encode_ordinary(None)):
        with pytest.raises(tokmap.ArgumentError) as e:
            call()
        assert isinstance(e.value, TypeError) and not isinstance(e.value, tokmap.FormatError)
    # A call the signature refuses is Python's own TypeError, not "corrupted data".
    for call in (lambda: tok.encode("x", foo=1), lambda: tok.decode([1], 2, 3), lambda: tok.encode_full()):
        with pytest.raises(TypeError) as e:
            call()
        assert not isinstance(e.value, tokmap.TokmapError), e.value


def test_normalization_tables_only_when_needed(exported, testdata, tmp_path):
    """No normalizer: no normalization table in the file. NFKC: exactly NFKC's tables. inspect says so."""
    from tokmap.exporter.norm_tables import build_norm_blob

    llama3 = tokmap.load(exported("llama3"))
    assert llama3.meta["normalizer"] == []
    used = {s[k] for s in llama3.meta["pre_tokenizer"] for k in ("class_index", "class_blocks") if k in s}
    used |= {s[k]["blob"] for s in llama3.meta["pre_tokenizer"] for k in ("regex_bmp_code", "regex_full_code") if k in s}
    blobs = {sid - mtok.BLOB_BASE for sid in llama3._f.sections if sid >= mtok.BLOB_BASE}
    assert blobs == used  # every blob belongs to the split pattern; none to normalization
    out = tmp_path / "wl.mtok"
    tokmap.export(testdata / "models" / "botchan-wordlevel" / "tokenizer.json", out)
    wl = tokmap.load(out)
    (step,) = [s for s in wl.meta["normalizer"] if s["type"] == "unicode"]
    assert step["form"] == "NFKC"
    assert bytes(wl._f.view(mtok.BLOB_BASE + step["tables"])) == build_norm_blob({"NFKC"})
    r = CliRunner().invoke(cli.main, ["inspect", str(out)])
    assert "NFKC" in r.output and "9.0.0" in r.output
    r = CliRunner().invoke(cli.main, ["inspect", str(exported("llama3"))])
    assert "normalizer: none (no normalization tables)" in r.output


def test_long_encodes_pause_the_collector(gpt2):
    """A long text encodes with the cyclic collector paused (its objects cannot form cycles), short
    ones without the pause; the collector's state afterwards is what it was before, also when
    the call fails, and a caller's own gc.disable() is left alone."""
    import gc

    tok = tokmap.load(gpt2)
    model = tok.pipeline.model
    seen = []
    real = model.encode_pieces

    def spy(pieces):
        seen.append(gc.isenabled())
        return real(pieces)

    model.encode_pieces = spy
    long_text = "tokens of a longer text " * 100
    assert len(long_text) >= tokmap.runtime.tokenizer.PAUSE_GC_CHARS
    ids = tok.encode_ordinary(long_text)
    assert seen == [False] and gc.isenabled()
    tok.encode("a short one")
    tok.encode_full(long_text)
    assert seen == [False, True, False] and gc.isenabled()
    assert ids == tok.encode_ordinary(long_text)

    def broken(pieces):
        raise IndexError("simulated damage")

    model.encode_pieces = broken
    with pytest.raises(tokmap.FormatError):
        tok.encode(long_text)
    assert gc.isenabled()

    model.encode_pieces = spy
    gc.disable()
    try:
        tok.encode(long_text)
        assert seen[-1] is False and not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("name", ["llama3", "o200k_base"])
def test_returned_ids_are_the_callers_own(exported, name):
    """encode hands out the model's list itself where one split gives all the ids (no copy):
    changing what a call returned leaves the next calls' ids alone, cold and warm, for a text
    with an added token in it and without, with and without the specials added around it."""
    tok = tokmap.load(exported(name))
    special = "<|begin_of_text|>" if name == "llama3" else "<|endoftext|>"
    texts = ["Hello world, hello again", f"Hello {special} world", "日本語 " * 40, "x"]
    kwargs = [{}, {"add_special_tokens": False}] if name == "llama3" else [{}, {"allowed_special": "all"}]
    for text in texts:
        for kw in kwargs:
            if special in text and name == "o200k_base" and not kw:
                continue  # (a disallowed special: refused)
            first = tok.encode(text, **kw)
            want = list(first)
            first.append(-1)
            first[0] = -2
            for _ in range(2):
                got = tok.encode(text, **kw)
                assert got == want, (text, kw)
                got.clear()
            if name == "o200k_base":
                ordinary = tok.encode_ordinary(text)
                again = list(ordinary)
                ordinary.append(-1)
                assert tok.encode_ordinary(text) == again


@pytest.mark.parametrize("name", ["llama3", "botchan-wordlevel", "botchan_en_unigram_1000", "mistral-v3"])
def test_short_path_is_the_general_path(exported, testdata, tmp_path_factory, name):
    """encode's short path (a str under PAUSE_GC_CHARS, no option but add_special_tokens, bound by
    the first call) gives the general path's ids, the same errors for a surrogate and a str
    subclass, and turns damage into a FormatError naming the call."""
    if name == "mistral-v3":
        path = tmp_path_factory.mktemp("spm") / "mistral-v3.mtok"
        tokmap.export(require(testdata / "models" / "sentencepiece" / "mistral-v3.model"), path)
    else:
        path = _unigram_mtok(name, exported, testdata, tmp_path_factory)
    tok = tokmap.load(path)
    assert tok._plain is None
    tok.encode("x")
    assert tok._plain
    texts = ["Hello, world!", "  two  spaces ", "你好，世界！", "naïve café", "x = f(1);\n\ttab", "", "é" * 1023,
             "an added token: <|begin_of_text|> [CLS] <unk> <s>, and [SEP]", "\ufdfa" * 600, "ＡＢＣ！ ½"]
    for t in texts:
        for add in (True, False):
            assert tok.encode(t, add) == tok._encode(t, add) == tok.encode(t, add_special_tokens=add), (t, add)
    assert tok.encode("é" * 1023, as_array=True).tolist() == tok.encode("é" * 1023)

    class Text(str):
        pass

    assert tok.encode(Text("Hello, world!")) == tok.encode("Hello, world!")
    with pytest.raises(tokmap.EncodeError):
        tok.encode("bad \ud800 surrogate")
    with pytest.raises(tokmap.ArgumentError):
        tok.encode(b"bytes")

    def broken(text, add):
        raise IndexError("simulated damage")

    tok._plain = broken
    with pytest.raises(tokmap.FormatError, match="running encode"):
        tok.encode("Hello")


@pytest.mark.parametrize("name", ["gpt2", "o200k_base", "tekken"])
def test_short_path_tiktoken_and_tekken(exported, gpt2, name):
    """tiktoken and Tekken files' short path: the general path's ids; lone surrogates replaced
    (not refused); tiktoken refuses a text holding a special token with the general path's
    error, which says the fix."""
    tok = tokmap.load(gpt2 if name == "gpt2" else exported(name))
    tok.encode("x")
    assert tok._plain
    texts = ["Hello, world!", "你好，世界！", "lone \ud800 surrogate", "", "x" * 1023, "é" * 1000]
    for t in texts:
        for add in (True, False):
            assert tok.encode(t, add) == tok._encode(t, add), (t, add)
    if name != "tekken":
        special = "<|endoftext|>"
        with pytest.raises(tokmap.EncodeError, match="allowed_special"):
            tok.encode(f"text {special} more")
        assert tok.encode(f"a {special}", allowed_special="all") == tok._encode(f"a {special}", allowed_special="all")
