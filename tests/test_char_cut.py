"""The char-level BPE cut table stored at export (mtok.SECTION_CHAR_TOKENS / _BIGRAMS, and META's
byte_tokens_first / byte_tokens_merge) must be exactly what the runtime derives without them
(runtime/models/charcut.py), files without them must encode the same, and damaged ones are
refused naming the section. Real files: Llama 2 and Gemma 3.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_hostile_files import check_error, with_meta, with_section, write

import tokmap
from tokmap import mtok
from tokmap.runtime.models import charcut, textparts
from tokmap.runtime.reader import MtokFile

MODELS = ["llama2", "gemma3"]


def _derived(model):
    """What the runtime computes for a file without the stored facts."""
    off = np.frombuffer(model.off, np.uint32).astype(np.int64)
    cps, ids, bigrams = charcut.char_tables(np.frombuffer(model.tb, np.uint8), off,
                                           np.frombuffer(model.sorted_ids, np.uint32),
                                           np.frombuffer(model.results, np.uint32))
    byte_ids = [model.lookup(f"<0x{b:02X}>".encode()) for b in range(256)]
    mk = np.frombuffer(model.keys, np.uint64)
    used = set((mk >> np.uint64(32)).tolist()) | set((mk & np.uint64(0xFFFFFFFF)).tolist())
    return cps, ids, bigrams, byte_ids, bool(used & set(byte_ids))


@pytest.mark.parametrize("name", MODELS)
def test_stored_facts_equal_the_runtime_derivation(name, exported):
    model = tokmap.load(exported(name)).model
    cps, ids, bigrams, byte_ids, merges = _derived(model)
    s_cps, s_ids, s_bigrams = charcut._stored(model._f, len(model.off) - 1)
    order = np.argsort(cps)
    assert len(cps) > 1000 and len(bigrams) > 1000
    assert s_cps.tolist() == cps[order].tolist() and s_ids.tolist() == ids[order].tolist()
    assert s_bigrams.tolist() == bigrams.tolist()
    assert model._bytes_tokens() == byte_ids == list(range(model.byte_tokens_first, model.byte_tokens_first + 256))
    assert model.byte_tokens_merge is merges
    # the batch merge's non-monotone bitmap is stored for char-level BPE too
    from tokmap.runtime.models.bpe_batch import nonmono_bitmap

    stored = bytes(model._f.view(mtok.SECTION_MERGE_NONMONO, mtok.U8))
    assert stored == nonmono_bitmap(np.frombuffer(model.keys, "<u8"), np.frombuffer(model.ranks, "<u4"),
                                    np.frombuffer(model.results, "<u4"))


@pytest.mark.parametrize("name", MODELS)
def test_files_without_them_encode_the_same(name, exported, corpus, tmp_path):
    path = exported(name)
    bare = path.read_bytes()
    for sid in (mtok.SECTION_CHAR_TOKENS, mtok.SECTION_CHAR_BIGRAMS):
        bare = with_section(write(tmp_path, bare, "step.mtok"), sid, None)
    bare = with_meta(write(tmp_path, bare, "step.mtok"),
                     lambda m: [m["model"].pop(k) for k in ("byte_tokens_first", "byte_tokens_merge")] and None)
    bare_path = write(tmp_path, bare, "bare.mtok")
    assert not MtokFile(bare_path).has(mtok.SECTION_CHAR_BIGRAMS)
    text = corpus("wagahai")[:30000] + corpus("en")[:30000] + "\U0010fffd\ue000 x" * 50
    stored, derived = tokmap.load(path), tokmap.load(bare_path)
    assert stored.encode(text) == derived.encode(text)
    assert stored.model._table and derived.model._table  # both cut long pieces with a table
    assert stored.model.byte_tokens_first is not None and derived.model.byte_tokens_first is None


@pytest.mark.parametrize("shift", [-1, 1, 7])
def test_a_wrong_byte_tokens_first_is_not_trusted(shift, exported, tmp_path):
    """META's byte_tokens_first is checked against the vocabulary (the 256 tokens' offsets and
    bytes) before it is used: one that points a few ids off, still in range, leaves the byte
    tokens to the lookups, which find the real ones, and the ids equal the good file's."""
    path = exported("llama2")
    good = tokmap.load(path)
    first = good.model.byte_tokens_first
    bad_path = write(tmp_path, with_meta(path, lambda m: m["model"].update(byte_tokens_first=first + shift)), "off.mtok")
    bad = tokmap.load(bad_path)
    assert bad.model.byte_tokens_first == first + shift
    assert bad.model._bytes_tokens() == good.model._bytes_tokens() == list(range(first, first + 256))
    text = "日本語 \U0010fffd\ue000 x" * 40 + "\u2028é" * 300
    assert bad.encode(text) == good.encode(text)


