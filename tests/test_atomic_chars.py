"""Atomic characters (exporter/atomic_chars.py, runtime/models/premerge.premerge_chars): starting a
word's merge from a character's token instead of its bytes must never change an id.

Random byte-level vocabularies over a few ASCII and multi-byte characters (2, 3 and 4 bytes), with
tokens that join whole characters, split them, or cross their edges, and merge ranks shuffled so that
crossing merges often outrank a character's own. Texts mixing those characters are encoded through
the batch path and compared with `tokenizers`; the table must be non-empty, use several kinds of
neighbour flags, and leave out characters whose solo run a crossing merge can interrupt.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import tokmap
from tokmap import bytelevel, mtok
from tokmap.exporter.atomic_chars import _solo_states
from tokmap.runtime.models.premerge import premerge_chars
from tokmap.runtime.reader import MtokFile

CHARS = ["a", "b", " ", "é", "ß", "日", "本", "語", "の", "😀"]


def _toy(rng: random.Random, n_tokens: int) -> tuple[dict, list[bytes]]:
    vocab = [bytes([b]) for b in range(256)]
    seen = set(vocab)
    pool = [bytes([b]) for c in CHARS for b in c.encode()]
    pool += [c.encode() for c in CHARS]  # whole characters are likely parts
    merges = []
    ids = {t: i for i, t in enumerate(vocab)}
    while len(vocab) < 256 + n_tokens:
        t = rng.choice(pool) + rng.choice(pool)
        if len(t) > 9 or t in seen:
            continue
        # a token must be made by one merge of two existing tokens
        splits = [(t[:k], t[k:]) for k in range(1, len(t)) if t[:k] in ids and t[k:] in ids]
        if not splits:
            continue
        seen.add(t)
        ids[t] = len(vocab)
        vocab.append(t)
        pool.append(t)
        merges.append(rng.choice(splits))
    for c in CHARS:  # every character is a token, built from its own bytes
        data = c.encode()
        for k in range(2, len(data) + 1):
            if data[:k] not in ids:
                ids[data[:k]] = len(vocab)
                vocab.append(data[:k])
                merges.append((data[:k - 1], data[k - 1:k]))
    rng.shuffle(merges)
    s = bytelevel.to_str
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": " ?[^ ]+| +"}, "behavior": "Isolated",
                          "invert": False},
        "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": False,
                                            "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {s(t): i for i, t in enumerate(vocab)}, "merges": [[s(a), s(b)] for a, b in merges]},
    }
    return doc, vocab


def _byte_level_input(doc: dict) -> dict:
    """tokenizers applies the ByteLevel alphabet before the model; here as a pre-tokenizer step
    that keeps the Split pieces (use_regex false)."""
    doc = dict(doc)
    doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        doc["pre_tokenizer"], {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                               "use_regex": False}]}
    return doc


def export_toy(tmp_path, rng: random.Random, n_tokens: int):
    """(path of the exported toy .mtok, tokenizers' Tokenizer of the same tokenizer.json)."""
    tokenizers = pytest.importorskip("tokenizers")
    doc = _byte_level_input(_toy(rng, n_tokens)[0])
    src = tmp_path / "tokenizer.json"
    src.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "toy.mtok"
    tokmap.export(src, out)
    return out, tokenizers.Tokenizer.from_str(json.dumps(doc))


@pytest.mark.parametrize("seed", range(10))
def test_premerged_characters_encode_like_tokenizers(tmp_path, seed):
    rng = random.Random(f"atomic-{seed}")
    out, ref = export_toy(tmp_path, rng, 120)
    table = np.frombuffer(MtokFile(out).view(mtok.SECTION_ATOMIC_CHARS, mtok.U64), dtype="<u8")
    words = ["".join(rng.choice(CHARS[:2] + CHARS[3:]) for _ in range(rng.randint(1, 14))) for _ in range(2500)]
    text = " ".join(words)
    tok = tokmap.load(out)
    assert tok.encode(text) == ref.encode(text).ids
    assert tok.model._atomic is not None and len(tok.model._atomic) == len(table)
    # one long word (the one-by-one path with bulk rounds) of characters only
    long_word = "".join(rng.choice(CHARS[3:]) for _ in range(3000))
    assert tokmap.load(out).encode(long_word) == ref.encode(long_word).ids


def _exported_seed(tmp_path, seed: int):
    """(vocab, path, MtokFile) of the toy vocabulary of seed `atomic-{seed}`, exported."""
    doc, vocab = _toy(random.Random(f"atomic-{seed}"), 120)
    src = tmp_path / f"t{seed}.json"
    src.write_text(json.dumps(_byte_level_input(doc)), encoding="utf-8")
    out = tmp_path / f"t{seed}.mtok"
    tokmap.export(src, out)
    return vocab, out, MtokFile(out)


def test_tables_use_their_flags_and_leave_out_interruptible_characters(tmp_path):
    """Across seeds: some characters atomic with every neighbour, some only with some, some not at
    all; and a character is listed only if no crossing merge outranks its pending one (checked here
    by brute force over the table's merges)."""
    flags_seen, left_out = set(), 0
    for seed in range(10):
        vocab, out, f = _exported_seed(tmp_path, seed)
        table = np.frombuffer(f.view(mtok.SECTION_ATOMIC_CHARS, mtok.U64), dtype="<u8")
        listed = {int(e >> np.uint64(40)): (int((e >> np.uint64(32)) & np.uint64(0xFF)), int(e & np.uint64(0xFFFFFFFF)))
                  for e in table}
        model = tokmap.load(out).model
        keys = {}
        for k, r, res in zip(np.frombuffer(model.keys, "<u8").tolist(), list(model.ranks), list(model.results)):
            keys[k] = (r, res)
        for c in CHARS[3:]:
            data = c.encode()
            states, final = _solo_states(data, model.byte_ids, keys)
            tid = vocab.index(data)
            if ord(c) not in listed:
                left_out += 1
                continue
            flags, got = listed[ord(c)]
            assert got == tid and final == [tid]
            flags_seen.add(flags)
            # brute force: a merge whose right operand is a leftmost state, after a symbol ending in
            # a continuation byte, must rank above the pending internal merge (flag 2)
            if flags & 2:
                for key, (r, _res) in keys.items():
                    left, right = key >> 32, key & 0xFFFFFFFF
                    last = vocab[left][-1]
                    if 0x80 <= last < 0xC0:
                        for x, _z, p in states:
                            if right == x:
                                assert r > p, (c, vocab[left], vocab[right], r, p)
    assert left_out > 0 and len(flags_seen) > 1, (left_out, flags_seen)


def _holds_beside(keys, vocab, tid, states, side, byte) -> bool:
    """Brute force over every merge: beside a neighbour whose edge byte is `byte` (its last byte on
    the left, side 0; its first on the right, side 1), every merge crossing that edge of the char
    ranks above the merge pending inside it, and every such merge with the char's token above all
    of its own."""
    top = max(p for _x, _z, p in states)
    for key, (r, _res) in keys.items():
        left, right = key >> 32, key & 0xFFFFFFFF
        own, other = (right, vocab[left][-1]) if side == 0 else (left, vocab[right][0])
        if other != byte:
            continue
        if own == tid and r <= top:
            return False
        if any(own == st[side] and r <= st[2] for st in states):
            return False
    return True


def test_edge_masks_hold_by_brute_force(tmp_path):
    """atomic_edges, across seeds: a mask bit is set exactly when the brute-force condition holds
    beside that edge byte, only for a side whose kind's flag is unset, and every char with a mask
    is in atomic_chars (some with no flag at all)."""
    pairs_seen = no_flag = 0
    for seed in range(10):
        vocab, out, f = _exported_seed(tmp_path, seed)
        table = np.frombuffer(f.view(mtok.SECTION_ATOMIC_CHARS, mtok.U64), dtype="<u8").tolist()
        listed = {e >> 40: (e >> 32 & 0xFF, e & 0xFFFFFFFF) for e in table}
        pairs = np.frombuffer(f.view(mtok.SECTION_ATOMIC_EDGES, mtok.U64), dtype="<u8").tolist()
        stored = {(k >> 1, k & 1): m for k, m in zip(pairs[0::2], pairs[1::2])}
        model = tokmap.load(out).model
        keys = {k: (r, res) for k, r, res in zip(np.frombuffer(model.keys, "<u8").tolist(), list(model.ranks),
                                                 list(model.results))}
        for c in CHARS[3:]:
            data = c.encode()
            tid = vocab.index(data)
            states, final = _solo_states(data, model.byte_ids, keys)
            if final != [tid] or not states or ord(c) >= 0x10000:
                assert not any((ord(c), side) in stored for side in (0, 1))
                continue
            flags = listed.get(ord(c), (0, None))[0]
            for side, kind_bit, base in ((0, 2, 0x80), (1, 8, 0xC0)):
                mask = stored.get((ord(c), side), 0)
                if flags & kind_bit:
                    assert not mask
                    continue
                want = sum(1 << b for b in range(64) if _holds_beside(keys, vocab, tid, states, side, base + b))
                assert mask == want, (seed, c, side, hex(mask), hex(want))
                if mask:
                    pairs_seen += 1
                    assert ord(c) in listed and listed[ord(c)][1] == tid
                    no_flag += listed[ord(c)][0] == 0
    assert pairs_seen > 0 and no_flag > 0, (pairs_seen, no_flag)


@pytest.mark.parametrize("seed", range(6))
def test_edge_masks_encode_like_tokenizers(tmp_path, monkeypatch, seed):
    """With the BMP index (and so the masks) from the first batch: toy vocabularies whose chars
    meet every kind of neighbour, ids equal tokenizers', and the masks start more chars from
    their token than the flags alone."""
    from tokmap.runtime.models import bpe, premerge

    monkeypatch.setattr(bpe, "BMP_INDEX_CHARS", 0)
    rng = random.Random(f"edges-{seed}")
    out, ref = export_toy(tmp_path, rng, 160)
    words = ["".join(rng.choice(CHARS[3:] if rng.random() < 0.8 else CHARS[:2]) for _ in range(rng.randint(1, 12)))
             for _ in range(3000)]
    text = " ".join(words)
    counts = []
    real = premerge.premerge_chars

    def counting(raw, lengths, table, by_byte, bmp=None, edges=None):
        got = real(raw, lengths, table, by_byte, bmp, edges)
        counts.append((len(raw) - len(got[0]), edges is not None))
        return got

    monkeypatch.setattr(premerge, "premerge_chars", counting)
    tok = tokmap.load(out)
    assert tok.encode(text) == ref.encode(text).ids
    model = tok.model
    assert model._atomic_bmp is not None
    if model._atomic_edges is None:  # (a seed whose every char kept its flags: no pair to store)
        assert not len(MtokFile(out).view(mtok.SECTION_ATOMIC_EDGES, mtok.U64))
        return
    raw = np.frombuffer(text.encode(), dtype=np.uint8)
    lengths = np.array([len(text.encode())], dtype=np.int64)
    by_byte = np.arange(256)
    with_masks = real(raw, lengths, model._atomic, by_byte, model._atomic_bmp, model._atomic_edges)
    flags_only = real(raw, lengths, model._atomic, by_byte, model._atomic_bmp)
    assert len(with_masks[0]) < len(flags_only[0])
    assert counts and all(e for _n, e in counts)


def test_premerge_respects_word_edges_and_neighbours():
    # one 3-byte character (U+65E5, id 300) allowed only with multi-byte neighbours on both sides
    table = np.array([(0x65E5 << 40) | ((2 | 8) << 32) | 300], dtype="<u8")
    words = ["日", "a日", "日日", "日a"]
    raw = np.frombuffer("".join(words).encode(), dtype=np.uint8)
    lengths = np.array([len(w.encode()) for w in words], dtype=np.int64)
    sym, new_len, _raw, _single = premerge_chars(raw, lengths, table, np.arange(256))
    # alone: both edges are word edges; "a日": ASCII on the left, kept as bytes; "日日": both;
    # "日a": ASCII on the right, kept as bytes
    assert new_len.tolist() == [1, 4, 2, 4]
    assert sym.tolist()[:1] == [300] and sym.tolist()[5:7] == [300, 300]


def _premerge_by_hand(words, table, masks=None):
    """premerge_chars' definition, char by char: a multi-byte char with an entry becomes its token
    when each side is a word edge or a neighbour its flags allow (1/2: ASCII/multi-byte on the
    left, 4/8 on the right), or a multi-byte neighbour whose edge byte its masks allow (masks:
    code point -> (left mask, right mask), bit b for a last byte 0x80 + b / a first byte 0xC0 + b);
    everything else stays bytes."""
    masks = masks or {}
    entries = {int(e) >> 40: (int(e) >> 32 & 0xFF, int(e) & 0xFFFFFFFF) for e in table}
    sym, lens, raw, single = [], [], [], []
    for w in words:
        b, n, i = w.encode(), 0, 0
        while i < len(b):
            size = len(w[len(b[:i].decode()):][0].encode())
            cp = ord(b[i:i + size].decode())
            hit = entries.get(cp) if size > 1 else None
            if hit is not None:
                flags, tid = hit
                lm, rm = masks.get(cp, (0, 0))
                left = i == 0 or flags & (1 if b[i - 1] < 0x80 else 2) or (
                    b[i - 1] >= 0x80 and lm >> (b[i - 1] - 0x80) & 1)
                right = i + size == len(b) or flags & (4 if b[i + size] < 0x80 else 8) or (
                    b[i + size] >= 0xC0 and rm >> (b[i + size] - 0xC0) & 1)
                if left and right:
                    sym.append(tid), raw.append(b[i]), single.append(False)
                    n, i = n + 1, i + size
                    continue
            for k in range(size):
                sym.append(1000 + b[i + k]), raw.append(b[i + k]), single.append(True)
            n, i = n + 1 * size, i + size
        lens.append(n)
    return sym, lens, raw, single


@pytest.mark.parametrize("seed", range(8))
def test_premerge_equals_its_definition(seed):
    """premerge_chars, with and without the BMP index, on random words of 1- to 4-byte chars and
    random tables with random flags."""
    from tokmap.runtime.models.premerge import bmp_index, edge_index

    r = random.Random(seed)
    alphabet = ["a", "Z", " ", "\u00e9", "\u00df", "\u65e5", "\u672c", "\uac00", "\U0001F600", "\U00020000"]
    table = np.array(sorted((ord(c) << 40) | (r.randrange(16) << 32) | (200 + k)
                            for k, c in enumerate(alphabet) if ord(c) >= 0x80 and r.random() < 0.8), dtype="<u8")
    words = ["".join(r.choice(alphabet) for _ in range(r.randrange(1, 9))) for _ in range(3000)]
    words.append("a" + alphabet[3 + seed % 7])  # the bytes end with a multi-byte char (2 to 4 bytes by seed)
    raw = np.frombuffer("".join(words).encode(), dtype=np.uint8)
    lengths = np.array([len(w.encode()) for w in words], dtype=np.int64)
    want = _premerge_by_hand(words, table)
    by_byte = 1000 + np.arange(256, dtype=np.int64)
    for bmp in (None, bmp_index(table)):
        sym, new_len, new_raw, single = premerge_chars(raw, lengths, table, by_byte, bmp)
        single = np.ones(len(sym), bool) if single is None else single
        assert (sym.tolist(), new_len.tolist(), new_raw.tolist(), single.tolist()) == want
    # With atomic_edges masks (the BMP index only): random masks over the neighbours' edge bytes
    # that occur here, for listed BMP chars and chars listed in no pair (no row: flags alone).
    edge_bytes = sorted({b for c in alphabet for b in c.encode() if b >= 0x80})
    masks = {}
    for e in table.tolist():
        cp = e >> 40
        if cp < 0x10000 and r.random() < 0.8:
            masks[cp] = tuple(sum(1 << (b & 0x3F) for b in edge_bytes if r.random() < 0.5 and lo <= b < hi)
                              for lo, hi in ((0x80, 0xC0), (0xC0, 0x100)))
    pairs = np.array([v for cp in sorted(masks) for side in (0, 1) if masks[cp][side]
                      for v in ((cp << 1) | side, masks[cp][side])], dtype="<u8")
    want = _premerge_by_hand(words, table, masks)
    assert want != _premerge_by_hand(words, table), "the masks premerge some chars the flags do not"
    sym, new_len, new_raw, single = premerge_chars(raw, lengths, table, by_byte, bmp_index(table), edge_index(pairs))
    single = np.ones(len(sym), bool) if single is None else single
    assert (sym.tolist(), new_len.tolist(), new_raw.tolist(), single.tolist()) == want


def test_damaged_atomic_chars_is_refused(tmp_path):
    from conftest import testdata_file
    from test_hostile_files import check_error, with_section, write

    path = tmp_path / "gpt2.mtok"
    tokmap.export(testdata_file("models/tiktoken/gpt2.tiktoken"), path)
    table = np.frombuffer(MtokFile(path).view(mtok.SECTION_ATOMIC_CHARS, mtok.U64), dtype="<u8").copy()
    assert len(table), "gpt2 has characters of its own"
    table[-1] |= np.uint64(0xFFFFFF00)  # an id far past the vocabulary
    bad = write(tmp_path, with_section(path, mtok.SECTION_ATOMIC_CHARS, table.astype("<u8").tobytes(), mtok.U64),
                "bad.mtok")
    text = open(testdata_file("corpus/multi.txt"), encoding="utf-8").read()[:60000]
    with pytest.raises(tokmap.FormatError) as ei:
        tokmap.load(bad).encode_ordinary(text)
    check_error(ei.value, bad, "atomic_chars", MtokFile(bad).sections[mtok.SECTION_ATOMIC_CHARS][1],
                "outside the vocabulary")
    bare = write(tmp_path, with_section(path, mtok.SECTION_ATOMIC_CHARS, None), "bare.mtok")
    assert tokmap.load(bare).encode_ordinary(text) == tokmap.load(path).encode_ordinary(text)


def test_bmp_index_only_for_batches_of_many_chars(exported, corpus, testdata):
    """The premerge's BMP index (~4 ms to build) waits for a batch of BMP_INDEX_CHARS multi-byte
    chars; before, each is found by binary search. Ids equal tiktoken's either way."""
    from test_conformance import Ref

    from conftest import model_source
    from tokmap.runtime.models import bpe

    ref = Ref("cl100k_base", model_source(testdata, "cl100k_base"))
    tok = tokmap.load(exported("cl100k_base"))
    en = corpus("en")
    assert tok.encode_ordinary(en) == ref.tok.encode_ordinary(en)
    model = tok.pipeline.model
    assert model._batch is not None and model._atomic_bmp is None  # en.txt: a BOM and a few quotes
    text = corpus("utf8seq")  # every code point once: a batch of ~200K multi-byte chars
    assert sum(len(c.encode()) > 1 for c in text) > bpe.BMP_INDEX_CHARS
    assert tok.encode_ordinary(text) == ref.tok.encode_ordinary(text)
    assert model._atomic_bmp is not None


@pytest.mark.parametrize("damage,match", [
    (lambda a: a.reshape(-1, 2)[::-1].ravel(), "keys not ascending"),
    (lambda a: a[:-1], "odd number of entries"),
    (lambda a: np.append(a, np.array([0x10000 << 1, 1], dtype="<u8")), "past U\\+FFFF"),
])
def test_damaged_atomic_edges_is_refused(tmp_path, monkeypatch, damage, match):
    """A mask set wrongly would change ids, not speed: bad layouts are refused at the first batch
    that builds the BMP index, naming the section and its offset; without the section the ids are
    the same."""
    from conftest import testdata_file
    from test_hostile_files import check_error, with_section, write

    from tokmap.runtime.models import bpe

    monkeypatch.setattr(bpe, "BMP_INDEX_CHARS", 0)
    path = tmp_path / "gpt2.mtok"
    tokmap.export(testdata_file("models/tiktoken/gpt2.tiktoken"), path)
    sid = mtok.SECTION_ATOMIC_EDGES
    pairs = np.frombuffer(MtokFile(path).view(sid, mtok.U64), dtype="<u8").copy()
    assert len(pairs) >= 4, "gpt2 has chars whose kind of neighbour fails"
    bad = write(tmp_path, with_section(path, sid, damage(pairs).astype("<u8").tobytes(), mtok.U64), "bad.mtok")
    text = open(testdata_file("corpus/multi.txt"), encoding="utf-8").read()[:60000]
    tok = tokmap.load(bad)
    for _ in range(2):  # (every call, not only the first)
        with pytest.raises(tokmap.FormatError) as ei:
            tok.encode_ordinary(text)
        check_error(ei.value, bad, "atomic_edges", MtokFile(bad).sections[sid][1], match)
    bare = write(tmp_path, with_section(path, sid, None), "bare.mtok")
    assert tokmap.load(bare).encode_ordinary(text) == tokmap.load(path).encode_ordinary(text)


def test_flipped_bit_in_atomic_edges_is_refused(tmp_path, monkeypatch):
    from conftest import testdata_file
    from test_hostile_files import check_error, write

    from tokmap.runtime.models import bpe

    monkeypatch.setattr(bpe, "BMP_INDEX_CHARS", 0)
    path = tmp_path / "gpt2.mtok"
    tokmap.export(testdata_file("models/tiktoken/gpt2.tiktoken"), path)
    sid = mtok.SECTION_ATOMIC_EDGES
    data = bytearray(path.read_bytes())
    off = MtokFile(path).sections[sid][1]
    data[off + 9] ^= 0x04  # a mask bit
    bad = write(tmp_path, bytes(data))
    with pytest.raises(tokmap.FormatError) as ei:
        tokmap.load(bad).encode_ordinary("日本語のテキスト" * 100)
    check_error(ei.value, bad, "atomic_edges", off, "checksum")
