"""BERT's whole-stretch path by whitespace chunks (runtime/fastpath.Chunks) and WordPiece's
token_text section, against tokenizers on the real minilm file.

Chunks claims a stretch's ids are its str.split() chunks' ids joined, each chunk's words cut apart
from one batch translate at a separator char; the stretches it must refuse (a separator in the
text, a char str.split cuts at that the tables delete, marks needing their neighbours, unspaced
text) take the word path. A new stretch goes by its words (Chunks.new_words, bytes operations
where it can), one met twice before by chunks (repeats.MEETINGS). The tests here are about
chunks, so they set MEETINGS to 1 and encode a text twice; test_third_meeting_goes_by_chunks
keeps the runtime's own count.
Documents are compared whole, with the file's truncation turned off.
"""

from __future__ import annotations

import json
import pathlib
import random
import unicodedata

import pytest

import tokmap
from tokmap import mtok
from tokmap.runtime import fastpath, repeats
from tokmap.runtime.models import wordpiece

from conftest import export_variant, model_source
from test_hostile_files import check_error, with_section, write

PIECES = ["Hello,", "world!", "don't", "(a,b)", "x.y.z", "naïve", "café", "ÅNGSTRÖM", "中文", "日本語です",
          "a\u0301\u0323", "e\u0323\u0302", "\u0301x", "[UNK]", "[CLS]x", "##ing", "...", "--", "\u00ad", "x" * 70,
          "unbelievably", "tokenization", "\U0001f44d", "١٢٣", "ﬁne", "\x00\x01", "\ufffd", "a\u200bb", "\ue000"]
SPACES = [" ", "  ", "\n", "\t", " \n ", "\r\n", "\u3000", "\xa0", "\u2028"]
HARD = ["\x1c", "\x1f", "\x85", "\x0b"]  # chars Chunks must not cut at: BERT deletes them


MEETINGS = repeats.MEETINGS  # the runtime's own count, before the fixture below changes it


@pytest.fixture(autouse=True)
def _chunks_from_the_second_meeting(monkeypatch):
    monkeypatch.setattr(repeats, "MEETINGS", 1)


@pytest.fixture(scope="module")
def minilm(testdata, tmp_path_factory):
    doc = json.loads(model_source(testdata, "minilm").read_text(encoding="utf-8"))
    doc["truncation"] = doc["padding"] = None
    return export_variant(doc, tmp_path_factory.mktemp("chunks"), "minilm-whole")


def _document(rng, n, hard=0.0):
    out = []
    for _ in range(n):
        out.append(rng.choice(PIECES))
        out.append(rng.choice(HARD) if rng.random() < hard else rng.choice(SPACES))
    return "".join(out)


def _spy(monkeypatch):
    """Counts of chunks filled, of stretches that took the word path (Chunks.ids handing the whole
    stretch to stretch_words), and of chunks a fill sent that way alone."""
    seen = {"fill": 0, "words": 0, "alone": 0}
    real_fill, real_init = fastpath.Chunks._fill, fastpath.Chunks.__init__

    def fill(self, chunks, sep):
        seen["fill"] += len(chunks)
        return real_fill(self, chunks, sep)

    def init(self, memo, stretch_words, *rest):
        def words(stretch):
            seen["alone" if self.filling else "words"] += 1
            return stretch_words(stretch)

        real_init(self, memo, words, *rest)
        self.filling = False

    def filling(self, chunks, sep):
        self.filling = True
        try:
            return fill(self, chunks, sep)
        finally:
            self.filling = False

    monkeypatch.setattr(fastpath.Chunks, "__init__", init)
    monkeypatch.setattr(fastpath.Chunks, "_fill", filling)
    return seen


def test_third_meeting_goes_by_chunks(minilm, corpus, monkeypatch):
    """With the runtime's own count (MEETINGS = 2): a document goes by its words the first and
    second time it comes (the second call pays no filling), by chunks filled then the third time,
    and from the chunk cache alone the fourth; the reference's ids every time."""
    ref, _ = minilm
    monkeypatch.setattr(repeats, "MEETINGS", MEETINGS)
    assert MEETINGS == 2
    seen = _spy(monkeypatch)
    text = corpus("en")
    tok = tokmap.load(minilm[1].path)
    expect = ref.encode(text).ids
    filled = []
    for _ in range(4):
        assert tok.encode(text) == expect
        filled.append(seen["fill"])
    assert filled[0] == filled[1] == 0 < filled[2] == filled[3]