@pytest.mark.parametrize("sid,damage,match", [
    (mtok.SECTION_CHAR_BIGRAMS, lambda a: a[::-1], "not ascending"),
    (mtok.SECTION_CHAR_BIGRAMS, lambda a: np.append(a, np.uint64(0x110000 << 21)), "out of range"),
    # the last entry's second char past U+10FFFF (the entry itself still below the top one)
    (mtok.SECTION_CHAR_BIGRAMS, lambda a: np.append(a[:-1], a[-1] | np.uint64(0x1FFFFF)), "out of range"),
    (mtok.SECTION_CHAR_TOKENS, lambda a: np.append(a[:-1], a[-1] | np.uint64(0xFFFFFF)), "outside the vocabulary"),
    (mtok.SECTION_CHAR_TOKENS, lambda a: np.concatenate((a[1:2], a[:1], a[2:])), "not ascending"),
])
def test_damaged_tables_are_refused(exported, tmp_path, sid, damage, match):
    path = exported("llama2")
    table = np.frombuffer(MtokFile(path).view(sid, mtok.U64), dtype="<u8").copy()
    bad = write(tmp_path, with_section(path, sid, damage(table).astype("<u8").tobytes(), mtok.U64))
    with pytest.raises(tokmap.FormatError) as ei:
        tokmap.load(bad).encode("日本語 " * 200)
    check_error(ei.value, bad, mtok.section_name(sid), MtokFile(bad).sections[sid][1], match)


def test_utf8_bytes_of_every_code_point():
    """The fallback bytes of lone chars come from their code points: equal to Python's encoding
    (surrogatepass) for every code point, and for none."""
    cps = np.arange(0x110000, dtype=np.int64)
    want = "".join(map(chr, range(0x110000))).encode("utf-8", "surrogatepass")
    assert charcut.utf8_bytes(cps).tobytes() == want
    assert charcut.utf8_bytes(cps[:0]).tobytes() == b""


@pytest.mark.parametrize("held", ["", "\x00", textparts.SENTINELS[:-1], textparts.SENTINELS])
def test_part_strings_equal_slices(held):
    """part_strings(text, ...) is text[start:end] for each part, whichever sentinels the text
    holds (all of them: the slicing path), with astral chars and lone surrogates in the parts."""
    import random

    rng = random.Random(7)
    pool = ["a", "b", "\u3042", "\ud800", "\U0001f600", "\u2581", *held]
    text = "".join(rng.choice(pool) for _ in range(5000))
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    cuts = sorted(set(rng.sample(range(1, len(text)), 1500)))
    starts, ends = np.array([0, *cuts]), np.array([*cuts, len(text)])
    pick = np.array(sorted(rng.sample(range(len(starts)), 700)))
    got = textparts.part_strings(text, cps, starts[pick], ends[pick])
    assert got == [text[a:b] for a, b in zip(starts[pick].tolist(), ends[pick].tolist())]
    assert textparts.part_strings(text, cps, starts[:0], ends[:0]) == []


