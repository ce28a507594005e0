"""Parity tests: tokmap's Unicode 9.0 NFC/NFD/NFKC/NFKD against HF tokenizers.

The reference is `tokenizers.normalizers.NF*` itself: `normalize_str` for the
text, and for alignments a Tokenizer whose BPE model has no vocabulary, so
every normalized char becomes its own [UNK] token and `Encoding.offsets`
(code-point offsets in the Python API) is that char's original range.
Inputs: every line and the whole of every corpus, every code point, and
seeded random strings built from the characters where normalization is
delicate.
"""

import os
import random
import subprocess
import sys
import unicodedata  # tests only: to pick interesting chars, never as a reference

import pytest
from tokenizers import Tokenizer, models, normalizers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tokmap.exporter.norm_tables import build_norm_blob  # noqa: E402
from tokmap.runtime.normalize_unicode import UnicodeNormalizer  # noqa: E402

FORMS = ("NFC", "NFD", "NFKC", "NFKD")
CORPORA = ("en", "code", "pride", "wagahai", "multi", "utf8seq")


def _corpus(name):
    import conftest

    path = conftest.testdata_file(f"corpus/{name}.txt")
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def norm():
    return UnicodeNormalizer(memoryview(build_norm_blob(set(FORMS))))


_HF = {}


def hf_tokenizer(form):
    tok = _HF.get(form)
    if tok is None:
        tok = Tokenizer(models.BPE({"[UNK]": 0}, [], unk_token="[UNK]", fuse_unk=False))
        tok.normalizer = getattr(normalizers, form)()
        _HF[form] = tok
    return tok


_HF_NORM = {f: getattr(normalizers, f)() for f in FORMS}


def hf_text(text, form):
    return _HF_NORM[form].normalize_str(text)


def hf_offsets(texts, form):
    encs = hf_tokenizer(form).encode_batch(texts, add_special_tokens=False)
    return [e.offsets for e in encs]


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i, x, y
    return min(len(a), len(b)), len(a), len(b)


def check_batch(norm, texts, form, what):
    """Compare text and alignments for many strings; report the first failure."""
    ref = hf_offsets(texts, form)
    for s, offs in zip(texts, ref):
        out, al = norm.normalize(s, form, want_alignments=True)
        exp = hf_text(s, form)
        assert out == exp, f"{what} {form} text differs for {ascii(s)[:200]}: {ascii(out)[:200]} vs {ascii(exp)[:200]}"
        assert len(al) == len(out)
        if al != offs:
            i, x, y = first_diff(al, offs)
            pytest.fail(f"{what} {form} alignment differs for {ascii(s)[:200]} at {i}: {x} vs {y}")


# --- blob ----------------------------------------------------------------------

SUBSETS = [{f for j, f in enumerate(FORMS) if mask >> j & 1} for mask in range(1, 16)]


@pytest.mark.parametrize("forms", SUBSETS, ids=lambda s: "+".join(sorted(s)))
def test_blob_subsets(forms):
    blob = build_norm_blob(forms)
    assert len(blob) < 64 * 1024
    n = UnicodeNormalizer(memoryview(blob))
    assert n.unicode_version == "9.0.0"
    assert n.forms == forms
    for f in FORMS:
        if f in forms:
            assert n.normalize("e\u0301\ufb01", f)[0] == hf_text("e\u0301\ufb01", f)
        else:
            with pytest.raises(ValueError):
                n.normalize("x", f)
    needs_comp = bool(forms & {"NFC", "NFKC"})
    needs_k = bool(forms & {"NFKC", "NFKD"})
    assert (b"COMP" in n.sections) == needs_comp
    assert (b"KDEC" in n.sections) == needs_k


def test_blob_rejects_unknown_forms():
    with pytest.raises(ValueError):
        build_norm_blob({"NFX"})
    with pytest.raises(ValueError):
        build_norm_blob(set())


def _corrupt(blob, off, fmt, value):
    import struct
    b = bytearray(blob)
    struct.pack_into(fmt, b, off, value)
    return bytes(b)


