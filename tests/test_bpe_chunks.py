"""Long pieces merged as overlapping chunks (runtime/models/bpe_chunks.py) must give exactly the ids
of merging the whole piece: against the references on real models (random letters, CJK runs,
mixed scripts, periodic text), and on random toy vocabularies with shuffled ranks where chunks
as small as a few bytes force the re-merge of neighbours that share no token.
Each test also checks that the chunked path did run (and, where asked for, re-merged), so a
change that quietly sends every piece to the old merge fails here.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import model_source
from test_atomic_chars import CHARS, export_toy
from test_conformance import Ref

import tokmap
from tokmap.runtime.models import bpe, bpe_batch, bpe_chunks


@pytest.fixture
def spy(monkeypatch):
    """Counts of chunked merges that glued (first_try: with no re-merge), that gave up, and of
    re-merge rounds. (A piece whose chunks all had to be joined again is still exact, so only
    first_try shows that chunks really were glued.)"""
    seen = {"glued": 0, "first_try": 0, "gave_up": 0, "remerged": 0}
    merge_pieces, glue = bpe_chunks.merge_pieces, bpe_chunks.glue

    def counting_merge_pieces(*a, **k):  # (merge_piece is merge_pieces of one piece)
        before = seen["remerged"]
        got = merge_pieces(*a, **k)
        for ids in got:
            seen["glued" if ids is not None else "gave_up"] += 1
            seen["first_try"] += ids is not None and seen["remerged"] == before
        return got

    def counting_glue(*a, **k):
        out, failed, kept = glue(*a, **k)
        seen["remerged"] += out is None
        return out, failed, kept

    monkeypatch.setattr(bpe_chunks, "merge_pieces", counting_merge_pieces)
    monkeypatch.setattr(bpe_chunks, "glue", counting_glue)
    return seen


def _texts(rng: random.Random, n: int) -> dict[str, str]:
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return {
        "letters": "".join(rng.choice(letters) for _ in range(n)),
        "cjk": "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(n // 3)),
        "mixed": "".join(rng.choice(["a", "é", "ß", "日", "本", "ё", "ж", "z", "q"]) for _ in range(n // 2)),
        "lower": "".join(rng.choice("etaoinshrdlu") for _ in range(n)),
    }


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "llama3"])
def test_long_pieces_equal_the_reference(name, testdata, exported, spy):
    ref = Ref(name, model_source(testdata, name))
    encode_ref = ref.cases()[0][1]
    rng = random.Random(f"chunks-{name}")
    texts = _texts(rng, 30000)
    texts["periodic"] = "abcab" * 3000  # chunks fall out of phase: re-merged or given up, never wrong
    for label, text in texts.items():
        tok = tokmap.load(exported(name))  # fresh: no cached pieces
        assert tok.encode(text, add_special_tokens=False) == encode_ref(text), (name, label)
    assert spy["glued"] >= 3 and spy["first_try"] >= 1, spy


def test_wide_pieces_take_the_wide_stride():
    """Chunks start STRIDE symbols apart, WIDE_STRIDE apart from WIDE_PIECE symbols on, and every
    chunk still reaches OVERLAP symbols into the next."""
    for n, stride in ((bpe_chunks.WIDE_PIECE - 1, bpe_chunks.STRIDE), (bpe_chunks.WIDE_PIECE, bpe_chunks.WIDE_STRIDE)):
        starts, ends = bpe_chunks.chunk_bounds(n, None)
        assert set(np.diff(starts).tolist()) == {stride}, n
        assert len(starts) == -(-n // stride) and ends[-1] == n
        assert set((ends[:-1] - starts[1:]).tolist()) == {bpe_chunks.OVERLAP}, n


def test_a_wide_piece_equals_the_reference(testdata, exported, spy):
    """One piece past WIDE_PIECE bytes (random letters: cl100k's split leaves them whole), chunked
    at the wide stride and glued, is the reference's."""
    ref = Ref("cl100k_base", model_source(testdata, "cl100k_base"))
    rng = random.Random("wide-piece")
    text = "".join(rng.choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", k=bpe_chunks.WIDE_PIECE + 5000))
    assert tokmap.load(exported("cl100k_base")).encode(text) == ref.cases()[0][1](text)
    assert spy["glued"] == 1, spy


def test_chunks_meet_at_cuts_without_overlap():
    """cut_chunk_bounds: where the first cut at or after a boundary's place (k * stride) lies
    within half a stride of it, the two chunks meet at that cut (free); elsewhere they are
    chunk_bounds' own, overlapping. Either way the chunks follow each other and cover the piece."""
    rng = np.random.default_rng(5)
    for n in (1000, 4097, bpe_chunks.WIDE_PIECE + 100):
        stride = bpe_chunks.STRIDE if n < bpe_chunks.WIDE_PIECE else bpe_chunks.WIDE_STRIDE
        lead = np.arange(0, n, 3)  # (3-byte chars)
        cuts = np.sort(rng.choice(lead[1:], size=len(lead) // 8, replace=False))
        starts, ends, free = bpe_chunks.cut_chunk_bounds(n, lead, cuts)
        plain_starts, plain_ends = bpe_chunks.chunk_bounds(n, lead)
        # (4097 = 1 + 128 strides: no char starts at or after the last place, where the plain
        # layout drops the empty chunk too)
        assert len(starts) == len(plain_starts) == len(free) + 1 == -(-n // stride) - (n == 4097)
        assert starts[0] == 0 and ends[-1] == n and (ends > starts).all() and (np.diff(starts) > 0).all()
        place = np.arange(1, len(starts)) * stride
        first_cut = np.append(cuts, n)[np.searchsorted(cuts, place)]
        assert np.array_equal(free, first_cut < place + stride // 2)
        assert free.any() and not free.all(), n
        b = np.flatnonzero(free)
        assert np.array_equal(starts[b + 1], first_cut[b]) and np.array_equal(ends[b], first_cut[b])
        o = np.flatnonzero(~free)
        assert np.array_equal(starts[o + 1], plain_starts[o + 1]) and np.array_equal(ends[o], plain_ends[o])
        assert (ends[o] > starts[o + 1]).all()  # (overlapping)


@pytest.mark.parametrize("name", ["llama3", "qwen3", "gpt4o"])
def test_chunks_meeting_at_cuts_equal_the_reference(name, testdata, exported, monkeypatch):
    """Long pieces of multi-byte chars are chunked to meet where no merge crosses (bpe_cuts.py):
    a run of consecutive private-use code points (every char boundary a cut, as in
    utf8seq.txt: nothing is glued), consecutive Hangul syllables and ideographs, and kana with
    kanji and no spaces (some boundaries at cuts, the others glued). The ids are the
    reference's, on a fresh tokenizer each."""
    ref = Ref(name, model_source(testdata, name))
    encode_ref = ref.cases()[0][1]
    free_seen, glued = [], []
    real_bounds, real_glue = bpe_chunks.cut_chunk_bounds, bpe_chunks.glue

    def bounds(*a, **k):
        starts, ends, free = real_bounds(*a, **k)
        free_seen.append(free)
        return starts, ends, free

    monkeypatch.setattr(bpe_chunks, "cut_chunk_bounds", bounds)
    monkeypatch.setattr(bpe_chunks, "glue", lambda *a: glued.append(1) or real_glue(*a))
    # (pieces that the cut path would merge part by part go to the chunks here)
    monkeypatch.setattr(bpe.BPE, "_segmented", lambda self, texts, joined, n_chars=None: None)
    rng = random.Random(f"cut-chunks-{name}")
    kana = "のはにをがでともしてからいるあるこれそれ日本語文字猫吾輩名前"
    texts = {
        "private use": "".join(map(chr, range(0xF0000, 0xF0000 + 3000))),
        "hangul": "".join(map(chr, range(0xAC00, 0xAC00 + 3000))),
        "ideographs": "".join(map(chr, range(0x4E00, 0x4E00 + 3000))),
        "kana": "".join(rng.choice(kana) for _ in range(4000)),
    }
    for label, text in texts.items():
        free_seen.clear()
        glued.clear()
        assert tokmap.load(exported(name)).encode(text, add_special_tokens=False) == encode_ref(text), label
        free = np.concatenate(free_seen) if free_seen else np.zeros(0, dtype=bool)
        assert len(free) > 50 and free.any(), label
        if label == "private use":
            assert free.all() and not glued, label
        if label == "kana":
            assert not free.all() and glued, label


def test_ranges_that_meet_are_merged_as_they_lie(exported):
    """BPE._merge_ranges takes ranges that meet (chunks at cuts) as one slice of the bytes, and
    others by a gather: the same ranges give the same ids either way, and no range gives none."""
    model = tokmap.load(exported("llama3")).model
    model._encode_many(["".join(chr(0x4E00 + i) for i in range(400))])  # (readies the batch merge)
    rng = random.Random(3)
    raw = np.frombuffer("".join(rng.choice("のはにを日本語猫abc") for _ in range(3000)).encode(), dtype=np.uint8)
    lead = bpe_chunks.char_starts(raw)
    bounds = np.unique(np.concatenate(([0], np.sort(rng.sample(lead[1:].tolist(), 200)), [len(raw)])))
    starts, ends = bounds[:-1], bounds[1:]
    ids, counts = model._merge_ranges(raw, starts, ends)  # (they meet: the slice)
    ids2, counts2 = model._merge_ranges(raw, np.append(starts, 0), np.append(ends, ends[0]))  # (a gather)
    assert np.array_equal(counts, counts2[:-1]) and np.array_equal(ids, ids2[:len(ids)])
    empty = np.zeros(0, dtype=np.int64)
    got = model._merge_ranges(raw, empty, empty)
    assert len(got[0]) == len(got[1]) == 0


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("stride,overlap", [(32, 8), (6, 2), (3, 1)])
def test_toy_vocabularies_with_tiny_chunks(tmp_path, monkeypatch, spy, seed, stride, overlap):
    monkeypatch.setattr(bpe_chunks, "STRIDE", stride)
    monkeypatch.setattr(bpe_chunks, "OVERLAP", overlap)
    monkeypatch.setattr(bpe, "CHUNK_PIECE", 64)
    # (pieces the uncrossable cuts can serve take that path: here the chunks are under test)
    monkeypatch.setattr(bpe.BPE, "_segmented", lambda self, texts, joined, n_chars=None: None)
    rng = random.Random(f"chunk-toy-{seed}")
    out, ref = export_toy(tmp_path, rng, 150)
    pool = [c for c in CHARS if c != " "]
    for n in (700, 3000):
        word = "".join(rng.choice(pool) for _ in range(n))  # one piece: the split cuts at spaces only
        assert tokmap.load(out).encode(word) == ref.encode(word).ids, (seed, n)
    assert spy["glued"] + spy["gave_up"] == 2
    if stride == 32:
        assert spy["first_try"] >= 1, spy
    if stride == 3:
        assert spy["remerged"], spy  # 3-byte chunks with 1 byte of overlap cannot always glue


@pytest.mark.parametrize("batch", [1, 700, 5000])
def test_chunks_merged_in_several_batches(batch, testdata, exported, spy, monkeypatch):
    """The chunks of a long piece merged in batches of about RANGE_BATCH bytes (one chunk per
    batch, a few, many) give the reference's ids, and more than one batch did run."""
    ref = Ref("llama3", model_source(testdata, "llama3"))
    rng = random.Random(f"batches-{batch}")
    texts = _texts(rng, 20000)
    monkeypatch.setattr(bpe, "RANGE_BATCH", batch)
    calls = []
    real = bpe.BPE._merge_ranges
    monkeypatch.setattr(bpe.BPE, "_merge_ranges", lambda self, *a: calls.append(1) or real(self, *a))
    for label, text in texts.items():
        before = len(calls)
        assert tokmap.load(exported("llama3")).encode(text, add_special_tokens=False) == ref.cases()[0][1](text), label
        if label in ("letters", "cjk", "lower"):  # (one long piece each: chunked)
            assert len(calls) - before > 2, label
    assert spy["glued"] >= 3, spy


def test_glue_in_blocks_equals_glue_at_once(exported, monkeypatch):
    """glue() over many chunks works in blocks of GLUE_CHUNKS boundaries: on the chunks of real
    merges (long pieces back to back, so some boundaries are free; tiny chunks, so some share
    no token) every block size gives what one block gives: ids, failed boundaries, kept counts."""
    calls = []
    real = bpe_chunks.glue
    monkeypatch.setattr(bpe_chunks, "glue", lambda *a: calls.append(a) or real(*a))
    monkeypatch.setattr(bpe_chunks, "GLUE_CHUNKS", 10**9)
    rng = random.Random("glue-blocks")
    words = ["".join(rng.choices("etaoinshrdluXYZ", k=rng.randint(500, 3000))) for _ in range(6)]
    tokmap.load(exported("cl100k_base")).encode(" ".join(words))
    monkeypatch.setattr(bpe_chunks, "STRIDE", 3)
    monkeypatch.setattr(bpe_chunks, "OVERLAP", 1)
    tokmap.load(exported("cl100k_base")).encode("".join(rng.choices("etaoinshrdlu", k=8000)))
    assert len(calls) >= 3 and any(a[5] is not None for a in calls)
    seen_failed = False
    for args in calls:
        monkeypatch.setattr(bpe_chunks, "GLUE_CHUNKS", 10**9)
        want = real(*args)
        seen_failed |= want[0] is None
        for block in (1, 2, 3, 64):
            monkeypatch.setattr(bpe_chunks, "GLUE_CHUNKS", block)
            got = real(*args)
            for x, y in zip(got, want):
                assert (x is None and y is None) or np.array_equal(x, y), block
    assert seen_failed


def test_remerge_across_many_rounds_stays_exact(exported, testdata, monkeypatch, spy):
    """Chunks too small to share tokens: neighbours are joined round after round; when RETRIES
    runs out the piece goes to the old merge. Either way the ids are the reference's."""
    ref = Ref("cl100k_base", model_source(testdata, "cl100k_base"))
    rng = random.Random(7)
    text = "".join(rng.choice("etaoinshrdlu") for _ in range(20000))
    expected = ref.cases()[0][1](text)
    monkeypatch.setattr(bpe_chunks, "STRIDE", 2)
    monkeypatch.setattr(bpe_chunks, "OVERLAP", 1)
    for retries in (1, 6, 12):
        monkeypatch.setattr(bpe_chunks, "RETRIES", retries)
        assert tokmap.load(exported("cl100k_base")).encode(text) == expected, retries
    assert spy["gave_up"] >= 1 and spy["glued"] >= 2 and spy["remerged"] >= 3, spy


@pytest.mark.parametrize("name", ["cl100k_base", "llama3"])
def test_many_long_pieces_are_chunked_in_one_batch(name, testdata, exported, spy, monkeypatch):
    """Long pieces shorter than CHUNK_PIECE alone but longer together (random letters and
    ideographs between spaces: cl100k's and Llama 3's split keeps each whole) are chunked in one
    merge_pieces call and glued piece by piece: the reference's ids. One such piece alone (less
    than CHUNK_PIECE) is not chunked."""
    ref = Ref(name, model_source(testdata, name))
    encode_ref = ref.cases()[0][1]
    rng = random.Random(f"many-{name}")
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    words = ["".join(rng.choices(letters, k=rng.randint(300, 1500))) for _ in range(12)]
    words += ["".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(rng.randint(100, 500))) for _ in range(6)]
    rng.shuffle(words)
    calls = []
    real = bpe_chunks.merge_pieces
    monkeypatch.setattr(bpe_chunks, "merge_pieces", lambda sizes, *a: calls.append(len(sizes)) or real(sizes, *a))
    text = " ".join(words)
    tok = tokmap.load(exported(name))
    assert tok.encode(text, add_special_tokens=False) == encode_ref(text)
    assert calls == [len(words)] and spy["glued"] == len(words), (calls, spy)
    # Each piece's own ids went into the cache: asked again alone, each is the reference's (its
    # ids are not those of its neighbour's tail or head).
    for piece in [words[0]] + [" " + w for w in words[1:]]:
        assert tok.encode(piece, add_special_tokens=False) == encode_ref(piece)
    assert calls == [len(words)]  # (all from the cache)
    assert tokmap.load(exported(name)).encode(words[0], add_special_tokens=False) == encode_ref(words[0])
    assert calls == [len(words)]  # (a lone piece under CHUNK_PIECE: the rounds and the heap)


@pytest.mark.parametrize("name", ["cl100k_base", "llama3"])
def test_chunked_pieces_are_remembered_late(name, testdata, exported, spy):
    """A call that merged long pieces as chunks hands out their ids as lists and leaves them
    waiting (BPE._unkept_long); reading the piece cache makes their tuples: the reference's ids,
    whatever the caller did to the list it got. One piece alone (encode_pieces' own list, handed
    out as it is) has its tuple made before the list leaves: changing the list changes nothing
    for the next call."""
    ref = Ref(name, model_source(testdata, name))
    encode_ref = ref.cases()[0][1]
    rng = random.Random(f"late-{name}")
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    words = ["".join(rng.choices(letters, k=rng.randint(600, 1500))) for _ in range(8)]
    text = " ".join(words)
    tok = tokmap.load(exported(name))
    got = tok.encode(text, add_special_tokens=False)
    assert got == encode_ref(text) and spy["glued"] == len(words), spy
    model = tok.model
    pieces = [words[0]] + [" " + w for w in words[1:]]
    waiting = dict(model._unkept_long)
    assert set(waiting) == set(pieces) and all(type(v) is list for v in waiting.values())
    assert not set(pieces) & set(model._pieces)  # (not remembered yet)
    got[:] = [0] * len(got)  # (the caller's list: the waiting ones are not it)
    cache = model.piece_cache
    assert model._unkept_long is None
    for piece in pieces:
        assert cache[piece] == tuple(encode_ref(piece))
    tok = tokmap.load(exported(name))
    one = "".join(rng.choices(letters, k=5000))  # (past CHUNK_PIECE: chunked alone)
    glued = spy["glued"]
    first = tok.encode(one, add_special_tokens=False)
    assert spy["glued"] == glued + 1 and tok.model._unkept_long is None
    first[:] = [0] * len(first)
    assert tok.encode(one, add_special_tokens=False) == encode_ref(one)
    assert spy["glued"] == glued + 1  # (the second call from the cache)


def test_pieces_that_cannot_glue_leave_the_others_glued(exported, testdata, monkeypatch, spy):
    """With no retry, the pieces some of whose neighbouring chunks share no token (6 of these 40)
    are given up and merged one by one, while the others keep their glued ids: all equal the
    reference's."""
    ref = Ref("cl100k_base", model_source(testdata, "cl100k_base"))
    rng = random.Random(12)
    words = ["".join(rng.choice("etaoinshrdlu") for _ in range(rng.randint(260, 400))) for _ in range(40)]
    text = " ".join(words)
    monkeypatch.setattr(bpe_chunks, "RETRIES", 0)
    assert tokmap.load(exported("cl100k_base")).encode(text) == ref.cases()[0][1](text)
    assert spy["gave_up"] >= 1 and spy["glued"] >= 1 and spy["glued"] + spy["gave_up"] == len(words), spy


def test_pieces_that_cannot_glue_among_cut_boundaries(exported, testdata, monkeypatch, spy):
    """Kana pieces chunked small (4 chars, 2 of overlap), some boundaries at cuts (free), with no
    retry: the pieces some of whose glued boundaries share no token are given up and merged one
    by one, the others keep their ids across both kinds of boundary; all equal the reference's."""
    ref = Ref("llama3", model_source(testdata, "llama3"))
    rng = random.Random(13)
    kana = "のはにをがでともしてからいるあるこれそれ日本語文字猫吾輩名前"
    words = ["".join(rng.choice(kana) for _ in range(rng.randint(100, 160))) for _ in range(30)]
    text = " ".join(words)
    free_seen = []
    real_bounds = bpe_chunks.cut_chunk_bounds

    def bounds(*a, **k):
        starts, ends, free = real_bounds(*a, **k)
        free_seen.append(free)
        return starts, ends, free

    monkeypatch.setattr(bpe_chunks, "cut_chunk_bounds", bounds)
    monkeypatch.setattr(bpe_chunks, "STRIDE", 12)
    monkeypatch.setattr(bpe_chunks, "OVERLAP", 6)
    monkeypatch.setattr(bpe_chunks, "RETRIES", 0)
    monkeypatch.setattr(bpe.BPE, "_segmented", lambda self, texts, joined, n_chars=None: None)
    assert tokmap.load(exported("llama3")).encode(text, add_special_tokens=False) == ref.cases()[0][1](text)
    free = np.concatenate(free_seen)
    assert free.any() and not free.all()
    assert spy["gave_up"] >= 1 and spy["glued"] >= 1 and spy["glued"] + spy["gave_up"] == len(words), spy


def test_runs_keep_the_bulk_rounds(exported, spy):
    tok = tokmap.load(exported("cl100k_base"))
    tok.encode("a" * 20000)
    tok.encode(" " * 20000)
    assert spy["glued"] == spy["gave_up"] == 0  # worth_chunking said no: no chunk was merged
    assert bpe_chunks.worth_chunking(np.frombuffer(b"ab" * 100, dtype=np.uint8))


@pytest.mark.parametrize("name", ["llama3", "o200k_base"])
def test_runs_of_a_multibyte_char_keep_the_bulk_rounds(name, testdata, exported, spy, monkeypatch):
    """A run of one 2-, 3- or 4-byte char (one piece: the ideographic space U+3000 is whitespace,
    "é" a letter, an emoji neither) is a run to worth_chunking, as "aaaa" is: its rounds halve it,
    where its chunks fell out of phase and were merged again as one chunk, which the scalar heap
    then took whole (10^5 U+3000 under Llama 3: 227 ms). Its ids are the reference's, no chunk
    was merged, and the heap saw no long word. Consecutive code points are no run."""
    ref = Ref(name, model_source(testdata, name))
    encode_ref = ref.cases()[0][1]
    heap_sizes = []
    real_heap = bpe.BPE._merge_heap
    monkeypatch.setattr(bpe.BPE, "_merge_heap", lambda self, ids, ranks=None: heap_sizes.append(len(ids))
                        or real_heap(self, ids, ranks))
    for ch in ("\u3000", "\u00e9", "\U0001F600"):
        text = ch * 12000
        assert tokmap.load(exported(name)).encode(text, add_special_tokens=False) == encode_ref(text), (name, ch)
    assert spy["glued"] == spy["gave_up"] == 0, spy
    assert max(heap_sizes, default=0) <= bpe_batch.FINISH_SYMBOLS, heap_sizes
    run = np.frombuffer("\u3000".encode() * 100, dtype=np.uint8)
    assert not bpe_chunks.worth_chunking(run, bpe_chunks.utf8_width(int(run[0])))
    assert bpe_chunks.worth_chunking(run)  # (byte by byte it looked like text: e3 80 80 e3 ...)
    consecutive = np.frombuffer("".join(map(chr, range(0x4E00, 0x4F00))).encode(), dtype=np.uint8)
    assert bpe_chunks.worth_chunking(consecutive, 3)
    assert [bpe_chunks.utf8_width(c.encode()[0]) for c in "a\u00e9\u3000\U0001F600"] == [1, 2, 3, 4]


@pytest.mark.parametrize("name", ["gemma3", "llama2"])
def test_char_level_long_subpieces(name, testdata, exported, corpus, spy, monkeypatch):
    """Character-level BPE: sub-pieces from CHUNK_CHARS chars are merged as glued chunks of
    chars (here from 64, so that Japanese prose and unbroken letters reach it)."""
    from tokmap.runtime.models import charbpe

    monkeypatch.setattr(charbpe, "CHUNK_CHARS", 64)
    ref = Ref(name, model_source(testdata, name))
    encode_ref = ref.cases()[1][1]  # without special tokens
    rng = random.Random(f"char-chunks-{name}")
    texts = [corpus("wagahai")[:20000], "".join(rng.choice("etaoinshrdlu") for _ in range(6000)),
             "".join(rng.choice("のはにをがでとも日本語") for _ in range(6000))]
    for text in texts:
        assert tokmap.load(exported(name)).encode(text, add_special_tokens=False) == encode_ref(text)
    assert spy["glued"] >= 1 and (name == "llama2" or spy["first_try"] >= 1), spy


def test_char_level_model_keeps_byte_level_chunking_out(exported):
    """BPE._encode_many chunks long pieces of bytes; on a char-level model (whose symbols are
    chars, not bytes) it must not, and ends with the model's own encode_piece."""
    model = tokmap.load(exported("llama2")).model
    rng = random.Random(11)
    piece = "".join(rng.choice("abcdefghij") for _ in range(6000))
    got = model._encode_many([piece])[0]
    model.piece_cache.clear()
    assert list(got) == list(model.encode_piece(piece))