@pytest.mark.parametrize("collide", [False, "slots", True])
@pytest.mark.parametrize("longest", [3, 6, 9, 20])
def test_distinct_parts_names_every_part(collide, longest, monkeypatch):
    """distinct_parts: each part's index names its own string, and no string twice, for parts up
    to SHORT_PART chars (keyed in a slot table), longer ones (dedupe) and a mix; with a table of
    eight slots (nearly every part shares its slot with another: grouped by sorting their hashes;
    a word's first three chars are a word too, equal to it in the first key word only),
    and with every hash made equal (a collision in every group: it falls back) it still holds.
    Chars include \x00 (key 1: the + 1 tells it from "past the end") and astral ones (21 bits)."""
    import random

    if collide == "slots":
        monkeypatch.setattr(textparts, "SLOT_BITS", 3)
    elif collide:
        monkeypatch.setattr(textparts, "HASH_MIXES", (0, 0))
    rng = random.Random(f"distinct-{longest}")
    alphabet = "ab\x00\u3042\U0001f600"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, longest))) for _ in range(300)]
    words += [w[:3] for w in words if len(w) > 3]
    chosen = [rng.choice(words) for _ in range(3000)]
    text = "".join(chosen)
    cps = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    ends = np.cumsum([len(w) for w in chosen])
    starts = ends - np.array([len(w) for w in chosen])
    got, inv = textparts.distinct_parts(text, cps, starts, ends)
    assert [got[k] for k in inv.tolist()] == chosen
    assert len(got) == len(set(got)) == len(set(chosen))
    # strings=False: the same grouping, each distinct part named by one of its occurrences
    rep, inv2 = textparts.distinct_parts(text, cps, starts, ends, strings=False)
    assert [chosen[r] for r in rep.tolist()] == got and inv2.tolist() == inv.tolist()


def test_dedupe_and_spread_equal_per_part_python():
    """dedupe + spread give every part's ids as a dict of the distinct parts would, including
    parts with no ids and parts seen once; ranges concatenates ranges, empty ones too."""
    import random

    rng = random.Random(5)
    words = ["".join(rng.choice("ab\u3042") for _ in range(rng.randrange(1, 4))) for _ in range(60)]
    parts = [rng.choice(words) for _ in range(2000)]
    ids_of = {w: tuple(rng.randrange(1000) for _ in range(rng.randrange(0, 4))) for w in words}
    distinct, inv = textparts.dedupe(parts)
    assert distinct == list(dict.fromkeys(parts)) and [distinct[k] for k in inv.tolist()] == parts
    dlen = np.array([len(ids_of[d]) for d in distinct])
    flat = np.array([i for d in distinct for i in ids_of[d]])
    got, counts = textparts.spread(flat, np.cumsum(dlen) - dlen, dlen, inv)
    assert got.tolist() == [i for p in parts for i in ids_of[p]]
    assert counts.tolist() == [len(ids_of[p]) for p in parts]
    begin, length = np.array([5, 0, 9, 2]), np.array([2, 0, 3, 1])
    assert textparts.ranges(begin, length).tolist() == [5, 6, 9, 10, 11, 2]


@pytest.mark.parametrize("top", [1, 3, textparts.TUPLE_COLUMNS, textparts.TUPLE_COLUMNS + 5])
def test_tuples_equal_slices(top):
    """tuples() gives each part's slice as a tuple, in order, for parts of every count up to top
    (zipped columns, and the slices beyond TUPLE_COLUMNS), parts of no ids and parts out of order."""
    rng = np.random.default_rng(top)
    flat = rng.integers(0, 1 << 20, 500)
    counts = rng.integers(0, top + 1, 60)
    starts = rng.integers(0, len(flat) - top, 60)
    want = [tuple(flat[a:a + c].tolist()) for a, c in zip(starts.tolist(), counts.tolist())]
    got = textparts.tuples(flat, starts, counts)
    assert got == want and all(type(t) is tuple and all(type(i) is int for i in t) for t in got)
    assert textparts.tuples(flat, starts[:0], counts[:0]) == []


