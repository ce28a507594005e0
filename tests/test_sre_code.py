"""The split pattern's engine code stored at export (exporter/sre_code.py, runtime/sre_load.py).

The stored code must be the pattern re.compile would build (same matches on whole corpora), must
serve without compiling, and must give way to compiling the text when made by another engine or
for another text. A damaged code blob is a FormatError naming it, never other pieces.
"""

from __future__ import annotations

import json
import re
import zlib

import pytest

import tokmap
from tokmap import mtok
from tokmap.runtime import pretokenizers

from test_hostile_files import Container, check_error, with_meta, with_section, write

MODELS = ["llama3", "gpt4o", "cl100k_base", "o200k_base"]


def _split_step(meta):
    return next(s for s in meta["pre_tokenizer"] if s.get("type") == "split")


def _step(path):
    tok = tokmap.load(path)
    tok.encode("x")
    return tok.pipeline.fast_split


@pytest.mark.parametrize("name", MODELS)
def test_stored_code_serves_and_matches_compiled_text(name, exported, corpus, monkeypatch):
    step = _step(exported(name))
    assert isinstance(step._bmp_code, dict) and step._bmp_code["magic"] == re._constants.MAGIC

    def no_compile(*a, **k):
        raise AssertionError("regex_bmp was compiled although its code is stored")

    monkeypatch.setattr(pretokenizers.re, "compile", no_compile)
    stored = step.bmp_regex()
    monkeypatch.undo()
    compiled = re.compile(step.bmp)
    assert (stored.pattern, stored.flags, stored.groups) == (compiled.pattern, compiled.flags, compiled.groups)
    for c in ("en", "code", "wagahai", "multi"):
        text = corpus(c)[:400_000]
        assert stored.findall(text) == compiled.findall(text), c


def _reloaded(tmp_path, data, name):
    p = write(tmp_path, data, name)
    tok = tokmap.load(p)
    tok.encode("x")
    return p, tok.pipeline.fast_split


@pytest.mark.parametrize("field, value", [("magic", 1), ("python", "2.7"), ("codesize", 8),
                                          ("pattern_crc32", 0)])
def test_code_of_another_engine_or_text_is_not_used(exported, tmp_path, corpus, field, value):
    path = exported("llama3")
    _p, step = _reloaded(tmp_path, with_meta(path, lambda m: _split_step(m)["regex_bmp_code"].__setitem__(field, value)),
                         f"other-{field}.mtok")
    calls = []
    real = re.compile
    pretokenizers.re.compile = lambda p, *a: calls.append(p) or real(p, *a)
    try:
        rx = step.bmp_regex()
    finally:
        pretokenizers.re.compile = real
    assert calls == [step.bmp]  # compiled from the text
    text = corpus("multi")[:200_000]
    assert rx.findall(text) == _step(path).bmp_regex().findall(text)


def _code_blob(path):
    c = Container(path.read_bytes())
    meta = json.loads(c.payload(mtok.SECTION_META))
    sid = mtok.BLOB_BASE + _split_step(meta)["regex_bmp_code"]["blob"]
    return c, sid


def test_flipped_bit_in_code_is_refused(exported, tmp_path):
    """One bit of a class bitmap changed, the section's crc32 left as written: refused, naming it."""
    path = exported("llama3")
    c, sid = _code_blob(path)
    e = c.entry(sid)
    at = e["offset"] + e["length"] - 64  # inside the last class's bitmap blocks
    c.data[at] ^= 0x10
    p, step = _reloaded(tmp_path, bytes(c.data), "flipped-code.mtok")
    with pytest.raises(tokmap.FormatError) as ei:
        step.bmp_regex()
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
        step.bmp_regex()
    off = Container(data).entry(sid)["offset"]
    check_error(ei.value, p, mtok.section_name(sid), off, match="not valid engine code")
    assert zlib.crc32(bytes(words)) == Container(data).entry(sid)["crc32"]


@pytest.mark.parametrize("blob", ["0", None, 10 ** 6])
def test_code_naming_no_blob_is_refused(exported, tmp_path, blob):
    path = exported("llama3")
    p, step = _reloaded(tmp_path, with_meta(path, lambda m: _split_step(m)["regex_bmp_code"].__setitem__("blob", blob)),
                        "no-blob.mtok")
    with pytest.raises(tokmap.FormatError) as ei:
        step.bmp_regex()
    check_error(ei.value, p, "meta", None, match="names no blob")