@pytest.mark.parametrize("corpus_name", ["en", "pride", "code", "wagahai", "utf8seq", "multi"])
def test_documents_equal_tokenizers(minilm, corpus, corpus_name, monkeypatch):
    ref, _ = minilm
    seen = _spy(monkeypatch)
    text = corpus(corpus_name)[:400_000]
    tok = tokmap.load(minilm[1].path)
    expect = ref.encode(text).ids
    assert tok.encode(text) == expect  # cold: every chunk filled in one batch
    assert tok.encode(text) == expect  # warm: every chunk remembered
    if corpus_name in ("en", "pride", "code"):
        assert seen["fill"] > 1000
    if corpus_name == "wagahai":  # unspaced: the word path
        assert seen["fill"] == 0


@pytest.mark.parametrize("seed", range(6))
def test_mixed_documents(minilm, seed, monkeypatch):
    """Chunks with punctuation, accents, marks that reorder across chars, CJK, deleted controls,
    long chunks; every kind of whitespace; some stretches with a char Chunks must refuse. Each
    document cold and warm, then its lines one call each."""
    ref, _ = minilm
    seen = _spy(monkeypatch)
    rng = random.Random(seed)
    tok = tokmap.load(minilm[1].path)
    docs = [_document(rng, 3000), _document(rng, 3000, hard=0.01), unicodedata.normalize("NFD", _document(rng, 500))]
    for text in docs:
        expect = ref.encode(text).ids
        assert tok.encode(text) == expect
        assert tok.encode(text) == expect
    for line in docs[1].split("\n")[:300]:
        assert tok.encode(line) == ref.encode(line).ids, line
    assert seen["fill"] > 100 and seen["words"] > 0


def test_marks_that_need_their_neighbours(testdata, tmp_path, monkeypatch):
    """NFD that keeps its marks (no strip_accents): a char leaving a mark can be reordered with the
    next char's, so the table raises NeedsContext for it; the chunks holding one take the word
    path alone and the rest stay one batch."""
    seen = _spy(monkeypatch)
    doc = json.loads(model_source(testdata, "minilm").read_text(encoding="utf-8"))
    doc["truncation"] = doc["padding"] = None
    doc["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}]}
    ref, tok = export_variant(doc, tmp_path, "nfd")
    rng = random.Random(9)
    text = _document(rng, 4000) + " a\u0323\u0301 \u1e09\u0323 q\u0301\u0323 "
    for _ in range(2):
        assert tok.encode(text) == ref.encode(text).ids
    assert seen["fill"] > 50 and 0 < seen["alone"] < 20


def test_separator_and_refused_chars_keep_the_word_path(minilm, monkeypatch):
    ref, _ = minilm
    seen = _spy(monkeypatch)
    tok = tokmap.load(minilm[1].path)
    hards = HARD + [_chunks(tok).seps]  # (a text holding every separator candidate)
    for hard in hards:
        text = ("word, " * 50) + f"a{hard}b c{hard} {hard}d" + (" end." * 50)
        assert tok.encode(text) == ref.encode(text).ids, repr(hard)  # new: by its words, one way or another
        before = seen["words"]
        assert tok.encode(text) == ref.encode(text).ids, repr(hard)  # met before: chunks refused
        assert seen["words"] == before + 1
    assert seen["fill"] == 0
    assert set(HARD) <= set(_chunks(tok).bad)
    text = ("word, " * 50) + _chunks(tok).seps[:-1] + " end."  # all but one: that one separates
    for _ in range(2):
        assert tok.encode(text) == ref.encode(text).ids
    assert seen["fill"] > 0


def _chunks(tok):
    from tokmap.runtime import bert

    pipe = tok.pipeline
    memo = bert.chain_memo(pipe.normalizers, bert.segmenter(pipe.pre))
    chunks = fastpath.Chunks(memo, lambda s: [], lambda w: [], lambda w: [])
    chunks._find_chars()
    return chunks


@pytest.mark.parametrize("seed", range(4))
def test_ascii_chunks_through_bytes(minilm, seed, monkeypatch):
    """ASCII chunks take bytes.translate + bytes.replace (fastpath.ascii_plan) instead of the memo:
    the same words for every ASCII char (controls the tables delete, punctuation they isolate,
    upper case they lower), a chunk holding the first separator candidates, and documents mixing
    ASCII and other chunks equal tokenizers'."""
    ref, _ = minilm
    chunks_obj = _chunks(minilm[1])
    chunks_obj._find_chars()
    plan = fastpath.ascii_plan(chunks_obj.memo)
    assert plan is not None and len(plan[2]) == 32  # BERT isolates the 32 ASCII punctuation chars
    rng = random.Random(seed)
    alphabet = [chr(c) for c in range(128) if chr(c) not in fastpath.SPLIT_SPACE]
    sep = chunks_obj.seps[0]
    for _ in range(100):
        chunks = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 12))) for _ in range(rng.randrange(1, 40))]
        chunks.append(plan[3][:3])  # the first candidates taken: another one separates
        got = fastpath.ascii_words(chunks, plan)
        if got is None:  # every candidate present: the caller takes the memo
            assert all(c in "".join(chunks) for c in plan[3])
            continue
        words, by = got
        assert by not in "".join(chunks)
        assert [sep if w == by else w for w in words] == \
            list(filter(None, f" {sep} ".join(chunks).translate(chunks_obj.memo).split(" ")))
    calls = []
    real = fastpath.ascii_words
    monkeypatch.setattr(fastpath, "ascii_words", lambda c, p: calls.append(len(c)) or real(c, p))
    tok = tokmap.load(minilm[1].path)
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 9))) for _ in range(4000)]
    words += rng.sample(PIECES, 10) * 50
    rng.shuffle(words)
    text = " ".join(words)
    for _ in range(2):  # (new: by its words; met before: by chunks)
        assert tok.encode(text) == ref.encode(text).ids
    assert calls and sum(calls) > 1000


