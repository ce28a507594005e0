"""The unicode normalizer's scan patterns stored at export (exporter/norm_tables.pattern_fields).

A runtime normalizing its first non-ASCII text otherwise builds the (scan, exact) regex texts from
the tables and compiles them (~6-14 ms, on a cold encode). Stored, they must be the very texts the
runtime would build, their engine code must match what `re.compile` of the text matches, a file
from another engine must fall back to compiling the stored text, one without them to building,
and damaged fields or blobs must be refused naming them.
"""

from __future__ import annotations

import json
import random
import re

import pytest

import tokmap
from tokmap import mtok
from tokmap.exporter.norm_tables import build_norm_blob, pattern_fields
from tokmap.runtime.normalize_unicode import UnicodeNormalizer

from test_hostile_files import Container, check_error, with_meta, with_section, write

FORMS = ("NFC", "NFD", "NFKC", "NFKD")
TEXT = "Caf\u00e9 \u00c5ngstr\u00f6m \u1e9b\u0323 \ufb01 \u2460 \uac00\u11a8 \u65e5\u672c \U0001d15e \U0001f600 e\u0301"


class _Blobs:
    def __init__(self):
        self.items = []

    def add(self, dtype, payload):
        self.items.append((dtype, payload))
        return len(self.items) - 1


def _every_code_point(seed: int) -> str:
    cps = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    random.Random(seed).shuffle(cps)
    return "".join(map(chr, cps))


@pytest.mark.parametrize("form", FORMS)
def test_stored_texts_and_code_are_the_runtimes(form):
    """The stored texts are what the runtime builds; their code matches what re.compile of them
    matches, on every code point (shuffled: runs of every length) and on marks in order."""
    import _sre

    table = build_norm_blob(set(FORMS))
    blobs = _Blobs()
    fields = pattern_fields(table, form, blobs)
    built = UnicodeNormalizer(table).pattern_texts(form)
    text = _every_code_point(7) + "".join(map(chr, range(0x300, 0x370))) + TEXT
    for k, want in zip(("scan", "exact"), built):
        stored = blobs.items[fields[k]][1].decode("ascii")
        assert stored == want
        info = fields[k + "_code"]
        code = list(memoryview(blobs.items[info["blob"]][1]).cast("I"))
        rx = _sre.compile(stored, info["flags"], code, 0, {}, ())
        assert rx.findall(text) == re.compile(stored).findall(text)


def _unicode_step(meta):
    return next(s for s in meta["normalizer"] if s["type"] == "unicode")


@pytest.fixture
def no_building(monkeypatch):
    """arm(): from then on, building the patterns at runtime fails the test; the texts compiled
    are listed in the list arm() returns. (Armed after exporting: the exporter builds them.)"""

    def arm():
        compiled = []

        def build(self, form):
            raise AssertionError("pattern texts built although the file stores them")

        real = re.compile
        monkeypatch.setattr(UnicodeNormalizer, "pattern_texts", build)
        monkeypatch.setattr(re, "compile", lambda p, *a: (compiled.append(p) if p.startswith("[\\U") else None)
                            or real(p, *a))
        return compiled

    return arm


@pytest.mark.parametrize("name", ["qwen3", "minilm"])
def test_first_non_ascii_text_builds_nothing(name, exported, testdata, corpus, no_building):
    """Qwen 3 (NFC) and MiniLM (BERT's NFD): a fresh tokenizer's first non-ASCII texts take the
    stored code; ids equal tokenizers'."""
    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(str(testdata / "models" / name / "tokenizer.json"))
    ref.no_truncation()
    ref.no_padding()
    path = exported(name)
    assert "scan_code" in _unicode_step(tokmap.load(path).meta)["patterns"]
    compiled = no_building()
    tok = tokmap.load(path)
    for text in (TEXT, TEXT[:12], corpus("multi")[:100_000]):
        if tok.meta.get("truncation"):
            assert tok.encode_full(text).ids[:5] == ref.encode(text).ids[:5]
        else:
            assert tok.encode(text) == ref.encode(text).ids
    assert not compiled


