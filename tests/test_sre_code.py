"""The split pattern's engine code stored at export (exporter/sre_code.py, runtime/sre_load.py).

The stored code must hold the pattern re.compile would build (same matches on whole corpora and on
random text from every plane, its astral guard included), must serve without compiling, and must
give way when made by another engine or for another text. A damaged code blob is a FormatError
naming it, never other pieces.
"""

from __future__ import annotations

import json
import random
import re
import zlib

import pytest

import tokmap
from tokmap import mtok
from tokmap.exporter.sre_code import compile_code, guard_astral_ranges
from tokmap.runtime import pretokenizers

from test_hostile_files import Container, check_error, with_meta, with_section, write

MODELS = ["llama3", "gpt4o", "cl100k_base", "o200k_base"]


def _split_step(meta):
    return next(s for s in meta["pre_tokenizer"] if s.get("type") == "split")


def _step(path):
    tok = tokmap.load(path)
    tok.encode("x")
    return tok.pipeline.fast_split


def _all_planes(n: int, seed: int) -> str:
    """Random code points: any plane, the BMP, ASCII, and the edges of the planes."""
    rng = random.Random(seed)
    edges = [0xFFFF, 0x10000, 0x1FFFF, 0x20000, 0x10FFFF, 0xFFFD, 0x10FFFD, 0xE0001]
    cps = ([rng.randrange(0x110000) for _ in range(n)] + [rng.randrange(0x10000) for _ in range(n // 2)]
           + [rng.randrange(0x80) for _ in range(n // 2)] + edges * 20)
    rng.shuffle(cps)
    return "".join(chr(c) for c in cps if not 0xD800 <= c < 0xE000)


def _guards(words) -> int:
    """How many classes of the code hold the astral guard: NEGATE, RANGE U+0000-U+FFFF."""
    from re._constants import NEGATE, RANGE

    w = list(words)
    return sum(1 for i in range(len(w) - 3) if w[i:i + 4] == [NEGATE, RANGE, 0, 0xFFFF])


@pytest.mark.parametrize("name", MODELS)
def test_stored_full_code_serves_and_matches_compiled_text(name, exported, corpus, monkeypatch):
    path = exported(name)
    step = _step(path)
    assert isinstance(step._full_code, dict) and step._full_code["magic"] == re._constants.MAGIC
    assert "regex_bmp_code" not in _split_step(tokmap.load(path).meta)  # the full code supersedes it

    def no_compile(*a, **k):
        raise AssertionError("a pattern was compiled although its code is stored")

    monkeypatch.setattr(pretokenizers.re, "compile", no_compile)
    stored = step.full_regex()
    monkeypatch.undo()
    compiled = re.compile(step.full)  # plain re: the same classes, astral ranges scanned one by one
    assert (stored.pattern, stored.flags, stored.groups) == (compiled.pattern, compiled.flags, compiled.groups)
    c, sid = _code_blob(path)
    assert _guards(memoryview(c.payload(sid)).cast("I")) >= 2
    for text in [corpus(c)[:400_000] for c in ("en", "code", "wagahai", "multi", "utf8seq")] + [_all_planes(60_000, 3)]:
        assert stored.findall(text) == compiled.findall(text)


# (class, whether re lays it out as BMP bitmap + astral ranges, the layout the guard rewrites)
CLASSES = [(r"[a-zA-Z0-9\U00010400-\U0001044f]", True), (r"[^a-zA-Z0-9\U00010400-\U0001044f]", True),
           (r"[\u00e9\u00f0-\u00f5\u3000-\u30ff\U00020000]", True), (r"[\uff00-\U00010010xz_]", True),
           (r"[\u0100-\u0180\u3000-\u30ff\u4e00\U00010000-\U0001ffff\U00030000]", True),
           (r"[^\u0000-\u00ff\u0300\u0400-\u04ff\U00010000-\U000100ff\U00010300-\U00010fff\U0010fffe]", True),
           (r"[a-z\U00010400-\U0001044f]", False), (r"[\U0001f600-\U0001f64f]", False),
           (r"[^\U0001f600-\U0001f64f]", False), (r"[\w\U00010000]", False)]


@pytest.mark.parametrize("cls, guarded", CLASSES)
def test_guarded_class_holds_the_same_code_points(cls, guarded):
    """Toy classes, positive and negated, in the bitmap layout and in others (a few ranges, only
    astral ones, a category): the code compiled with guard_astral matches exactly the code points
    that re.compile's does."""
    import _sre

    pattern = f"(?:{cls})+"
    info, words = compile_code(pattern, guard_astral=True)
    code = list(memoryview(words).cast("I"))
    assert _guards(code) == guarded
    rx = _sre.compile(pattern, info["flags"], code, 0, {}, ())
    text = _all_planes(40_000, 11) + "".join(map(chr, range(0xFF00, 0x10400)))
    assert rx.findall(text) == re.compile(pattern).findall(text)


def test_guard_rewrite_keeps_other_layouts():
    from re._constants import CATEGORY, LITERAL, NEGATE, RANGE

    mixed = [(RANGE, (0x61, 0x7A)), (RANGE, (0x10000, 0x10010)), (CATEGORY, 1)]
    assert guard_astral_ranges(mixed) == mixed
    bmp = [(NEGATE, None), (LITERAL, 0x41)]
    assert guard_astral_ranges(bmp) == bmp


def _reloaded(tmp_path, data, name):
    p = write(tmp_path, data, name)
    tok = tokmap.load(p)
    tok.encode("x")
    return p, tok.pipeline.fast_split


@pytest.mark.parametrize("field, value", [("magic", 1), ("python", "2.7"), ("codesize", 8),
                                          ("pattern_crc32", 0)])
def test_code_of_another_engine_or_text_is_not_used(exported, tmp_path, corpus, field, value):
    """Full code made by another engine or for another text: not used; the split takes regex_bmp,
    compiled from its text, with stand-ins for astral code points, and gives the same pieces."""
    path = exported("llama3")
    _p, step = _reloaded(tmp_path, with_meta(path, lambda m: _split_step(m)["regex_full_code"].__setitem__(field, value)),
                         f"other-{field}.mtok")
    assert step.full_regex() is None
    calls = []
    real = re.compile
    pretokenizers.re.compile = lambda p, *a: calls.append(p) or real(p, *a)
    try:
        rx = step.bmp_regex()
    finally:
        pretokenizers.re.compile = real
    assert calls == [step.bmp]  # compiled from the text
    text = corpus("multi")[:200_000] + " \U0001f600\U00020000 x"
    d = step.direct(text)
    assert d is not None and d[0] is rx and d[2]  # astral code points replaced by stand-ins
    assert tokmap.load(_p).pipeline.split_fast(text) == tokmap.load(path).pipeline.split_fast(text)


def test_file_without_full_pattern_takes_bmp_path(exported, tmp_path, corpus):
    path = exported("o200k_base")

    def drop(m):
        s = _split_step(m)
        del s["regex_full"], s["regex_full_code"]

    p, step = _reloaded(tmp_path, with_meta(path, drop), "no-full.mtok")
    assert step.full_regex() is None
    text = corpus("code")[:300_000] + "\u00e9 \U0001f600"
    assert step.direct(text)[0] is step.bmp_regex()
    assert tokmap.load(p).encode(text) == tokmap.load(path).encode(text)


def _code_blob(path):
    c = Container(path.read_bytes())
    meta = json.loads(c.payload(mtok.SECTION_META))
    sid = mtok.BLOB_BASE + _split_step(meta)["regex_full_code"]["blob"]
    return c, sid


def test_flipped_bit_in_code_is_refused(exported, tmp_path):
    """One bit of a class's astral ranges changed, the section's crc32 left as written: refused,
    naming it (the engine's own check would pass it)."""
    path = exported("llama3")
    c, sid = _code_blob(path)
    e = c.entry(sid)
    at = e["offset"] + e["length"] - 64  # inside the last class's ranges
    c.data[at] ^= 0x10
    p, step = _reloaded(tmp_path, bytes(c.data), "flipped-code.mtok")
    with pytest.raises(tokmap.FormatError) as ei:
        step.full_regex()
    check_error(ei.value, p, mtok.section_name(sid), e["offset"], match="checksum")


def test_invalid_code_with_valid_checksum_is_refused(exported, tmp_path):
    """Code the engine would not run (a jump past the end), checksums recomputed: FormatError."""
    path = exported("llama3")
    c, sid = _code_blob(path)
    words = bytearray(c.payload(sid))
    words[4:8] = (10 ** 8).to_bytes(4, "little")  # INFO's skip: far past the code's end
    data = with_section(path, sid, bytes(words), mtok.U32)
    p, step = _reloaded(tmp_path, data, "invalid-code.mtok")
    with pytest.raises(tokmap.FormatError) as ei:
        step.full_regex()
    off = Container(data).entry(sid)["offset"]
    check_error(ei.value, p, mtok.section_name(sid), off, match="not valid engine code")
    assert zlib.crc32(bytes(words)) == Container(data).entry(sid)["crc32"]


@pytest.mark.parametrize("blob", ["0", None, 10 ** 6])
def test_code_naming_no_blob_is_refused(exported, tmp_path, blob):
    path = exported("llama3")
    p, step = _reloaded(tmp_path, with_meta(path, lambda m: _split_step(m)["regex_full_code"].__setitem__("blob", blob)),
                        "no-blob.mtok")
    with pytest.raises(tokmap.FormatError) as ei:
        step.full_regex()
    check_error(ei.value, p, "meta", None, match="names no blob")
