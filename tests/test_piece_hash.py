"""The piece_hash section: the bulk lookup that turns a distinct word that is itself a token into
that token without merging (runtime/models/bpe_batch.whole_tokens, exporter/bpe_aux.piece_hash_table).

Checked here: the hash depends on a word's bytes only, not on where the word sits in a batch; a
table entry counts only when the token's bytes equal the word's (a forged entry is a miss, never
a wrong token); the exported table lists exactly the tokens a piece of their own bytes encodes to,
with and without ignore_merges, on random byte-level vocabularies whose random merge ranks leave
some tokens unreachable; and texts that take the batch path encode like `tokenizers`. A damaged
table (an id past the vocabulary) is refused with the file and section named.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import tokmap
from tokmap import bytelevel, mtok
from tokmap.runtime.models.bpe_batch import piece_hashes, whole_tokens
from tokmap.runtime.reader import MtokFile

from conftest import testdata_file as _data
from test_hostile_files import check_error, with_section, write


def _words(words: list[bytes]):
    raw = np.frombuffer(b"".join(words), dtype=np.uint8)
    lengths = np.array([len(w) for w in words], dtype=np.int64)
    return raw, lengths


def test_hash_depends_on_the_word_only():
    rng = random.Random(7)
    words = [bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    raw, lengths = _words(words)
    together = piece_hashes(raw, np.cumsum(lengths) - lengths, lengths)
    for w, h in zip(words, together.tolist()):
        r1, l1 = _words([w])
        assert piece_hashes(r1, np.zeros(1, dtype=np.int64), l1).tolist() == [h]
    assert int(together.max()) < 1 << 32
    # prefixes, permutations and zero padding of one word hash apart
    raw, lengths = _words([b"ab", b"ba", b"ab\0", b"a", b"\0ab"])
    assert len(set(piece_hashes(raw, np.cumsum(lengths) - lengths, lengths).tolist())) == 5


def _vocab_arrays(vocab: list[bytes]):
    tb = np.frombuffer(b"".join(vocab), dtype=np.uint8)
    off = np.array([0] + list(np.cumsum([len(t) for t in vocab])), dtype="<u4")
    return tb, off


def _table(entries: list[tuple[bytes, int]]) -> np.ndarray:
    raw, lengths = _words([w for w, _ in entries])
    h = piece_hashes(raw, np.cumsum(lengths) - lengths, lengths)
    return np.sort((h << np.uint64(32)) | np.array([i for _, i in entries], dtype=np.uint64))


def test_only_entries_whose_bytes_match_count():
    vocab = [b"a", b"b", b"ab", b"ba", b"abab"]
    tb, off = _vocab_arrays(vocab)
    # "ba" is listed under the hash of "ab" (a forged or colliding entry): never returned for "ab"
    table = _table([(b"ab", 3), (b"abab", 4)])
    raw, lengths = _words([b"ab", b"abab", b"ba", b"zz", b"a"])
    assert whole_tokens(table, tb, off, raw, lengths).tolist() == [-1, 4, -1, -1, -1]
    table = _table([(b"ab", 2), (b"ba", 3)])
    assert whole_tokens(table, tb, off, raw, lengths).tolist() == [2, -1, 3, -1, -1]
    assert whole_tokens(table[:0], tb, off, raw, lengths).tolist() == [-1] * 5


def test_candidates_of_every_length_are_compared_whole():
    """A word of up to EDGE_WHOLE bytes is compared by its edge key, a longer one byte by byte:
    at every length from 1 to 20, an entry listed under the word's hash whose token differs from
    the word in one byte only (its middle byte, which a long word's edge key does not hold) is
    never returned, and one whose token is the word is."""
    from tokmap.runtime.models.bpe_batch import EDGE_WHOLE

    rng = random.Random(5)
    words, forged = [], []
    for n in range(1, 21):
        w = bytes(rng.randrange(97, 123) for _ in range(n))
        k = n // 2
        words.append(w)
        forged.append(w[:k] + bytes([(w[k] - 97 + 1) % 26 + 97]) + w[k + 1:])
    assert EDGE_WHOLE < 20
    vocab = words + forged
    tb, off = _vocab_arrays(vocab)
    raw, lengths = _words(words)
    h = piece_hashes(raw, np.cumsum(lengths) - lengths, lengths)
    listed = lambda ids: np.sort((h << np.uint64(32)) | np.array(ids, dtype=np.uint64))  # noqa: E731
    assert whole_tokens(listed(range(20, 40)), tb, off, raw, lengths).tolist() == [-1] * 20
    assert whole_tokens(listed(range(20)), tb, off, raw, lengths).tolist() == list(range(20))


def test_hash_filter_only_skips_words_that_are_no_token(tmp_path):
    """The prefix filter (built once a batch is large) answers like the plain search, on gpt2's
    table, for its own tokens and for words that are none; and it is built only for large batches."""
    from tokmap.runtime.models.bpe import FILTER_WORDS
    from tokmap.runtime.models.bpe_batch import hash_filter

    out = tmp_path / "gpt2.mtok"
    tokmap.export(_data("models/tiktoken/gpt2.tiktoken"), out)
    tok = tokmap.load(out)
    model = tok.model
    tok.encode(" ".join(f"w{k}" for k in range(300)))  # a small first batch: no filter
    assert model._batch is not None and model._present is None
    table, tb, off = model._piece_hash
    rng = random.Random(3)
    words = [model.token_bytes(rng.randrange(256, 50000)) for _ in range(3000)]
    words += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 9))) for _ in range(3000)]
    raw, lengths = _words(words)
    plain = whole_tokens(table, tb, off, raw, lengths)
    assert (plain >= 0).sum() > 2500 and (plain < 0).sum() > 2500
    assert whole_tokens(table, tb, off, raw, lengths, present=hash_filter(table)).tolist() == plain.tolist()
    # distinct new pieces (gpt2 splits letters from digits): one large batch
    words = list(dict.fromkeys(" " + "".join(rng.choice("abcdefghijklmnop") for _ in range(7))
                               for _ in range(FILTER_WORDS + 100)))
    one_by_one = tokmap.load(out)  # each piece alone: the scalar path, no filter
    assert tok.encode("".join(words)) == [i for w in words for i in one_by_one.encode(w)]
    assert model._present is not None and one_by_one.model._present is None


def test_ids_past_the_vocabulary_are_refused():
    tb, off = _vocab_arrays([b"a", b"b", b"ab"])
    raw, lengths = _words([b"ab"])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        whole_tokens(_table([(b"ab", 9)]), tb, off, raw, lengths)


def _toy_tokenizer_json(rng: random.Random, ignore_merges: bool) -> tuple[dict, list[bytes]]:
    """Byte-level BPE: the 256 bytes, then random joins over b"ab " in training order, each made
    by one merge; ranks shuffled, so some tokens are never formed from their own bytes."""
    vocab = [bytes([b]) for b in range(256)]
    seen = set(vocab)
    pool = [b"a", b"b", b" "]
    merges = []
    while len(vocab) < 256 + 150:
        left, right = rng.choice(pool), rng.choice(pool)
        t = left + right
        if len(t) <= 8 and t not in seen:
            seen.add(t)
            vocab.append(t)
            pool.append(t)
            merges.append((left, right))
    rng.shuffle(merges)
    s = bytelevel.to_str
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore_merges, "vocab": {s(t): i for i, t in enumerate(vocab)},
                  "merges": [[s(a), s(b)] for a, b in merges]},
    }
    return doc, vocab


def _export_toy(tmp_path, rng: random.Random, ignore_merges: bool):
    """(tokenizer.json document, vocabulary, path of its .mtok export)."""
    doc, vocab = _toy_tokenizer_json(rng, ignore_merges)
    src = tmp_path / "tokenizer.json"
    src.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "toy.mtok"
    tokmap.export(src, out)
    return doc, vocab, out


@pytest.mark.parametrize("ignore_merges", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_table_lists_the_whole_piece_tokens_and_batches_encode_like_tokenizers(tmp_path, seed, ignore_merges):
    tokenizers = pytest.importorskip("tokenizers")
    rng = random.Random(f"piece-hash-{seed}-{ignore_merges}")
    doc, vocab, out = _export_toy(tmp_path, rng, ignore_merges)
    tok = tokmap.load(out)
    model = tok.model
    table = np.frombuffer(MtokFile(out).view(mtok.SECTION_PIECE_HASH, mtok.U64), dtype="<u8")
    listed = set((table & np.uint64(0xFFFFFFFF)).tolist())
    whole = {i for i, t in enumerate(vocab) if len(t) > 1
             and (ignore_merges or model._merge(model._symbols(t)) == [i])}
    assert listed == whole
    if not ignore_merges:
        assert len(whole) < len(vocab) - 256, "the random ranks should leave some token unreached"
    ref = tokenizers.Tokenizer.from_str(json.dumps(doc))
    # thousands of distinct words in one call: the misses take the numpy batch path
    text = " ".join("".join(rng.choice("ab") for _ in range(rng.randint(1, 12))) for _ in range(3000))
    assert tok.encode(text) == ref.encode(text).ids
    assert model._piece_hash is not None, "the text should have taken the batch path"
    for piece in rng.sample(vocab[256:], 40):  # each token's text alone, cold and warm
        t = piece.decode()
        assert tokmap.load(out).encode(t) == ref.encode(t).ids


def test_damaged_piece_hash_is_refused(tmp_path):
    src = _data("models/tiktoken/gpt2.tiktoken")
    path = tmp_path / "gpt2.mtok"
    tokmap.export(src, path)
    table = np.frombuffer(MtokFile(path).view(mtok.SECTION_PIECE_HASH, mtok.U64), dtype="<u8").copy()
    table |= np.uint64(0xFFFFFF00)  # every id far past the vocabulary
    bad = write(tmp_path, with_section(path, mtok.SECTION_PIECE_HASH, table.astype("<u8").tobytes(), mtok.U64),
                "bad.mtok")
    tok = tokmap.load(bad)  # read on the first batch merge, not at load
    with pytest.raises(tokmap.FormatError) as ei:
        tok.encode_ordinary(open(_data("corpus/en.txt"), encoding="utf-8").read()[:60000])
    check_error(ei.value, bad, "piece_hash", MtokFile(bad).sections[mtok.SECTION_PIECE_HASH][1],
                "outside the vocabulary")
    bare = write(tmp_path, with_section(path, mtok.SECTION_PIECE_HASH, None), "bare.mtok")
    text = open(_data("corpus/en.txt"), encoding="utf-8").read()[:60000]
    assert tokmap.load(bare).encode_ordinary(text) == tokmap.load(path).encode_ordinary(text)


@pytest.mark.parametrize("table", ["full", "none", "without unreached"])
def test_unreached_tokens_as_whole_pieces(tmp_path, table):
    """Under ignore_merges a piece equal to a token is that token even where merging does not reach
    it. The whole-token lookup finds those first; with no table, or with their entries missing (a
    collision costs the same), the check after merging must still catch every one."""
    tokenizers = pytest.importorskip("tokenizers")
    for attempt in range(40):  # a vocabulary with some " ab..." token out of reach
        rng = random.Random(f"unreached-{attempt}")
        doc, vocab, out = _export_toy(tmp_path, rng, True)
        f = MtokFile(out)
        unreached = set(f.view(mtok.SECTION_UNREACHED, mtok.U32))
        words = [vocab[i].decode() for i in unreached if vocab[i][:1] == b" " and b" " not in vocab[i][1:]]
        if words:
            break
    assert words, "no seed left a ' ab...' token unreached"
    if table == "none":
        out = write(tmp_path, with_section(out, mtok.SECTION_PIECE_HASH, None), "none.mtok")
    elif table == "without unreached":
        full = np.frombuffer(f.view(mtok.SECTION_PIECE_HASH, mtok.U64), dtype="<u8")
        kept = full[~np.isin((full & np.uint64(0xFFFFFFFF)).astype(np.int64), sorted(unreached))]
        out = write(tmp_path, with_section(out, mtok.SECTION_PIECE_HASH, kept.astype("<u8").tobytes(), mtok.U64),
                    "partial.mtok")
    ref = tokenizers.Tokenizer.from_str(json.dumps(doc))
    filler = [" " + "".join(rng.choice("ab") for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    text = "".join(rng.sample(filler + words * 20, len(filler) + len(words) * 20))
    tok = tokmap.load(out)
    assert tok.encode(text) == ref.encode(text).ids
    assert tok.model._batch is not None, "the text should have taken the batch path"