@pytest.mark.parametrize("name", MODELS)
def test_long_pieces_holding_the_sentinels(name, exported, corpus, testdata):
    """A long piece holding the chars part_strings joins parts with, some or all of them, equals
    tokenizers' ids."""
    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(str(testdata / "models" / name / "tokenizer.json"))
    tok = tokmap.load(exported(name))
    base = corpus("wagahai")[:3000] + corpus("en")[:3000]
    for held in (textparts.SENTINELS[:1], textparts.SENTINELS):
        text = held.join(base[k:k + 40] for k in range(0, len(base), 40))
        assert tok.encode(text) == ref.encode(text).ids


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("consecutive", [True, False])
def test_lone_fallback_chars_of_every_length(name, consecutive, exported, testdata):
    """Byte tokens that never merge: a long piece of lone chars without tokens of their own, 2,
    3 and 4 UTF-8 bytes, between known ones and multi-char parts, equals tokenizers'. Both files
    have the 256 byte tokens at consecutive ids; consecutive=False takes the path for files that
    do not (each byte's token looked up)."""
    import random

    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(str(testdata / "models" / name / "tokenizer.json"))
    tok = tokmap.load(exported(name))
    tok.encode("x" * 300)  # builds the cut table
    table = tok.model._table
    assert table.byte_id is not None and table.byte_first == int(table.byte_id[0])
    if not consecutive:
        table.byte_first = None
    rng = random.Random(3)
    pool = ["\u0531", "\u07c0", "\u4e28", "\uac01", "\ue000", "\U0001f600", "\U00020001", "\U0010fffd", "a", "\u3042",
            "the", "\u2581of"]
    text = "".join(rng.choice(pool) for _ in range(3000))
    assert tok.encode(text) == ref.encode(text).ids
    assert tok.encode(text) == ref.encode(text).ids


@pytest.mark.parametrize("name", MODELS)
def test_long_pieces_whatever_the_sub_piece_cache_holds(name, exported, corpus, testdata):
    """encode_long asks the model's sub-piece cache once per distinct part and encodes the rest in
    one batch: a long piece comes out as tokenizers encodes it with the cache empty, holding some
    of its parts (another text's), and holding all of them."""
    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(str(testdata / "models" / name / "tokenizer.json"))
    a, b = corpus("code")[:20000], corpus("en")[:20000]
    mixed = a[:10000] + b[:10000] + "tokmap\u2581x " * 300
    tok = tokmap.load(exported(name))
    for text in (a, mixed, mixed, b):
        assert len(text) >= charbpe_long()
        assert tok.encode(text) == ref.encode(text).ids
    assert tok.model.sub_cache


def test_gemma3_long_lines_remembered_within_budget(exported, corpus, testdata, monkeypatch):
    """Gemma 3's pieces are whole lines: those longer than the piece cache's short limit are
    remembered while their chars fit LONG_CACHE_CHARS (set low here, so a long text passes it and
    drops them), and every call -- first, repeated, after a drop -- equals tokenizers' ids."""
    from tokenizers import Tokenizer

    import tokmap.runtime.models as models

    monkeypatch.setattr(models, "LONG_CACHE_CHARS", 3000)
    monkeypatch.setattr(models, "LONG_PIECE_MAX", 1000)
    ref = Tokenizer.from_file(str(testdata / "models" / "gemma3" / "tokenizer.json"))
    lines = [ln for ln in corpus("wagahai").split("\n") if 60 < len(ln) < 900]
    assert len(lines) > 40
    tok = tokmap.load(exported("gemma3"))
    model = tok.model
    long_keys = lambda: {p for p in model.piece_cache if len(p) > 48}  # noqa: E731
    first, rest = "\n".join(lines[:3]), "\n".join(lines[3:40])
    for text in (first, first, rest, first, first):
        assert tok.encode(text) == ref.encode(text).ids
        assert 0 < model._long.chars <= 3000 and sum(map(len, long_keys())) == model._long.chars
    assert long_keys() <= {p.replace(" ", "\u2581") for p in lines[:3]} | {"\u2581" + p.replace(" ", "\u2581")
                                                                          for p in lines[:3]}


