"""The exporter's smaller merge tables (exporter/merges.py) encode exactly like the full ones.

Random byte-level vocabularies over a three-letter alphabet, with every split of every token as a
merge (as tiktoken-derived tables have) and ranks ordered four ways: tiktoken's (every split shares
its token's rank), the Hugging Face converter's (by token, then left and right part), shuffled inside
each token's block, and fully random. Each text is merged with the source table and with the kept
merges; the ids must agree, and the kept table must hold at most one merge per result. Real exports
are checked for the flag and sections they carry.
"""

from __future__ import annotations

import random

import pytest

import tokmap
from tokmap import mtok
from tokmap.exporter.merges import live_merges, ranks_follow_results, ranks_permute
from tokmap.runtime.reader import MtokFile

from conftest import testdata_file as _require

NO = mtok.NO_ID


def _vocab(rng: random.Random, n_extra: int) -> list[bytes]:
    """All 256 single bytes, then random joins of earlier tokens over b"abc" (a training-like order)."""
    vocab = [bytes([b]) for b in range(256)]
    seen = set(vocab)
    pool = [b"a", b"b", b"c"]
    while len(vocab) < 256 + n_extra:
        t = rng.choice(pool) + rng.choice(pool)
        if len(t) <= 7 and t not in seen:
            seen.add(t)
            vocab.append(t)
            pool.append(t)
    return vocab


def _merges(vocab: list[bytes], style: str, rng: random.Random) -> dict[int, tuple[int, int]]:
    """key -> (rank, result) for every split of every multi-byte token into two tokens."""
    ids = {t: i for i, t in enumerate(vocab)}
    splits = [(ids[t[:k]], ids[t[k:]], i) for i, t in enumerate(vocab) if len(t) > 1
              for k in range(1, len(t)) if t[:k] in ids and t[k:] in ids]
    if style == "tiktoken":
        ranked = [(res, s) for s in splits for res in [s[2]]]
    elif style == "hf":
        ranked = list(enumerate(sorted(splits, key=lambda s: (s[2], s[0], s[1]))))
    elif style == "shuffled-blocks":
        order = sorted(splits, key=lambda s: (s[2], rng.random()))
        ranked = list(enumerate(order))
    else:
        ranked = list(enumerate(rng.sample(splits, len(splits))))
    return {(left << 32) | right: (rank, res) for rank, (left, right, res) in ranked}


def _bpe(merges: dict[int, tuple[int, int]], data: bytes) -> list[int]:
    """Lowest rank first, ties leftmost (tokenizers, tiktoken and models/bpe.py)."""
    ids = list(data)
    while True:
        best, at = None, -1
        for k in range(len(ids) - 1):
            hit = merges.get((ids[k] << 32) | ids[k + 1])
            if hit is not None and (best is None or hit[0] < best[0]):
                best, at = hit, k
        if best is None:
            return ids
        ids[at : at + 2] = [best[1]]


@pytest.mark.parametrize("style", ["tiktoken", "hf", "shuffled-blocks", "random"])
@pytest.mark.parametrize("seed", range(12))
def test_kept_merges_encode_like_all_merges(style, seed):
    rng = random.Random(f"{style}-{seed}")
    vocab = _vocab(rng, 60)
    full = _merges(vocab, style, rng)
    kept = live_merges(full, vocab, list(range(256)), NO)
    assert kept is not None and set(kept) <= set(full)
    results = [res for _rank, res in kept.values()]
    assert len(results) == len(set(results))
    for _ in range(300):
        text = bytes(rng.choice(b"abc") for _ in range(rng.randint(1, 40)))
        assert _bpe(kept, text) == _bpe(full, text), text
    if style in ("tiktoken", "hf"):  # ranks grow with the token in both; one merge per token is left
        assert ranks_follow_results(kept)


def test_a_split_of_two_overlapping_merges_keeps_the_one_that_fires():
    # "aba" from "ab"+"a" or "a"+"ba": alone, a+b merges first, so only ab+a can ever form it.
    vocab = [bytes([b]) for b in range(256)] + [b"ab", b"ba", b"aba"]
    ab, ba, aba = 256, 257, 258
    full = {(97 << 32) | 98: (0, ab), (98 << 32) | 97: (1, ba), (ab << 32) | 97: (3, aba), (97 << 32) | ba: (2, aba)}
    assert live_merges(full, vocab, list(range(256)), NO) == {k: full[k] for k in [(97 << 32) | 98, (98 << 32) | 97,
                                                                                   (ab << 32) | 97]}


def test_no_pruning_without_its_preconditions():
    vocab = [bytes([b]) for b in range(256)] + [b"ab"]
    merges = {(97 << 32) | 98: (0, 256)}
    byte_ids = list(range(256))
    byte_ids[7] = NO  # a byte without a token: the span is not its bytes
    assert live_merges(merges, vocab, byte_ids, NO) is None
    odd = vocab[:-1] + [b"ba"]  # a result that is not its parts joined
    assert live_merges(merges, odd, list(range(256)), NO) is None


@pytest.mark.parametrize("merges,ok", [
    ({1: (0, 300), 2: (1, 301), 3: (1, 301)}, True),   # equal results, equal ranks
    ({1: (0, 300), 2: (1, 301), 3: (2, 301)}, False),  # equal results, different ranks: ties differ
    ({1: (5, 300), 2: (4, 301)}, False),                # order reversed
    ({1: (5, 300), 2: (5, 301)}, False),                # a tie the results would not have
    ({}, True),
])
def test_ranks_follow_results(merges, ok):
    assert ranks_follow_results(merges) is ok