def test_split_space_is_what_str_split_cuts_at():
    assert fastpath.SPLIT_SPACE == "".join(c for c in map(chr, range(0x110000)) if c.split() == [])


def test_build_finds_the_refused_chars(minilm):
    """The chars str.split cuts at that BERT's tables delete are refused; the separator is a char
    the tables keep (BERT deletes private-use chars but keeps the noncharacters U+FDD0..)."""
    chunks = _chunks(minilm[1])
    assert set(chunks.bad) == set("\x0b\x0c\x1c\x1d\x1e\x1f\x85")
    assert chunks.seps == "\ufdd0\ufdd1\ufdd2\ufdd3"


def test_encode_many_equals_encode_piece(exported):
    tok = tokmap.load(exported("minilm"))
    model = tok.model
    rng = random.Random(3)
    words = list(model._words())[:3000:7]
    words += [w + "zq" for w in words[:200]] + ["x" * 150, "unbelievably", "中文", "\u00e9t\u00e9", "", "##a"]
    words += ["".join(rng.choice("abcdefghij") for _ in range(rng.randrange(1, 130))) for _ in range(300)]
    words = list(dict.fromkeys(words))
    got = model._encode_many(words)
    fresh = tokmap.load(exported("minilm")).model
    assert got == [fresh.encode_piece(w) for w in words]
    assert any(len(w) > model.max_chars for w in words)


def test_token_text_section(minilm, tmp_path):
    """The exporter writes the tokens' text in sorted order; the dict built from it equals the one
    built a token at a time, and a file without the section encodes alike."""
    path = pathlib.Path(minilm[1].path)
    tok = tokmap.load(path)
    assert mtok.SECTION_TOKEN_TEXT in tok._f.sections
    fast = dict(tok.model._words())
    bare = write(tmp_path, with_section(path, mtok.SECTION_TOKEN_TEXT, None), "bare.mtok")
    slow_tok = tokmap.load(bare)
    assert slow_tok.model._words_from_text() is None
    assert slow_tok.model._words() == fast
    text = "The quick brown fox, naïve café 中文 unbelievably! " * 40
    assert slow_tok.encode(text) == tok.encode(text)


def test_damaged_token_text_is_refused(minilm, tmp_path):
    """(The file without truncation and without its WordPiece hash tables: a document takes the
    whole-stretch path, which then builds the dict.)"""
    path = write(tmp_path, with_section(pathlib.Path(minilm[1].path), mtok.SECTION_WORDPIECE_CONT, None), "tables.mtok")
    path = write(tmp_path, with_section(path, mtok.SECTION_PIECE_HASH, None), "no-tables.mtok")
    sid = mtok.SECTION_TOKEN_TEXT
    good = tokmap.load(path)
    off = good._f.sections[sid][1]
    payload = bytes(good._f.view(sid, mtok.U8))
    data = bytearray(path.read_bytes())
    data[off + 100] ^= 0x01
    cases = [(write(tmp_path, bytes(data), "flip.mtok"), "checksum")]
    lines = payload.split(b"\n")
    cases.append((write(tmp_path, with_section(path, sid, b"\n".join(lines[:-2] + [b""]), mtok.U8), "short.mtok"),
                  "one distinct text per sorted id"))
    dup = lines[:]
    dup[5] = dup[6]
    cases.append((write(tmp_path, with_section(path, sid, b"\n".join(dup), mtok.U8), "dup.mtok"),
                  "one distinct text per sorted id"))
    cases.append((write(tmp_path, with_section(path, sid, payload[:-1] + b"\xff", mtok.U8), "utf8.mtok"),
                  "one distinct text per sorted id"))
    text = " ".join(f"w{k}" for k in range(400))  # 400 distinct words: the dict is built
    for bad, match in cases:
        with pytest.raises(tokmap.FormatError) as ei:
            tokmap.load(bad).encode(text)
        check_error(ei.value, bad, "token_text", tokmap.load(bad)._f.sections[sid][1], match)
    assert wordpiece.DICT_WORDS < 400