@pytest.mark.parametrize("name", MODELS)
def test_caches_filled_late_hold_what_the_first_call_made(name, exported, corpus, testdata):
    """A first call over many fresh lines leaves its long pieces' ids and its parts' ids waiting
    (CharBPE._unkept, _unkept_subs); reading a cache fills it. Then each remembered line holds
    tokenizers' ids for it and each part the ids its chars merge to alone; the lists the first
    call handed out are the caller's own (changing one changes nothing after), and calls after
    it, same text or another, equal tokenizers'."""
    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(str(testdata / "models" / name / "tokenizer.json"))
    lines = [ln for c in ("wagahai", "en") for ln in corpus(c).split("\n") if 60 < len(ln) < 900][::8]
    text = "\n".join(lines)
    tok = tokmap.load(exported(name))
    model = tok.model
    got = tok.encode(text)
    assert got == ref.encode(text).ids
    if name == "gemma3":  # (Llama 2's text is one piece: encode_piece, which remembers it at once)
        assert model._unkept is not None and model._unkept_subs is not None
        pieces = [p for p in model.piece_cache if len(p) > 48]  # (read: filled now)
        assert model._unkept is None and len(pieces) >= 100
        for p in pieces:
            want = ref.encode(p.replace("\u2581", " "), add_special_tokens=False).ids
            assert list(model.piece_cache[p]) == want and type(model.piece_cache[p]) is tuple
    subs = model.sub_cache
    assert model._unkept_subs is None and len(subs) > 1000
    for part, ids in list(subs.items())[::25]:
        assert type(ids) is tuple and list(ids) == model._merge(model._initial(part)[0])
    got.clear()
    fresh = ["\u2581".join(lines[k::5]).replace(" ", "\u2581") for k in (1, 2, 3)]
    parts = model.encode_word_parts(fresh)
    want = [list(p) for p in parts]
    assert all(type(p) is list for p in parts)  # (three long new pieces: one encode_long pass)
    for p in parts:
        p.clear()  # (the caller's own list: what is remembered is not it)
    assert [list(p) for p in model.encode_word_parts(fresh)] == want
    for t in (text, "\n".join(lines[::3]), text):
        assert tok.encode(t) == ref.encode(t).ids