@pytest.mark.parametrize("src,kept", [("models/tiktoken/gpt2.tiktoken", 50_000),
                                      ("models/llama3/tokenizer.json", 127_156)])
def test_real_exports_drop_ranks_and_dead_merges(tmp_path, src, kept):
    out = tmp_path / "t.mtok"
    tokmap.export(_require(src), out)
    f = MtokFile(out)
    assert not f.has(mtok.SECTION_MERGE_RANKS)
    assert len(f.view(mtok.SECTION_MERGE_KEYS, mtok.U64)) == len(f.view(mtok.SECTION_MERGE_RESULTS, mtok.U32)) == kept
    tok = tokmap.load(out)
    assert tok.meta["model"]["ranks_from_results"] is True
    model = tok.model
    assert model.ranks is model.results


@pytest.mark.parametrize("merges,ok", [
    ({1: (0, 300), 2: (1, 301), 3: (2, 300)}, True),
    ({1: (1, 300), 2: (2, 301)}, False),  # no rank 0
    ({1: (0, 300), 2: (0, 301)}, False),  # a shared rank
    ({1: (0, 300), 2: (2, 301)}, False),  # a gap
    ({}, True),
])
def test_ranks_permute(merges, ok):
    assert ranks_permute(merges) is ok


@pytest.mark.parametrize("name", ["gemma3", "llama2"])
def test_permuted_ranks_make_codes_at_lookup(name, exported, corpus, tmp_path):
    """SentencePiece-style tables have ranks 0 .. m - 1: the export says so (model.ranks_permutation),
    and the batch merge then makes each code at lookup from them without checking the ranks.
    Those codes equal the checked build's; a file without the flag encodes alike; a file whose
    rank section was damaged after export is refused naming it, where the unchecked build would
    have ordered merges by a wrong rank."""
    import numpy as np
    from test_hostile_files import check_error, with_meta, write

    from tokmap.runtime.models.bpe_batch import BatchMerger

    path = exported(name)
    tok = tokmap.load(path)
    model = tok.model
    assert tok.meta["model"]["ranks_permutation"] is True
    nonmono = model._f.view(mtok.SECTION_MERGE_NONMONO, mtok.U8)
    short, checked = (BatchMerger(model.keys, model.ranks, model.results, nonmono, p) for p in (True, False))
    short.build_codes()
    checked.build_codes()
    assert short._code is None and checked._code is not None  # made at lookup; made once
    every = np.arange(short.m)
    made, built = short.codes_at(every), checked.codes_at(every)
    assert made.dtype == built.dtype == np.int64
    assert np.array_equal(made, built)
    text = corpus("wagahai")[:30000] + corpus("code")[:30000]
    want = tok.encode(text)
    assert model._batch.permutation
    bare = write(tmp_path, with_meta(path, lambda m: m["model"].pop("ranks_permutation") and None), "bare.mtok")
    plain = tokmap.load(bare)
    assert plain.encode(text) == want and not plain.model._batch.permutation
    data = bytearray(path.read_bytes())
    _dt, off, length, _crc = MtokFile(path).sections[mtok.SECTION_MERGE_RANKS]
    data[off + length // 2] ^= 0x40
    damaged = write(tmp_path, bytes(data), "damaged.mtok")
    with pytest.raises(tokmap.FormatError) as e:
        tokmap.load(damaged).encode(text)
    check_error(e.value, damaged, "merge_ranks", off, "checksum")


@pytest.mark.parametrize("name", ["llama3", "cl100k_base"])
def test_narrow_codes_made_at_lookup(name, exported):
    """Where the ranks are the results (narrow codes), each code is made at lookup: 2 * result,
    plus 1 when any merge with that result has the non-monotone bit (Llama 3 has 72 such merges,
    cl100k none). Checked for every merge against that rule computed here from the file's arrays,
    and the bit's meaning against the bitmap's own rule (bpe_batch.nonmono_bitmap)."""
    import numpy as np

    from tokmap.runtime.models.bpe_batch import BatchMerger, nonmono_bitmap

    model = tokmap.load(exported(name)).model
    nonmono = bytes(model._f.view(mtok.SECTION_MERGE_NONMONO, mtok.U8))
    merger = BatchMerger(model.keys, model.ranks, model.results, nonmono)
    assert not merger.wide
    merger.build_codes()
    assert merger._code is None
    keys, results = (np.frombuffer(a, dtype) for a, dtype in ((model.keys, "<u8"), (model.results, "<u4")))
    ranks = np.frombuffer(model.ranks, "<u4")
    assert nonmono == nonmono_bitmap(keys, ranks, results)
    bits = np.unpackbits(np.frombuffer(nonmono, np.uint8), count=len(keys), bitorder="little").astype(bool)
    assert (int(bits.sum()) > 0) is (name == "llama3")
    flagged = np.zeros(int(results.max()) + 1, bool)
    flagged[results[bits]] = True
    want = 2 * results.astype(np.int64) + flagged[results]
    got = merger.codes_at(np.arange(len(keys)))
    assert got.dtype == np.int32 and np.array_equal(got, want)


def test_ranks_permutation_is_refused_beside_ranks_from_results(tmp_path):
    from test_hostile_files import with_meta, write

    src = tmp_path / "t.mtok"
    tokmap.export(_require("models/llama3/tokenizer.json"), src)
    for value in (True, "yes"):
        def edit(m, value=value):
            m["model"]["ranks_permutation"] = value
        bad = write(tmp_path, with_meta(src, edit))
        with pytest.raises(tokmap.FormatError, match="ranks_permutation"):
            tokmap.load(bad)