def test_corrupt_blobs():
    blob = build_norm_blob({"NFKC"})
    cases = [
        (blob[:20], "header"),
        (_corrupt(blob, 0, "<B", 0), "magic"),
        (_corrupt(blob, 8, "<H", 7), "version"),
        (_corrupt(blob, 12, "<I", len(blob) + 8), "total size"),
        (blob[:-8], "total size"),
        (_corrupt(blob, 10, "<H", 5000), "directory"),
        (_corrupt(blob, 32 + 4, "<I", len(blob) - 8), "CCC_"),      # section past the end
        (_corrupt(blob, 32 + 4, "<I", 36), "8-aligned"),
        (_corrupt(blob, 32 + 12, "<I", 10 ** 6), "CCC_"),          # count too large
        (_corrupt(blob, 32 + 16 + 12, "<I", 50000), "CDEC"),       # CDEC count too large
        (_corrupt(blob, 24, "<I", 15), "forms"),                    # claims a form, fine here
    ]
    for data, field in cases[:-1]:
        with pytest.raises(ValueError, match=field):
            UnicodeNormalizer(memoryview(data))
    # forms field listing NFC/NFD/NFKD is valid for an NFKC blob (same sections)
    UnicodeNormalizer(memoryview(cases[-1][0]))
    # a form whose section is missing
    nfd = build_norm_blob({"NFD"})
    with pytest.raises(ValueError, match="missing"):
        UnicodeNormalizer(memoryview(_corrupt(nfd, 24, "<I", 2)))


def test_runtime_imports_stdlib_only():
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import tokmap.runtime.normalize_unicode\n"
            "bad = [m for m in ('unicodedata', 'numpy') if m in sys.modules]\n"
            "assert not bad, bad\n" % ROOT)
    subprocess.run([sys.executable, "-c", code], check=True)


# --- corpora -------------------------------------------------------------------

def _may_change(line):
    """True unless HF provably maps `line` to itself char for char.

    HF's change markers are all 0 (identity alignments) unless some char
    decomposes, gets reordered (non-zero ccc) or composes (the text then
    shrinks).  Decompositions and ccc values never change once assigned
    (Unicode stability policy), so the running Python's newer tables flag
    every char Unicode 9.0 would; composition shows up as changed text.
    """
    return not line.isascii() and any(
        unicodedata.combining(c) or unicodedata.decomposition(c) for c in line)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", CORPORA)
def test_corpus(norm, name, form):
    text = _corpus(name)
    # The whole corpus in one call.
    out, al = norm.normalize(text, form, want_alignments=True)
    exp = hf_text(text, form)
    assert out == exp, f"{name} {form}: text differs at {first_diff(out, exp)}"
    assert out == norm.normalize(text, form)[0]
    assert len(al) == len(out)
    # Every line on its own: text against HF, and the lines' alignments,
    # shifted and joined by the newline, must give the whole-text ones.
    lines = text.split("\n")
    stitched = []
    start = 0
    check = {}
    for k, line in enumerate(lines):
        lo, la = norm.normalize(line, form, want_alignments=True)
        assert lo == hf_text(line, form), f"{name} {form}: line {k} {ascii(line)[:200]}"
        assert norm.normalize(line, form) == (lo, None)
        if lo != line or _may_change(line):
            check[line] = (lo, la)
        else:
            assert la == [(i, i + 1) for i in range(len(line))]
        stitched.extend((a + start, b + start) for a, b in la)
        if k + 1 < len(lines):
            stitched.append((start + len(line), start + len(line) + 1))
        start += len(line) + 1
    assert al == stitched
    # Alignments against HF.  Its per-char offsets cost ~1 us a char, so the
    # lines go through it only when they can differ from identity (see
    # _may_change), and whole texts only when small.
    uniq = sorted(check)
    for line, offs in zip(uniq, hf_offsets(uniq, form)):
        if check[line][1] != offs:
            i, x, y = first_diff(check[line][1], offs)
            pytest.fail(f"{name} {form}: alignment differs for {ascii(line)[:200]} at {i}: {x} vs {y}")
    if len(text) <= 1_200_000:
        ref = hf_offsets([text], form)[0]
        if al != ref:
            i, x, y = first_diff(al, ref)
            pytest.fail(f"{name} {form}: whole-text alignment differs at {i}: {x} vs {y}")