def test_separator_belongs_to_its_call(minilm, monkeypatch):
    """Another call on the same tokenizer (another thread) that picks another separator while this
    call's chunks are being filled must not change this call's: the separator is an argument."""
    ref, _ = minilm
    tok = tokmap.load(minilm[1].path)
    seps = _chunks(tok).seps
    assert len(seps) >= 2
    # outer holds the second candidate as a word of its own (it takes the first); inner holds the
    # first (it takes the second, which would be one of outer's words)
    outer = " ".join(f"word{k}, x{k}." for k in range(200)) + f" {seps[1]} end"
    inner = seps[0] + " " + " ".join(f"other{k}; y{k}" for k in range(200))
    for text in (outer, inner):  # met before, so that both go by chunks below
        assert tok.encode(text) == ref.encode(text).ids
    real_fill_batch = fastpath.Chunks._fill_batch
    nested = []

    def fill_batch(self, chunks, sep):
        if not nested:
            nested.append(sep)
            assert tok.encode(inner) == ref.encode(inner).ids  # runs a whole call in between
        return real_fill_batch(self, chunks, sep)

    monkeypatch.setattr(fastpath.Chunks, "_fill_batch", fill_batch)
    assert tok.encode(outer) == ref.encode(outer).ids
    assert nested == [seps[0]]