def test_caches_filled_late_under_threads(exported, corpus, testdata):
    """Threads encoding with one Gemma 3 tokenizer, switching often: each takes the entries
    left waiting (or misses them while another fills them), and every result is tokenizers'."""
    import sys
    import threading

    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(str(testdata / "models" / "gemma3" / "tokenizer.json"))
    lines = [ln for c in ("wagahai", "en", "code") for ln in corpus(c).split("\n") if 60 < len(ln) < 900]
    texts = ["\n".join(lines[k::40][:90]) for k in range(12)]
    want = [ref.encode(t).ids for t in texts]
    tok = tokmap.load(exported("gemma3"))
    bad: list = []

    def work(offset: int) -> None:
        try:
            for j in range(len(texts)):
                k = (j + offset) % len(texts)
                if tok.encode(texts[k]) != want[k]:
                    bad.append(k)
        except Exception as e:  # noqa: BLE001 -- reported below
            bad.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=work, args=(k * 3,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not bad, bad[:3]


def charbpe_long() -> int:
    from tokmap.runtime.models.charbpe import LONG_TEXT

    return LONG_TEXT


@pytest.mark.parametrize("name", MODELS)
def test_bigram_lookup_equals_membership(name, exported):
    """CutTable._bigram answers exactly whether "ab" is one of the table's bigrams: for every
    stored bigram, and for random pairs of small, large and mixed chars."""
    model = tokmap.load(exported(name)).model
    model._build_table()
    table = model._table
    keys = table.keys
    a_all, b_all = (keys >> np.uint64(21)).astype(np.uint32), (keys & np.uint64(0x1FFFFF)).astype(np.uint32)
    assert table._bigram(a_all, b_all).all()
    rng = np.random.default_rng(3)
    pools = [rng.integers(0, 0x800, 40000), rng.integers(0x800, 0x10000, 40000),
             rng.choice(np.concatenate((a_all, b_all)), 40000), rng.integers(0x10000, 0x110000, 40000)]
    # The tables stop past the largest char they know; chars above take the "none" row and -1.
    sample = np.concatenate([p[:300] for p in pools]).astype(np.uint32)
    own = [model.lookup(chr(c).encode("utf-8", "surrogatepass")) for c in sample.tolist()]
    assert table.ids_of(sample).tolist() == [-1 if i is None else i for i in own]
    assert table.id_of(0x10FFFF) == -1
    if name == "llama2":  # (its largest char with a token is in the BMP: the clip is taken)
        assert max(sample.tolist()) > table._top and max(sample.tolist()) >= len(table._slot) > 1
    a = np.concatenate([rng.permutation(p) for p in pools] * 2).astype(np.uint32)
    b = np.concatenate([rng.permutation(p) for p in pools[::-1]] + [rng.permutation(p) for p in pools])
    b = b.astype(np.uint32)
    known = set(keys.tolist())
    expect = [((x << 21) | y) in known for x, y in zip(a.tolist(), b.tolist())]
    got = table._bigram(a, b)
    assert got.tolist() == expect and 100 < sum(expect) < len(expect)
    # Both routes are taken: the matrix of the alphabet, and the search for the chars outside it
    # (Gemma 3's bigrams hold more than ALPHABET distinct chars; Llama 2's all fit).
    assert (table.slots(a) < table._width - 2).any()
    if name == "gemma3":
        assert table._outside and (table.slots(a) == table._width - 1).any() and (table.slots(b) == table._width - 1).any()


@pytest.mark.parametrize("name", MODELS)
def test_bigram_blocks_equal_one_pass(name, exported, corpus, testdata, monkeypatch):
    """split() tests a long piece's bigrams PAIR_BLOCK pairs at a time: with blocks of 1, 5 and
    64 pairs its cuts are exactly those of _bigram over all pairs at once (the pair across two
    blocks included), and the ids are tokenizers'."""
    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(str(testdata / "models" / name / "tokenizer.json"))
    tok = tokmap.load(exported(name))
    model = tok.model
    model._build_table()
    table = model._table
    text = (corpus("wagahai")[:700] + corpus("code")[:700]).replace(" ", "\u2581")
    cps = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    whole = ~table._bigram(cps[:-1], cps[1:])
    assert 0 < whole.sum() < len(whole)
    for block in (1, 5, 64):
        monkeypatch.setattr(charcut, "PAIR_BLOCK", block)
        out = np.zeros(len(cps) - 1, bool)
        table._no_bigram(cps, out)
        assert out.tolist() == whole.tolist()
        model.sub_cache.clear()
        model.piece_cache.clear()
        assert tok.encode(text) == ref.encode(text).ids


@pytest.mark.parametrize("bits", [4, 20])
def test_bigram_filter_answers_membership(bits, exported, monkeypatch):
    """CutTable._has_keys (the filter, then a search of what it lets through) answers exactly
    whether each packed pair is a key: every key, every key with a bit flipped, random pairs;
    with a 16-slot filter (every slot set: all searched) and the real one (most rejected)."""
    from tokmap.runtime.models import bpe_batch

    monkeypatch.setattr(bpe_batch, "FILTER_BITS", bits)
    model = tokmap.load(exported("gemma3")).model
    model._build_table()
    table = model._table
    keys = table.keys
    rng = np.random.default_rng(bits)
    flipped = keys ^ (np.uint64(1) << rng.integers(0, 42, len(keys)).astype(np.uint64))
    randoms = (rng.integers(0, 0x110000, 50000).astype(np.uint64) << np.uint64(21)) | rng.integers(0, 0x110000, 50000).astype(np.uint64)
    probe = np.concatenate((keys, flipped, randoms))
    known = set(keys.tolist())
    got = table._has_keys(probe)
    assert got.tolist() == [int(k) in known for k in probe.tolist()]
    assert got[:len(keys)].all() and not got[len(keys):].all()
    if bits == 20:  # (the filter passes few of the others on to the search)
        assert table._filter[bpe_batch.key_slots(randoms)].mean() < 0.2


@pytest.mark.parametrize("name", MODELS)
def test_short_piece_cuts_follow_their_definition(name, exported, corpus):
    """_subpieces (the cut regex, re.split, the left-char check) cuts a piece of 16-255 chars
    exactly before each candidate char c at k >= 1 whose bigram (text[k-1], c) is inside no merge
    result (and where c has no more than 64 such left chars), text[k-1] being a token of its own:
    checked char by char against the cut table on real lines, and with chars that have no token."""
    tok = tokmap.load(exported(name))
    model = tok.model
    tok.encode(corpus("en")[:2000])
    if model._table is None:
        model._build_table()
    table = model._table
    low = table.keys & np.uint64(0x1FFFFF)
    bad = {}
    for c in charcut.CANDIDATES:
        if table.id_of(ord(c)) >= 0:
            left = {chr(k) for k in (table.keys[low == ord(c)] >> np.uint64(21)).tolist()} | {c}
            if len(left) <= 64:
                bad[c] = left

    def own_token(ch):
        hit = model._resolve(ch)
        return hit[0] is not None and not hit[1]

    def expected(text):
        cuts = [k for k in range(1, len(text)) if text[k] in bad and text[k - 1] not in bad[text[k]]
                and own_token(text[k - 1])]
        return [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]

    lines = [ln.replace(" ", "\u2581") for c in ("en", "code", "multi") for ln in corpus(c).split("\n")[:3000]]
    lines += ["a\u2581\u2581b\u2581>\u2581c\n\t\u2581\U0001F600\u2581end\u2581\u2581\u2581x" * 3,  # runs, an emoji left char
              "\u2581" * 20 + "tail\u2581\u2581\tx" * 2, "\uE000\u2581a\uE001\u2581bcdefghijklmnop"]
    checked = 0
    for text in lines:
        if 16 <= len(text) < 256:
            assert model._subpieces(text) == expected(text), text
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("one_pass", [True, False])
@pytest.mark.parametrize("name", MODELS)
def test_document_batches_long_pieces_and_fallback_words(name, one_pass, exported, corpus, testdata, monkeypatch):
    """A first encode of a document cuts all its pieces in one encode_long call (joined, cut at
    their bounds; with the one pass off, only the long ones, the short ones going through
    _subpieces) and merges the words holding byte-fallback chars in the same batch as the rest:
    ids equal tokenizers', and spies see the paths taken (Gemma 3: a stretch per line)."""
    import random

    from tokenizers import Tokenizer

    from test_charbpe import RARE
    from tokmap.runtime.models import charbpe

    ref = Tokenizer.from_file(str(testdata / "models" / name / "tokenizer.json"))
    rng = random.Random(5)
    lines = []
    for line in (corpus("en")[:40000] + corpus("wagahai")[:20000]).splitlines():
        words = line.split(" ")
        for _ in range(len(words) // 4):
            k = rng.randrange(len(words))
            words[k] = words[k] + rng.choice(RARE) + words[k]
        lines.append(" ".join(words))
    # paragraphs of six lines: most are long pieces (Gemma 3 cuts its stretches at newlines)
    text = "\n".join(" ".join(lines[k:k + 6]) for k in range(0, len(lines), 6))
    seen = {"bounds": 0, "fallback_words": 0}
    real_long, real_fb = charcut.encode_long, charbpe.CharBPE._with_fallback_words

    def spy_long(text, table, encode_many, cache, bounds=None):
        seen["bounds"] = max(seen["bounds"], 0 if bounds is None else len(bounds))
        return real_long(text, table, encode_many, cache, bounds)

    def spy_fb(self, texts, idx, sym, lengths, which):
        got = real_fb(self, texts, idx, sym, lengths, which)
        seen["fallback_words"] += len(got[2]) - len(which)
        return got

    monkeypatch.setattr(charcut, "encode_long", spy_long)
    monkeypatch.setattr(charbpe.CharBPE, "_with_fallback_words", spy_fb)
    if not one_pass:
        monkeypatch.setattr(charbpe, "MANY_PIECES", 1 << 30)
    tok = tokmap.load(exported(name))
    assert tok.encode(text) == ref.encode(text).ids
    if name == "gemma3":
        n_pieces = text.count("\n") + 1
        if one_pass:  # every stretch one bound of the same pass
            assert seen["bounds"] == n_pieces, (seen, n_pieces)
        else:  # the long ones only, and the short ones' fallback words in the batch
            assert 50 < seen["bounds"] < n_pieces and seen["fallback_words"] > 0, (seen, n_pieces)
    # (Llama 2: the document is one piece, encode_long without bounds, and no merge takes a byte
    # token, so every fallback char is cut out alone and no word reaches the batch with one)