# --- every code point ------------------------------------------------------------

ALL_CPS = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
_MAY_CHANGE_CPS = []


def _may_change_cps():
    if not _MAY_CHANGE_CPS:
        _MAY_CHANGE_CPS.append({c for c in ALL_CPS if _may_change(c)})
    return _MAY_CHANGE_CPS[0]


@pytest.mark.parametrize("form", FORMS)
def test_every_code_point(norm, form):
    # All code points in order, in one string: marks meet their block
    # neighbours, and unassigned / post-9.0 chars go through too.
    out, al = norm.normalize(ALL_CPS, form, want_alignments=True)
    exp = hf_text(ALL_CPS, form)
    assert out == exp, f"{form}: text differs at {first_diff(out, exp)}"
    ref = hf_offsets([ALL_CPS], form)[0]
    if al != ref:
        i, x, y = first_diff(al, ref)
        pytest.fail(f"{form}: alignment differs at output {i}: {x} vs {y}")
    # Each code point alone.  One call per side on a newline-separated list
    # ("\n" is inert, so the pieces are independent; no mapping yields it).
    cps = [c for c in ALL_CPS if c != "\n"]
    joined = "\n".join(cps)
    hf_each = hf_text(joined, form).split("\n")
    ours_each = norm.normalize(joined, form)[0].split("\n")
    assert len(hf_each) == len(cps)
    if ours_each != hf_each:
        i = first_diff(ours_each, hf_each)[0]
        pytest.fail(f"{form}: U+{ord(cps[i]):04X} gives {ascii(ours_each[i])}, HF {ascii(hf_each[i])}")
    # The same, one call per char: a single char skips the scan for interesting chars.
    alone_each = [norm.normalize(c, form)[0] for c in cps]
    if alone_each != hf_each:
        i = first_diff(alone_each, hf_each)[0]
        pytest.fail(f"{form}: U+{ord(cps[i]):04X} alone gives {ascii(alone_each[i])}, HF {ascii(hf_each[i])}")
    # Alignments of each char alone, wherever they can differ from identity.
    maybe = _may_change_cps()
    alone = [c for c, h in zip(cps, hf_each) if h != c or c in maybe]
    check_batch(norm, alone, form, "single")


def test_unicode9_pins(norm):
    # Assigned or changed after Unicode 9.0: HF leaves them alone.
    for s in ("\U0001F16C", "\uA7F2", "\U0001CCF0", "\u0898", "\U00011938"):
        for f in FORMS:
            assert norm.normalize(s, f)[0] == s
            assert hf_text(s, f) == s


# --- generated strings --------------------------------------------------------------