def test_retry_does_not_encode_the_ascii_chunks_again(testdata, tmp_path, monkeypatch):
    """Each char the table finds needing its neighbours makes _fill try its batch again; the
    non-ASCII chunks are translated first, so the ASCII chunks' words reach the model once, even
    when the word cache cannot hold them between tries (multi.txt: 120K words, six tries)."""
    from tokmap.runtime import models

    doc = json.loads(model_source(testdata, "minilm").read_text(encoding="utf-8"))
    doc["truncation"] = doc["padding"] = None
    doc["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}]}
    ref, tok = export_variant(doc, tmp_path, "nfd")
    monkeypatch.setattr(models, "WORD_CACHE_MAX", 16)  # (emptied after every call)
    sent = []
    real = tok.model._encode_many
    monkeypatch.setattr(tok.model, "_encode_many", lambda words: sent.extend(words) or real(words))
    text = " ".join(f"word{k}, x{k}." for k in range(400)) + " a\u0323\u0301 \u1e09\u0323 q\u0301\u0323 caf\u00e9 "
    assert tok.encode(text) == ref.encode(text).ids
    assert len(tok.pipeline.model.ids_cache) <= 16 and sent.count("word7") == 1


@pytest.mark.parametrize("variant", ["minilm", "nfd-keeps-marks"])
def test_fill_equals_one_char_at_a_time(testdata, tmp_path, variant):
    """ChainMemo.fill (the new chars of a long text worked out together, through the steps over
    them joined by a separator) gives every char what __missing__ gives it alone, and flags the
    same chars as needing their neighbours: every BMP char and a sample past it, on BERT's chain
    and on NFD + Lowercase (which keeps its marks, so chars leaving one are contextual)."""
    from tokmap.runtime.bert import ChainMemo, NeedsContext

    doc = json.loads(model_source(testdata, "minilm").read_text(encoding="utf-8"))
    doc["truncation"] = doc["padding"] = None
    if variant != "minilm":
        doc["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}]}
    _, tok = export_variant(doc, tmp_path, variant)
    from tokmap.runtime import bert

    pipe = tok.pipeline
    memo = bert.chain_memo(pipe.normalizers, bert.segmenter(pipe.pre))  # (as fastpath.build makes it)
    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000]
    chars += [chr(c) for c in range(0x10000, 0x110000, 97)]
    batch = ChainMemo(memo.steps, memo.seg)
    batch.fill(list(map(ord, chars)))
    left = [c for c in chars if ord(c) not in batch and ord(c) not in batch.contextual]
    assert left == [batch._separator()]  # (the separator alone is left to __missing__)
    batch[ord(left[0])]
    one = ChainMemo(memo.steps, memo.seg)
    for c in chars:
        try:
            one[ord(c)]
        except NeedsContext:
            pass
    assert dict(batch) == dict(one) and batch.contextual == one.contextual
    assert len(one) > 60000 and len(one.contextual) > 10


def test_new_text_by_words_then_by_chunks(minilm, corpus, monkeypatch):
    """A long new text goes by its words (no chunk filled), the same text again by chunks (filled
    then), a third time from the chunk cache alone; a text mostly of other chars than ASCII goes by
    chunks at once (new_words declines it). Every call tokenizers' ids."""
    ref, _ = minilm
    seen = _spy(monkeypatch)
    used = []  # whether each new_words call gave the words
    real = fastpath.Chunks.new_words

    def new_words(self, stretch):
        got = real(self, stretch)
        used.append(got is not None)
        return got

    monkeypatch.setattr(fastpath.Chunks, "new_words", new_words)
    tok = tokmap.load(minilm[1].path)
    text = corpus("en")[:60000]
    assert not text.isascii()  # (en.txt opens with a BOM)
    expect = ref.encode(text).ids
    assert tok.encode(text) == expect
    assert seen["fill"] == 0 and used == [True]
    assert tok.encode(text) == expect
    filled = seen["fill"]
    assert filled > 1000
    assert tok.encode(text) == expect
    assert seen["fill"] == filled and used == [True]
    wide = corpus("multi")[:60000]
    assert tok.encode(wide) == ref.encode(wide).ids
    assert used == [True, False] and seen["fill"] > filled


@pytest.mark.parametrize("seed", range(4))
def test_new_words_equal_the_tables(minilm, seed):
    """new_words gives the words the table's str.translate gives (the word path), for ASCII text
    with rare other chars among it (accents, CJK the table pads with spaces, marks, controls it
    deletes, punctuation it isolates), and declines (None) where it cannot be exact or would not
    pay: more than 1/NEW_WIDE_SHARE of the chars not ASCII, or a char needing its neighbours."""
    chunks = _chunks(minilm[1])
    rng = random.Random(seed)
    ascii_ = [chr(c) for c in range(128)]
    rare = ["é", "Ö", "中", "日", "\u0301", "\xa0", "\u3000", "\u00ad", "\U0001f44d", "ﬁ", "\u2028", "！"]
    for _ in range(50):
        n = rng.randrange(300, 3000)
        text = [rng.choice(ascii_) for _ in range(n)]
        for _ in range(rng.randrange(0, n // fastpath.NEW_WIDE_SHARE + 1)):
            text[rng.randrange(n)] = rng.choice(rare)
        text = "".join(text)
        want = list(filter(None, chunks.memo.translate(text).split(" ")))
        assert chunks.new_words(text) == want
    crowded = "abc " * 100 + "é" * (400 // fastpath.NEW_WIDE_SHARE + 2)
    assert chunks.new_words(crowded) is None
    long = [rng.choice(ascii_) for _ in range(40000)]  # (sampled in windows first)
    for at in rng.sample(range(40000), 40000 // (4 * fastpath.NEW_WIDE_SHARE)):  # (well within)
        long[at] = rng.choice(rare)
    text = "".join(long)
    assert chunks.new_words(text) == list(filter(None, chunks.memo.translate(text).split(" ")))
    for at in range(0, 40000, 50):  # one in 50: turned away by the sample
        long[at] = "é"
    assert chunks.new_words("".join(long)) is None


def test_new_words_declines_what_it_cannot_do_exactly(testdata, tmp_path, minilm, monkeypatch):
    """A char whose result needs its neighbours (NFD keeping marks), and a char whose result holds
    another char of the text (a replace would take it again): None, and the call is still exact."""
    doc = json.loads(model_source(testdata, "minilm").read_text(encoding="utf-8"))
    doc["truncation"] = doc["padding"] = None
    doc["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}]}
    ref, tok = export_variant(doc, tmp_path, "nfd-new")
    text = "word, " * 100 + " a\u0323\u0301 " + "end. " * 100
    assert _chunks(tok).new_words(text) is None
    assert tok.encode(text) == ref.encode(text).ids
    chunks = _chunks(minilm[1])
    text = "word " * 200 + "é ü"
    assert chunks.new_words(text) == list(filter(None, chunks.memo.translate(text).split(" ")))
    real = chunks.memo.translate
    monkeypatch.setattr(chunks.memo, "translate", lambda t: "xü" if t == "é" else real(t), raising=False)
    assert chunks.new_words(text) is None