def _edited(exported, tmp_path, edit, name):
    path = exported("qwen3")
    return path, write(tmp_path, with_meta(path, lambda m: [edit(_unicode_step(m)), None][1]), name)


@pytest.mark.parametrize("field, value", [("magic", 1), ("python", "2.7"), ("pattern_crc32", 0)])
def test_code_of_another_engine_compiles_the_stored_text(exported, tmp_path, no_building, field, value):
    path, p = _edited(exported, tmp_path, lambda s: s["patterns"]["scan_code"].__setitem__(field, value),
                      f"other-{field}.mtok")
    want = tokmap.load(path).encode(TEXT)
    compiled = no_building()
    assert tokmap.load(p).encode(TEXT) == want
    assert len(compiled) == 1 and compiled[0].startswith("[")  # the scan text; exact from its code


def test_file_without_patterns_builds_them(exported, tmp_path):
    path, p = _edited(exported, tmp_path, lambda s: s.pop("patterns"), "no-patterns.mtok")
    tok = tokmap.load(p)
    assert tok.encode(TEXT) == tokmap.load(path).encode(TEXT)


@pytest.mark.parametrize("value, match", [({"scan": "1", "exact": 1}, "patterns.scan must be a blob number"),
                                          ({"scan": 1}, "patterns.exact must be a blob number"),
                                          ([], "patterns must be an object")])
def test_bad_patterns_field_is_refused_at_load(exported, tmp_path, value, match):
    _path, p = _edited(exported, tmp_path, lambda s: s.__setitem__("patterns", value), "bad-field.mtok")
    with pytest.raises(tokmap.FormatError) as ei:
        tokmap.load(p)
    check_error(ei.value, p, "meta", Container(p.read_bytes()).entry(mtok.SECTION_META)["offset"], match=match)


def test_pattern_naming_no_blob_is_refused(exported, tmp_path):
    _path, p = _edited(exported, tmp_path, lambda s: s["patterns"].__setitem__("exact", 10 ** 6), "no-blob.mtok")
    with pytest.raises(tokmap.FormatError) as ei:
        tokmap.load(p).encode(TEXT)
    check_error(ei.value, p, "meta", None, match="patterns.exact names no blob")


def _blob_of(path, key):
    c = Container(path.read_bytes())
    step = _unicode_step(json.loads(c.payload(mtok.SECTION_META)))
    ref = step["patterns"][key]
    return c, mtok.BLOB_BASE + (ref["blob"] if isinstance(ref, dict) else ref)


@pytest.mark.parametrize("key", ["scan", "exact_code"])
def test_flipped_bit_in_a_pattern_blob_is_refused(exported, tmp_path, key):
    path = exported("qwen3")
    c, sid = _blob_of(path, key)
    e = c.entry(sid)
    c.data[e["offset"] + e["length"] // 2] ^= 0x04
    p = write(tmp_path, bytes(c.data), f"flipped-{key}.mtok")
    with pytest.raises(tokmap.FormatError) as ei:
        tokmap.load(p).encode(TEXT)
    check_error(ei.value, p, mtok.section_name(sid), e["offset"], match="checksum")


@pytest.mark.parametrize("text, match", [(b"[a-", "not a run of one character class"),
                                         (b"(a+)+$", "not a run of one character class"),
                                         (b"[\\U00000041]+\xff", "not a run of one character class"),
                                         (b"[\\U0000ffff-\\U00000041]+", "does not compile")])
def test_stored_text_that_is_not_a_class_run_is_refused(exported, tmp_path, text, match):
    """A stored text other than what the exporter writes (checksums recomputed, so its code, made
    for another text, is not used): refused before it runs -- a crafted pattern could backtrack
    for ever -- or when it does not compile."""
    path = exported("qwen3")
    _c, sid = _blob_of(path, "scan")
    data = with_section(path, sid, text, mtok.U8)
    p = write(tmp_path, data, "bad-text.mtok")
    with pytest.raises(tokmap.FormatError) as ei:
        tokmap.load(p).encode(TEXT)
    check_error(ei.value, p, mtok.section_name(sid), Container(data).entry(sid)["offset"], match=match)