def _alphabet():
    marks9 = [c for c in range(0x300, 0x370)] + [0x0483, 0x0591, 0x05B0, 0x05B8, 0x05BC, 0x05C1,
                                                 0x064B, 0x0650, 0x0651, 0x0670, 0x093C, 0x094D,
                                                 0x0951, 0x09BC, 0x09CD, 0x0E38, 0x0E39, 0x0E48,
                                                 0x0E49, 0x0F71, 0x0F72, 0x0F74, 0x0F7A, 0x0F80,
                                                 0x1DC0, 0x1DCE, 0x20D0, 0x20E3, 0x302A, 0x302F,
                                                 0x3099, 0x309A, 0xFE20, 0x1D165, 0x1D16D, 0x1E944]
    # Non-zero ccc only in later Unicode versions (plain starters in 9.0).
    post9 = [0x07FD, 0x0898, 0x089C, 0x08CA, 0x08D3, 0x09FE, 0x0C3C, 0x0D3B, 0x1715, 0x1ABF,
             0x1AC1, 0x1ACE, 0x1DF6, 0x1DFA, 0xA82C, 0x10D24, 0x10EAB, 0x10F46, 0x10F82,
             0x11070, 0x1133B, 0x1145E, 0x11839, 0x1193D, 0x119E0, 0x11A34, 0x11D42, 0x16FF0,
             0x1E130, 0x1E2AE, 0x1E2EC]
    bases = [ord(c) for c in "aAeEiIoOuUcCnNsSzZyYwWxqgkKrRlL \u00e6\u00f8\u03b1\u03b7\u03c9\u0399\u0435\u0438\u0433"]
    precomposed = [0x00C5, 0x00E9, 0x00F1, 0x01D5, 0x1E09, 0x1E69, 0x1EC7, 0x1F85, 0x1FB7,
                   0x0385, 0x03AB, 0x0419, 0x0439, 0x0959, 0x09CB, 0x0B4C, 0x0BCA, 0x0CCB,
                   0x0DDD, 0x0F73, 0x0F75, 0x0F81, 0x0344, 0x0343, 0x0340, 0x0374, 0x037E,
                   0x212B, 0x2126, 0x2ADC, 0x1D15E, 0x1D160, 0x1D1BC, 0xF900, 0x2F800, 0x2FA1D,
                   0x304C, 0x30DD, 0x1026, 0x1B06, 0x1B3B, 0x1134B, 0x114BB, 0x115BA, 0x11131]
    seconds0 = [0x09BE, 0x09D7, 0x0B3E, 0x0B56, 0x0B57, 0x0BBE, 0x0BD7, 0x0CC2, 0x0CD5,
                0x0CD6, 0x0D3E, 0x0D57, 0x0DCF, 0x0DDF, 0x102E, 0x1B35, 0x11127, 0x1133E,
                0x11357, 0x114B0, 0x114BA, 0x114BD, 0x115AF]
    firsts = [0x0995, 0x09C7, 0x0B47, 0x0BC6, 0x0BC7, 0x0BD2, 0x0C46, 0x0CBF, 0x0CC6, 0x0CCA,
              0x0D46, 0x0D47, 0x0DD9, 0x0DDC, 0x1025, 0x1B05, 0x11131, 0x11132, 0x11347,
              0x114B9, 0x115B8, 0x115B9, 0x0928, 0x3046, 0x30A6]
    hangul = [0xAC00, 0xAC01, 0xAE4C, 0xD7A3, 0xD4DB, 0xB098, 0xB0A0]
    jamo = ([0x1100, 0x1101, 0x1112, 0x1113, 0x115F, 0x1160, 0x1161, 0x1175, 0x1176, 0x11A7,
             0x11A8, 0x11C2, 0x11C3, 0x3131, 0x314F, 0xFFA1, 0xFFC2]
            + [0x1100 + i for i in range(19)] + [0x1161 + i for i in range(21)])
    compat = [0xFB00, 0xFB01, 0xFB03, 0xFB06, 0x01C4, 0x01C6, 0x0132, 0x2460, 0x2473, 0x247D,
              0x2488, 0x00B2, 0x00B9, 0x2083, 0x00BD, 0x2153, 0x2161, 0x217B, 0xFF21, 0xFF41,
              0xFF10, 0xFF61, 0xFF76, 0xFF9E, 0xFF9F, 0xFFE5, 0x3000, 0x00A0, 0x2002, 0x00A8,
              0x00AF, 0x00B4, 0x02DC, 0x1E9B, 0x017F, 0x03D3, 0x03D4, 0x1D400, 0x1D7CE, 0x1D7FF,
              0x1F100, 0x1F12A, 0x1F190, 0x3200, 0x320E, 0x3250, 0x327C, 0x327E, 0x32FF, 0x33FF,
              0xFDFA, 0xFDFB, 0xFE49, 0xFB20, 0xFB4F, 0x2F00, 0x2FD5, 0x3192, 0x33C0, 0x2474,
              0x1F16A, 0x1F16B, 0x1F16C, 0xA7F2, 0xA7F8, 0x1CCF0, 0x1E030, 0x0F77, 0x0F79, 0x0E33,
              0x0EB3, 0x0EDC, 0x2126, 0x2100, 0x2103, 0x2109, 0x3099, 0x309B, 0x309C]
    pools = [marks9, post9, bases, precomposed, seconds0, firsts, hangul, jamo, compat]
    # Everything the running Python (Unicode 14) calls decomposable or
    # combining: covers 9.0 entries and later additions alike.
    later = [c for c in range(0x80, 0x30000)
             if not 0xD800 <= c < 0xE000
             and (unicodedata.combining(chr(c)) or unicodedata.decomposition(chr(c)))]
    pools.append(later)
    return [[chr(c) for c in p] for p in pools]


def _random_strings(n, seed):
    rng = random.Random(seed)
    pools = _alphabet()
    out = []
    for _ in range(n):
        k = rng.randint(1, 12)
        chosen = rng.sample(pools, rng.randint(1, 3))
        out.append("".join(rng.choice(rng.choice(chosen)) for _ in range(k)))
    # Marks in every order after one base: exercises the stable sort.
    marks = ["\u0301", "\u0323", "\u031b", "\u0345", "\u05b0", "\u0f71", "\u0f72", "\u093c",
             "\u094d", "\u0e48", "\u0327", "\u0308", "\u0f73", "\u0344"]
    for _ in range(n // 4):
        seq = rng.sample(marks, rng.randint(2, 5))
        out.append(rng.choice("aeouAEOUω\u0391\u1f00\u0915") + "".join(seq))
    return out


@pytest.mark.parametrize("form", FORMS)
def test_random_strings(norm, form):
    texts = _random_strings(12000, seed=1234 + FORMS.index(form))
    check_batch(norm, texts, form, "random")
    # The same strings glued together: runs now meet their neighbours.
    glued = ["".join(texts[i:i + 40]) for i in range(0, len(texts), 40)]
    check_batch(norm, glued, form, "glued")


def test_alignment_quirks(norm):
    # Positional matching after reordering: HF hands ranges out in
    # consumption order, not by the char's true origin.
    assert norm.normalize("a\u0301\u0323", "NFD", want_alignments=True) == (
        "a\u0323\u0301", [(0, 1), (1, 2), (2, 3)])
    # Pieces of one char share its range; a composed pair takes the first.
    assert norm.normalize("\u1e09", "NFD", want_alignments=True)[1] == [(0, 1)] * 3
    assert norm.normalize("e\u0301x", "NFC", want_alignments=True) == ("\u00e9x", [(0, 1), (2, 3)])
    assert norm.normalize("\ufb01", "NFKC", want_alignments=True) == ("fi", [(0, 1), (0, 1)])
    for s in ("a\u0301\u0323", "\u1e09", "e\u0301x", "\ufb01", "\u0301\u0f73", "\u0f73\u0f71"):
        for f in FORMS:
            assert norm.normalize(s, f, want_alignments=True) == (
                hf_text(s, f), hf_offsets([s], f)[0])


def test_single_chars_skip_the_scan():
    """A one-char text never builds the scan regex (~14 ms): BERT's per-char table asks that way."""
    n = UnicodeNormalizer(memoryview(build_norm_blob({"NFD", "NFC"})))
    for form in ("NFD", "NFC"):
        for c in ("\u00e9", "\u4e00", "\u0301", "\uac00", "\U0001d15e"):
            out, al = n.normalize(c, form, want_alignments=True)
            assert out == hf_text(c, form) and al == hf_offsets([c], form)[0]
            assert (out is c) == (out == c)
    assert not n._patterns
    assert n.normalize("\u00e9a", "NFD")[0] == "e\u0301a" and "NFD" in n._patterns


def test_fast_paths(norm):
    s = "plain ascii"
    assert norm.normalize(s, "NFC") == (s, None)
    assert norm.normalize("", "NFKD", want_alignments=True) == ("", [])
    s = "漢字かな한국어 déjà vu \U0001F600"
    assert norm.normalize(s, "NFC", want_alignments=True) == (s, [(i, i + 1) for i in range(len(s))])
    # Unchanged text comes back as the same object, so callers can skip work.
    assert norm.normalize(s, "NFC")[0] is s
    s2 = "\u0915\u094d\u0937"  # a mark run that needs no change
    assert norm.normalize(s2, "NFC")[0] is s2
    # Longer than the shared identity prefix: the rest is built on the fly.
    long = "é" * 40000 + "e\u0301"
    out, al = norm.normalize(long, "NFC", want_alignments=True)
    assert out == "é" * 40001
    assert al == [(i, i + 1) for i in range(40001)]


# Astral chars where each form has work (decompositions, marks, CJK compatibility ideographs),
# among astral and BMP chars that have none.
_ASTRAL_POOL = ([chr(c) for c in range(0x1D150, 0x1D1C4)] + [chr(c) for c in range(0x2F800, 0x2F810)]
                + [chr(c) for c in (0x101FD, 0x10A0D, 0x11100, 0x1F600, 0x20000, 0x10FFFD)]
                + list("ae\u0301\u0308\u4e00 "))


def test_class_ranges_parse_only_pattern_texts():
    """_parse_class reads pattern_texts()'s ranges (and makes the BMP's membership table) and
    refuses any other text (a file's stored pattern that is not of that form is then run by the
    regex alone)."""
    from tokmap.runtime.normalize_unicode import _parse_class

    lo, hi, bmp = _parse_class("[\\U00000300-\\U0000036f\\U00000370\\U00010000\\U0001d15e-\\U0001d164]+")
    assert lo.tolist() == [0x300, 0x370, 0x10000, 0x1D15E] and hi.tolist() == [0x36F, 0x370, 0x10000, 0x1D164]
    assert bmp.nonzero()[0].tolist() == list(range(0x300, 0x371))  # the BMP table: adjacent ranges too
    for bad in ("[\\U00000300-\\U0000036f]", "[a-z]+", "[\\U00000300-\\U0000036fx]+", "[]+",
                "[\\U00000400-\\U00000300]+", "[\\U00000300-\\U00000400\\U00000350]+"):
        assert _parse_class(bad) is None, bad


def _spans(got):
    starts, ends = got
    return list(zip(starts.tolist(), ends.tolist()))


@pytest.mark.parametrize("form", FORMS)
def test_long_texts_classified_whole(norm, form, monkeypatch):
    """From NP_RUNS_MIN chars on, normalize() finds the runs of interesting chars with numpy over
    the whole text (_class_runs) instead of the scan regex (whose exact class tests an astral char
    against each astral range in turn): the same runs on every corpus, every code point in one
    string and random astral-heavy strings; the same normalize() result either way, and that of
    HF (test_corpus checks the corpora against HF too); and the numpy path did run."""
    import tokmap.runtime.normalize_unicode as nu

    scan, exact = norm._pattern(form)
    ranges = norm._exact_ranges(exact)
    assert ranges is not None  # the stored pattern is pattern_texts()'s
    rng = random.Random(91 + FORMS.index(form))
    pool = _ASTRAL_POOL + list("\u00e9\u0915\u094d\u0937\uac00\u1100\u1161\u11a8\u3099\u304b\u212b\uf900")
    texts = [_corpus(c) for c in CORPORA] + [ALL_CPS]
    texts += ["".join(rng.choice(pool) for _ in range(rng.randrange(1, 3000))) for _ in range(60)]
    for t in texts:
        want = list(norm._runs(t, 0, scan, exact))
        assert _spans(nu._class_runs(t, *ranges)) == want
        # Blocks of a few chars: runs cut at many block edges, joined again
        monkeypatch.setattr(nu, "RUN_BLOCK", 1 + len(t) % 7)
        assert _spans(nu._class_runs(t[:5000], *ranges)) == list(norm._runs(t[:5000], 0, scan, exact))
        monkeypatch.undo()
    bulk = []
    real = nu._class_runs
    monkeypatch.setattr(nu, "_class_runs", lambda *a: bulk.append(1) or real(*a))
    for k, t in enumerate(texts[-20:] + [_corpus("code")]):
        monkeypatch.setattr(nu, "NP_RUNS_MIN", 10**9)
        monkeypatch.setattr(nu, "NP_RUNS_MIN_IMPORT", 10**9)
        by_regex = norm.normalize(t, form, want_alignments=True)
        monkeypatch.setattr(nu, "NP_RUNS_MIN", 0)
        monkeypatch.setattr(nu, "NP_RUNS_MIN_IMPORT", 0)
        assert norm.normalize(t, form, want_alignments=True) == by_regex
        assert norm.normalize(t, form) == (by_regex[0], None)  # (_text_of_runs)
        if k < 8:
            assert by_regex == (hf_text(t, form), hf_offsets([t], form)[0])
    assert len(bulk) == 42  # (each text twice: with alignments and without)
