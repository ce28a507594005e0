"""The numpy batch merge (runtime/models/bpe_batch.py) against a plain sequential BPE written here.

The reference is the textbook loop -- merge the lowest-ranked adjacent pair, leftmost first, until
none is left -- over random merge tables built to be hostile: ranks that are not monotone (a merge
whose result is an operand of a lower-ranked merge), several pairs sharing one rank and result (as
tiktoken's all-splits tables do), and words made of runs ("aaaa") where occurrences overlap.
The real-model side (every id against tokenizers/tiktoken) is tests/test_conformance.py; here the
two derived sections the batch path reads are checked too: equal to what the runtime would compute,
optional (a file without them encodes the same), and refused with a FormatError when damaged.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import tokmap
from tokmap import mtok
from tokmap.runtime.models import bpe, bpe_batch
from tokmap.runtime.models.bpe_batch import BatchMerger, nonmono_bitmap
from tokmap.runtime.reader import MtokFile

from conftest import testdata_file as _data
from test_hostile_files import check_error, load_error, with_section, write


def reference_bpe(word: list[int], table: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    word = list(word)
    while len(word) > 1:
        best = None
        for k in range(len(word) - 1):
            hit = table.get((word[k], word[k + 1]))
            if hit is not None and (best is None or hit[0] < best[0]):
                best = (hit[0], k, hit[1])
        if best is None:
            break
        _, k, result = best
        word[k:k + 2] = [result]
    return word


def random_table(rng: random.Random, n_base: int, n_merges: int, shared_ranks: bool):
    """Merges over ids 0..n_base-1 and the results they create; ranks shuffled so that many merges
    are non-monotone; with shared_ranks, consecutive merges to one result share its rank."""
    table: dict[tuple[int, int], tuple[int, int]] = {}
    next_id = n_base
    rank = 0
    while len(table) < n_merges:
        left, right = rng.randrange(next_id), rng.randrange(next_id)
        if (left, right) in table:
            continue
        table[(left, right)] = (rank, next_id)
        if shared_ranks and rng.random() < 0.3:
            other = (rng.randrange(next_id), rng.randrange(next_id))
            table.setdefault(other, (rank, next_id))
        next_id += 1
        rank += 1
    ranks = list(range(rank))
    rng.shuffle(ranks)
    return {pair: (ranks[r], res) for pair, (r, res) in table.items()}


def merger_for(table, rank_step: int = 1) -> BatchMerger:
    """rank_step > 1 spreads the ranks apart (sparse ranks: the merger renumbers them)."""
    keys = sorted(table)
    packed = np.array([(a << 32) | b for a, b in keys], dtype="<u8")
    ranks = np.array([table[k][0] * rank_step for k in keys], dtype="<u4")
    results = np.array([table[k][1] for k in keys], dtype="<u4")
    if table and all(r == res for r, res in table.values()):  # ranks_from_results: one buffer, narrow codes
        buf = results.tobytes()
        return BatchMerger(packed.tobytes(), buf, buf)
    return BatchMerger(packed.tobytes(), ranks.tobytes(), results.tobytes())


def ranked_by_result(table, rng: random.Random, n_base: int):
    """The same merges with every id relabelled at random and each merge's rank its new result id,
    as in tiktoken's tables (merges to one token share its rank); (that table, the base ids)."""
    n = 1 + max(max(a, b, res) for (a, b), (_, res) in table.items())
    label = list(range(n))
    rng.shuffle(label)
    out = {(label[a], label[b]): (label[res], label[res]) for (a, b), (_, res) in table.items()}
    return out, label[:n_base]


def run_batch(merger, words, finish=None, min_yield=0):
    sym = np.array([s for w in words for s in w], dtype=np.int64)
    final, counts = merger.merge(sym, np.array([len(w) for w in words], dtype=np.int64), finish, min_yield)
    out, pos = [], 0
    for c in counts.tolist():
        out.append(final[pos:pos + c].tolist())
        pos += c
    return out


@pytest.mark.parametrize("seed", range(12))
def test_batch_merge_equals_sequential_bpe(seed):
    rng = random.Random(seed)
    n_base = rng.choice([2, 3, 5, 12])
    table = random_table(rng, n_base, rng.choice([5, 40, 300]), shared_ranks=seed % 2 == 0)
    merger = merger_for(table)
    assert merger.nonmono.any() or len(table) < 10  # the tables do exercise non-monotone merges
    check_merges(merger, table, random_words(rng, list(range(n_base))))


def random_words(rng: random.Random, base: list[int]) -> list[list[int]]:
    """400 words over the base ids, 30% of them runs of one symbol (overlapping occurrences)."""
    words = []
    for _ in range(400):
        n = rng.choice([1, 2, 3, 5, 8, 20, 60])
        words.append([rng.choice(base)] * n if rng.random() < 0.3 else [rng.choice(base) for _ in range(n)])
    return words


def check_merges(merger, table, words) -> None:
    """The batch merge equals the sequential one, alone, with the scalar finish (few words left, or
    a long word's slow rounds: it continues from mid-merge) and with min_yield."""
    expected = [reference_bpe(w, table) for w in words]
    assert run_batch(merger, words) == expected
    finish = lambda w, ranks=None: reference_bpe(w, table)  # noqa: E731
    assert run_batch(merger, words, finish) == expected
    for w, e in zip(words[:40], expected[:40]):
        assert run_batch(merger, [w], finish, min_yield=4) == [e]


@pytest.mark.parametrize("seed", range(6))
def test_ranks_from_results_merge_alike(seed):
    """Ranks that are the results (one buffer: narrow int32 codes, the result read from the code)
    merge like the sequential BPE, runs and non-monotone merges included."""
    rng = random.Random(100 + seed)
    table, base = ranked_by_result(random_table(rng, 4, rng.choice([40, 300]), shared_ranks=True), rng, 4)
    merger = merger_for(table)
    assert not merger.wide and merger.nonmono.any()
    check_merges(merger, table, random_words(rng, base))


# (EAGER_SHARE, IDLE_SHARE): the partners cut out every round (the slots never hold a dead one);
# never, with the dead slots compacted at the next round's start; never, and never compacted (the
# longest runs of dead slots for next_live / prev_live to skip); the defaults.
POLICIES = [(10**9, 3), (1, 10**9), (1, 1), (bpe_batch.EAGER_SHARE, bpe_batch.IDLE_SHARE)]


@pytest.mark.parametrize("policy", POLICIES, ids=["cut", "lazy-compact", "lazy-never", "default"])
@pytest.mark.parametrize("seed", range(4))
def test_every_compaction_policy_merges_alike(monkeypatch, policy, seed):
    """A merged symbol's partner is cut out of the arrays at once, or its slot marked dead and
    skipped until a compaction (bpe_batch._Slots): each policy merges like the sequential BPE,
    on narrow and wide codes, non-monotone merges and runs included."""
    eager, idle = policy
    monkeypatch.setattr(bpe_batch, "EAGER_SHARE", eager)
    monkeypatch.setattr(bpe_batch, "IDLE_SHARE", idle)
    rng = random.Random(300 + seed)
    table = random_table(rng, 4, rng.choice([40, 300]), shared_ranks=seed % 2 == 0)
    if seed % 2:
        table, base = ranked_by_result(table, rng, 4)
    else:
        base = list(range(4))
    check_merges(merger_for(table), table, random_words(rng, base))


@pytest.mark.parametrize("policy", POLICIES, ids=["cut", "lazy-compact", "lazy-never", "default"])
def test_overlapping_occurrences_across_a_dead_slot(monkeypatch, policy):
    """A run whose pairs overlap across a dead slot: 0 0 1 2 0 0 with 1 2 -> 0 first, then the
    monotone 0 0 -> 3 taken at every other occurrence of the run 0 0 0 _ 0 0 (the partner of the
    third 0 is the fourth, past the dead slot): (0 0)(0 0) 0, as sequential BPE merges it, never
    the third 0 merged twice."""
    monkeypatch.setattr(bpe_batch, "EAGER_SHARE", policy[0])
    monkeypatch.setattr(bpe_batch, "IDLE_SHARE", policy[1])
    table = {(1, 2): (0, 0), (0, 0): (1, 3)}
    words = [[0, 0, 1, 2, 0, 0], [0, 1, 2, 0, 0], [0, 0, 0, 1, 2, 0, 0, 0]]
    assert run_batch(merger_for(table), words) == [reference_bpe(w, table) for w in words]


# (ONE_LEN, ONE_SHARE, ONE_IDLE): one merge a word a round from the second round on, compacted as
# by default, at every round, never; the defaults.
ONE_POLICIES = [(0, 0, 2), (0, 0, 1), (0, 0, 10**9),
                (bpe_batch.ONE_LEN, bpe_batch.ONE_SHARE, bpe_batch.ONE_IDLE)]


@pytest.mark.parametrize("policy", ONE_POLICIES, ids=["one", "one-compact", "one-never", "default"])
@pytest.mark.parametrize("seed", range(6))
def test_one_merge_rounds_merge_alike(monkeypatch, policy, seed):
    """_rounds_one (one merge a word a round, found by a minimum over packed code and slot)
    merges like the sequential BPE: its lowest pair, leftmost of equal ones, where a word holds
    the same pair several times (runs), non-monotone merges, and with the scalar finish; and,
    where forced, it did run (narrow codes) or did not (wide: no room for the slot)."""
    for name, value in zip(("ONE_LEN", "ONE_SHARE", "ONE_IDLE"), policy):
        monkeypatch.setattr(bpe_batch, name, value)
    ran = []
    real = BatchMerger._rounds_one
    monkeypatch.setattr(BatchMerger, "_rounds_one", lambda self, *a: ran.append(1) or real(self, *a))
    rng = random.Random(500 + seed)
    table = random_table(rng, 4, rng.choice([40, 300]), shared_ranks=True)
    if seed % 3:
        table, base = ranked_by_result(table, rng, 4)
    else:
        base = list(range(4))
    merger = merger_for(table)
    check_merges(merger, table, random_words(rng, base))
    if policy[0] == 0:
        assert bool(ran) == (not merger.wide)


def test_dead_runs_are_compacted_before_they_grow_long(monkeypatch):
    """A run ("a" * 255) merged in lazy rounds, among many words that keep the round's merges
    below EAGER_SHARE: its runs of dead slots double each round, and a neighbour lookup that
    stepped over more than SKIP_MOST of them has the slots compacted at the next round, so no
    lookup steps over more than twice that (each step is a numpy pass); the ids are still the
    sequential ones."""
    table = {(0, 0): (0, 40)}  # the run: 0 0 -> 40, 40 40 -> 41, ... (rank k: halves it)
    table.update({(40 + k, 40 + k): (1 + k, 41 + k) for k in range(7)})
    table[(1, 2)] = (10, 100)  # the other words: 1 2 3 ... 30, merged one pair a round
    table.update({(97 + k, k): (8 + k, 98 + k) for k in range(3, 31)})
    words = [[0] * 255] + [list(range(1, 31)) for _ in range(3000)]
    steps = []
    for name in ("next_live", "prev_live"):
        real = getattr(bpe_batch._Slots, name)

        def wrapped(self, slots, real=real):  # (the steps of each lookup, the slots' record kept)
            before, self.longest_skip = self.longest_skip, 0
            out = real(self, slots)
            steps.append(self.longest_skip)
            self.longest_skip = max(before, self.longest_skip)
            return out
        monkeypatch.setattr(bpe_batch._Slots, name, wrapped)
    assert run_batch(merger_for(table), words) == [reference_bpe(w, table) for w in words]
    assert max(steps) > bpe_batch.SKIP_MOST // 2  # the run's dead slots did pile up
    assert max(steps) <= 2 * bpe_batch.SKIP_MOST + 1


@pytest.mark.parametrize("by_result", [False, True])
def test_a_few_long_words_keep_the_bulk_rounds(by_result):
    """Few words left but many symbols (a run merged as one chunk because its chunks did not
    glue): the rounds go on while they merge in bulk, and the scalar finish gets only what they
    leave (at most FINISH_SYMBOLS symbols), where it used to get the whole run at once. A long
    word whose rounds merge little still goes to the finish after a round. Every result equals
    the sequential BPE."""
    rng = random.Random(31)
    # The run of 0: 0 0 -> 40, 40 40 -> 41, ... (monotone, so a round halves it); other words over
    # 9..19: one merge a round. by_result: each rank is its result (narrow codes), else apart.
    chain = [0] + [40 + k for k in range(9)]
    table = {(a, a): (b if by_result else k, b) for k, (a, b) in enumerate(zip(chain, chain[1:]))}
    table.update({(9 + k, 10 + k): (60 + k if by_result else 20 + k, 60 + k) for k in range(10)})
    base = list(range(9, 20))
    merger = merger_for(table)
    assert merger.wide != by_result and not merger.nonmono.any()
    finished = []

    def finish(w, ranks=None):
        finished.append(len(w))
        return reference_bpe(w, table)

    runs = [[0] * 6000, [0] * 700]
    assert run_batch(merger, runs, finish) == [reference_bpe(w, table) for w in runs]
    assert max(finished, default=0) <= bpe_batch.FINISH_SYMBOLS, finished
    finished.clear()
    slow = [[rng.choice(base) for _ in range(3000)]]
    assert run_batch(merger, slow, finish) == [reference_bpe(w, table) for w in slow]
    assert finished and finished[0] > bpe_batch.FINISH_SYMBOLS, finished


@pytest.mark.parametrize("seed", range(4))
def test_sparse_ranks_merge_alike_and_report_the_file_ranks(seed):
    """Ranks far apart (up to ~2^31) are renumbered densely for the codes: the merge equals the
    sequential one, and the ranks handed to the scalar finish are the file's, not the dense ones."""
    rng = random.Random(seed)
    table = random_table(rng, 5, 300, shared_ranks=seed % 2 == 0)
    merger = merger_for(table, rank_step=7_000_003)
    words = [[rng.randrange(5) for _ in range(rng.choice([1, 3, 9, 40]))] for _ in range(300)]
    assert run_batch(merger, words) == [reference_bpe(w, table) for w in words]
    assert merger.rank_of is not None  # the sparse path was taken
    pairs = list(table)
    got = merger.file_ranks(merger.codes(np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])))
    assert got.tolist() == [table[p][0] * 7_000_003 for p in pairs]
    seen = []
    finish = lambda w, ranks: seen.append((list(w), ranks)) or reference_bpe(w, table)  # noqa: E731
    run_batch(merger, [w for w in words if len(w) > 1][:5], finish)
    assert seen
    for w, ranks in seen:
        expect = [table[(a, b)][0] * 7_000_003 if (a, b) in table else -1 for a, b in zip(w, w[1:])]
        assert ranks == expect


@pytest.mark.parametrize("seed", range(4))
def test_pair_lookup_of_long_runs_equals_one_by_one(seed):
    """codes() collapses runs of one pair before searching ("aaaa", spaces): the same codes as
    looking each pair up on its own, for runs of present and absent pairs alike."""
    rng = random.Random(seed)
    table = random_table(rng, 6, 40, shared_ranks=True)
    merger = merger_for(table)
    pairs = list(table) + [(rng.randrange(60), rng.randrange(60)) for _ in range(20)]
    runs = [rng.choice(pairs) for _ in range(rng.choice([3, 300]))]
    lengths = [5000] + [rng.choice([1, 2, 50, 4000]) for _ in runs[1:]]
    left = np.repeat([a for a, _ in runs], lengths)
    right = np.repeat([b for _, b in runs], lengths)
    assert len(left) > 4096 and len(runs) * 4 < len(left)  # the collapsing path is taken
    one_by_one = np.concatenate([merger.codes(left[i:i + 1], right[i:i + 1]) for i in range(0, len(left), 97)])
    assert merger.codes(left, right)[::97].tolist() == one_by_one.tolist()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("id_bits", [3, 17, 24, 31])
def test_pair_lookup_of_many_distinct_pairs_equals_one_by_one(seed, id_bits, monkeypatch):
    """codes() of many pairs that do not run together: sorted once with their positions packed
    beside them (ids of up to id_bits bits), or through np.unique when the ids leave too few bits
    for the positions (31-bit ids leave 2); the same codes as looking each pair up on its own, in
    the order asked, present and absent pairs alike."""
    from tokmap.runtime.models import bpe_batch

    rng = random.Random(f"{seed}-{id_bits}")
    top = 1 << id_bits
    ids = sorted({rng.randrange(top) for _ in range(64)} | {top - 1})
    table: dict[tuple[int, int], tuple[int, int]] = {}
    while len(table) < min(200, len(ids) ** 2 // 2):
        table.setdefault((rng.choice(ids), rng.choice(ids)), (len(table), rng.randrange(1 << 20)))
    keys = sorted(table)
    merger = BatchMerger(np.array([(a << 32) | b for a, b in keys], dtype="<u8").tobytes(),
                         np.array([table[k][0] for k in keys], dtype="<u4").tobytes(),
                         np.array([table[k][1] for k in keys], dtype="<u4").tobytes(),
                         bytes(len(keys) // 8 + 1))  # (no bitmap computed over ids up to 2^31)
    absent = [(rng.choice(ids), rng.choice(ids)) for _ in range(200)]
    pairs = [rng.choice(list(table) + absent) for _ in range(6000)]
    left = np.array([a for a, _ in pairs], dtype=np.int64)
    right = np.array([b for _, b in pairs], dtype=np.int64)
    unique = np.unique
    calls = []
    monkeypatch.setattr(bpe_batch.np, "unique", lambda *a, **k: calls.append(1) or unique(*a, **k))
    got = merger.codes(left, right)
    assert bool(calls) == (id_bits == 31)  # the sort alone wherever the positions fit
    monkeypatch.undo()
    one_by_one = [int(merger.codes(left[i:i + 1], right[i:i + 1])[0]) for i in range(0, len(pairs), 7)]
    assert got[::7].tolist() == one_by_one
    assert sum(c < merger.nopair for c in one_by_one) > 50 and merger.nopair in one_by_one


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("present", [0.02, 0.5])
def test_screened_pair_lookup_equals_one_by_one(seed, present):
    """codes(screen=True) of many pairs (a large batch's) screens them through the merge keys'
    hash filter first: the same codes as looking each pair up on its own, for merges (never
    screened out: their slots are set), absent pairs screened out, and absent pairs whose slot a
    merge shares (searched, and found absent); with few or many of the pairs merges."""
    rng = random.Random(f"{seed}-{present}")
    table = random_table(rng, 40, 3000, shared_ranks=seed % 2 == 0)
    merger = merger_for(table)
    merges = list(table)
    pairs = [rng.choice(merges) if rng.random() < present else (rng.randrange(5000), rng.randrange(5000))
             for _ in range(20000)]
    left = np.array([a for a, _ in pairs], dtype=np.int64)
    right = np.array([b for _, b in pairs], dtype=np.int64)
    got = merger.codes(left, right, screen=True)
    assert merger._pair_filter is not None  # the screened path was taken
    packed = (left.astype(np.uint64) << np.uint64(32)) | right.astype(np.uint64)
    slots = bpe_batch.hash_slots(packed * bpe_batch.KEY_MIX)
    before = packed.copy()
    assert bpe_batch.key_slots(packed).tolist() == slots.tolist() and (packed == before).all()
    absent = np.array([p not in table for p in pairs])
    assert (merger._pair_filter[slots] & absent).any() and (~merger._pair_filter[slots]).any()
    assert got.tolist() == merger.codes(left, right).tolist()  # (unscreened: the sorted search)
    ranks = merger.file_ranks(got).tolist()
    assert [r if r >= 0 else None for r in ranks] == [table[p][0] if p in table else None for p in pairs]


def test_large_batches_screen_their_lookups():
    """A batch merge of SCREEN_SYMBOLS symbols or more screens its pair lookups (the filter is
    made), a smaller one does not; both equal the sequential merge."""
    rng = random.Random(5)
    table = random_table(rng, 30, 2000, shared_ranks=False)
    words = [[rng.randrange(30) for _ in range(rng.choice([4, 9, 20]))] for _ in range(6000)]
    small, large = merger_for(table), merger_for(table)
    few = words[:200]
    assert run_batch(small, few) == [reference_bpe(w, table) for w in few] and small._pair_filter is None
    assert sum(map(len, words)) >= bpe_batch.SCREEN_SYMBOLS
    assert run_batch(large, words) == [reference_bpe(w, table) for w in words]
    assert large._pair_filter is not None


def test_batch_merge_on_gpt2_matches_scalar_path():
    tok = tokmap.load(_gpt2_export())
    model = tok.model
    rng = random.Random(7)
    text = open(_data("corpus/en.txt"), encoding="utf-8").read()[:20000]
    pieces = list(dict.fromkeys(tok.pipeline.split_fast(text)))
    pieces += ["".join(rng.choice("ab ") for _ in range(rng.randrange(1, 300))) for _ in range(200)]
    pieces += ["a" * 1000, " " * 777, "日本語" * 100]
    batch = model._encode_many(pieces)
    model.piece_cache.clear()
    # (the cache keeps a short piece's ids as they come: a tuple; a longer one may be a list)
    assert all(type(ids) is tuple for p, ids in zip(pieces, batch) if len(p) <= bpe.CACHE_PIECE)
    assert list(map(tuple, batch)) == [tuple(model._merge(model._symbols(p.encode("utf-8")))) for p in pieces]


def test_many_multi_token_words_share_int_objects(monkeypatch):
    """A batch of mostly multi-token words (random ideographs) holding at least as many ids as the
    vocabulary has: their tuples hold the vocabulary's shared int objects (idlist.IdLists), and
    equal the scalar path's; a smaller batch's ids are plain ints, as before."""
    # (the words merged whole, as Llama 3's Japanese pieces are: not cut where no merge crosses)
    monkeypatch.setattr(bpe.BPE, "_segmented", lambda self, texts, joined, n_chars=None: None)
    tok = tokmap.load(_gpt2_export())
    model = tok.model
    rng = random.Random(9)
    words = ["".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(rng.randint(2, 12))) for _ in range(9000)]
    small = model._encode_many(words[:50])
    assert model._lists is None or model._lists._objs is None
    got = model._encode_many(words)
    assert sum(map(len, got)) >= len(model.off) - 1 and model._lists._objs is not None
    objs = model._lists._objs
    assert all(i is objs[i] for ids in got[:500] for i in ids)
    expect = [tuple(model._merge(model._symbols(w.encode("utf-8")))) for w in words]
    assert list(map(tuple, got)) == expect and list(map(tuple, small)) == expect[:50]


def test_encode_pieces_cache_states(monkeypatch):
    """encode_pieces gives each piece's scalar ids whatever the cache holds: empty, some of the
    pieces, all of them; with long pieces (remembered within their budget); and when the cache
    limit empties it (set low here) -- and the cache then holds exactly the pieces it was given."""
    from tokmap.runtime.models import bpe

    model = tokmap.load(_gpt2_export()).model
    text = open(_data("corpus/en.txt"), encoding="utf-8").read()[:30000]
    pieces = tokmap.load(_gpt2_export()).pipeline.split_fast(text)
    long_ones = [" " * 300, "ab" * 200]
    scalar = {p: tuple(model._merge(model._symbols(p.encode("utf-8")))) for p in set(pieces + long_ones)}
    expect = lambda ps: [i for p in ps for i in scalar[p]]  # noqa: E731
    half = pieces[: len(pieces) // 2]
    for ps in (half, pieces, pieces, half + long_ones + half, long_ones):
        assert model.encode_pieces(ps) == expect(ps)
    assert {p for p in model.piece_cache if len(p) > bpe.CACHE_PIECE} == set(long_ones)
    monkeypatch.setattr(bpe, "CACHE_MAX", 50)
    model.piece_cache.clear()
    model.encode_pieces(half[:20])
    assert model.encode_pieces(pieces) == expect(pieces)  # 20 cached + many new: emptied first
    assert set(model.piece_cache) == set(pieces)
    mixed = pieces[:40] + long_ones + pieces[-40:]  # hits, misses and unremembered pieces at once
    assert model.encode_pieces(mixed) == expect(mixed)


def test_a_first_call_over_a_document_takes_every_piece_as_a_miss(monkeypatch):
    """With next to nothing cached (fewer than 1/FRESH_SHARE of the call's distinct pieces), every
    distinct piece is merged, the cached ones again, and the call's distinct pieces become the
    cache, keeping what it held; with more cached, only the misses are merged, into the same
    cache. The ids are the scalar path's either way."""
    from tokmap.runtime.models import bpe

    model = tokmap.load(_gpt2_export()).model
    text = open(_data("corpus/en.txt"), encoding="utf-8").read()[:60000]
    pieces = tokmap.load(_gpt2_export()).pipeline.split_fast(text)
    scalar = {p: tuple(model._merge(model._symbols(p.encode("utf-8")))) for p in set(pieces)}
    expect = [i for p in pieces for i in scalar[p]]
    merged = []
    many = model._encode_misses
    monkeypatch.setattr(model, "_encode_misses", lambda misses, n=None: merged.append(len(misses)) or many(misses, n))
    n_distinct = len(set(pieces))
    for cached in ([pieces[0], " zqxjkvw"], pieces[:3000]):  # next to nothing (one not in the text); then a share
        model.piece_cache.clear()
        model.encode_pieces(cached)
        before, merged[:] = model.piece_cache, []
        assert model.encode_pieces(pieces) == expect
        fresh = len(before) * bpe.FRESH_SHARE < n_distinct
        assert fresh == (len(cached) == 2)
        assert merged == [n_distinct if fresh else n_distinct - len(set(cached))]
        assert (model.piece_cache is before) != fresh
        assert set(model.piece_cache) == set(pieces) | set(cached)


def test_byte_pair_codes_fill_as_pairs_occur():
    """The first round's 64K table is filled by the pairs each call brings, and then answers like
    searching every pair: ASCII pairs first, then all bytes."""
    model = tokmap.load(_gpt2_export()).model
    model._start_batch()
    merger, byte_ids = model._batch, model._byte_ids_np
    rng = np.random.default_rng(5)
    filled = []
    ascii_pairs = (np.arange(128)[:, None] << 8 | np.arange(128)).ravel()
    for pairs in (rng.permutation(np.tile(ascii_pairs, 2)), rng.choice(ascii_pairs, 30000),
                  (rng.integers(0, 256, 30000) << 8) | rng.integers(0, 256, 30000)):
        got = merger.byte_pair_codes(pairs, byte_ids)
        assert got.tolist() == merger.codes(byte_ids[pairs >> 8], byte_ids[pairs & 0xFF]).tolist()
        filled.append(int((merger._byte_pairs >= 0).sum()))
    assert filled[0] == filled[1] == 16384 < filled[2] < 65536, filled


_EXPORTS: dict[str, str] = {}


def _gpt2_export(tmp=None) -> str:
    if "gpt2" not in _EXPORTS:
        import tempfile

        out = tempfile.mkdtemp(prefix="tokmap-batch-") + "/gpt2.mtok"
        tokmap.export(_data("models/tiktoken/gpt2.tiktoken"), out)
        _EXPORTS["gpt2"] = out
    return _EXPORTS["gpt2"]


def test_derived_sections_equal_runtime_computation():
    import pathlib

    path = pathlib.Path(_gpt2_export())
    tok = tokmap.load(path)
    f, m = tok._f, tok.model
    stored = bytes(f.view(mtok.SECTION_MERGE_NONMONO, mtok.U8))
    keys, ranks, results = (np.frombuffer(m.keys, "<u8"), np.frombuffer(m.ranks, "<u4"),
                            np.frombuffer(m.results, "<u4"))
    assert stored == nonmono_bitmap(keys, ranks, results)
    # unreached: exactly the model tokens whose bytes do not merge back to them
    unreached = set(f.view(mtok.SECTION_UNREACHED, mtok.U32))
    for i in range(0, 50257, 37):
        data = m.token_bytes(i)
        if len(data) > 1:
            assert (m._merge(m._symbols(data)) != [i]) == (i in unreached)


def test_files_without_derived_sections_encode_the_same(tmp_path):
    import pathlib

    path = pathlib.Path(_gpt2_export())
    data = with_section(path, mtok.SECTION_MERGE_NONMONO, None)
    bare = write(tmp_path, data, "no-nonmono.mtok")
    bare2 = write(tmp_path, with_section(bare, mtok.SECTION_UNREACHED, None), "bare.mtok")
    text = open(_data("corpus/en.txt"), encoding="utf-8").read()[:60000]
    expected = tokmap.load(path).encode_ordinary(text)
    assert tokmap.load(bare).encode_ordinary(text) == expected
    assert tokmap.load(bare2).encode_ordinary(text) == expected


def test_damaged_derived_sections_are_refused(tmp_path):
    import pathlib

    path = pathlib.Path(_gpt2_export())
    short = write(tmp_path, with_section(path, mtok.SECTION_MERGE_NONMONO, b"\0" * 3), "short.mtok")
    load_error(short, "merge_nonmono", MtokFile(short).sections[mtok.SECTION_MERGE_NONMONO][1],
               match="bitmap must hold")
    big = np.array([5, 10 ** 9], dtype="<u4").tobytes()
    bad = write(tmp_path, with_section(path, mtok.SECTION_UNREACHED, big, mtok.U32), "bad.mtok")
    tok = tokmap.load(bad)  # read on the first batch merge, not at load
    with pytest.raises(tokmap.FormatError) as ei:
        tok.encode_ordinary(open(_data("corpus/en.txt"), encoding="utf-8").read()[:60000])
    check_error(ei.value, bad, "unreached", MtokFile(bad).sections[mtok.SECTION_UNREACHED][1],
                "outside the vocabulary")


def test_long_pieces_cached_within_their_budget(monkeypatch):
    """Pieces longer than CACHE_PIECE are remembered while their chars fit LONG_CACHE_CHARS (set
    low here); one that would pass it drops the long ones first, one above LONG_PIECE_MAX is never
    kept, short pieces stay; the ids are the scalar path's on every call, first or repeated."""
    import tokmap.runtime.models as models
    from tokmap.runtime.models import bpe

    monkeypatch.setattr(models, "LONG_CACHE_CHARS", 1000)
    monkeypatch.setattr(models, "LONG_PIECE_MAX", 600)
    model = tokmap.load(_gpt2_export()).model
    rng = random.Random(5)
    a, b, c, d = ("".join(rng.choice("abcdefgh") for _ in range(n)) for n in (300, 400, 500, 700))
    scalar = {p: tuple(model._merge(model._symbols(p.encode("utf-8")))) for p in (a, b, c, d, " the")}
    longs = lambda: {p for p in model.piece_cache if len(p) > bpe.CACHE_PIECE}  # noqa: E731
    for ps, held in (([a, " the"], {a}), ([b, a], {a, b}), ([c], {c}), ([d, c], {c}), ([a, b, a], {b}),
                     ([a], {a, b}), ([d], {a, b})):
        assert model.encode_pieces(ps) == [i for p in ps for i in scalar[p]]
        assert longs() == held, ps
        assert model._long.chars == sum(map(len, held)) <= 1000
    assert " the" in model.piece_cache
    assert model.encode_piece(c) == scalar[c] and longs() == {c}  # the scalar path alike
    assert model.encode_piece(c) == scalar[c] and model.encode_piece(d) == scalar[d] and longs() == {c}


def test_byte_lengths_equal_each_texts_utf8_length():
    """byte_lengths from the joined bytes equals len(text.encode()) for texts of 1-4 byte chars,
    empty ones among them (first, last, in a row) and all-ASCII batches."""
    from tokmap.runtime.models.textparts import byte_lengths

    rng = random.Random(11)
    alphabet = "ab \u00e9\u0416\u4e2d\u3042\U0001f600\U00020000"
    for trial in range(200):
        texts = ["".join(rng.choice(alphabet if trial % 5 else "xyz ") for _ in range(rng.randrange(0, 6)))
                 for _ in range(rng.randrange(1, 30))]
        raw = np.frombuffer("".join(texts).encode("utf-8"), dtype=np.uint8)
        want = [len(t.encode("utf-8")) for t in texts]
        assert byte_lengths(raw, texts).tolist() == want, texts
        assert byte_lengths(raw, texts, [len(t) for t in texts]).tolist() == want, texts
    assert byte_lengths(np.zeros(0, dtype=np.uint8), []).tolist() == []


def test_misses_lengths_are_taken_once(monkeypatch, exported, corpus):
    """A cold call's many misses have their lengths taken in one pass, which _encode_misses hands
    down: the byte lengths of the whole batch (ASCII code: _encode_whole) and of the cut path
    (random ideographs: _segmented) come from them, with no second pass over the strings."""
    from tokmap.runtime.models import textparts

    real, given, cut = textparts.byte_lengths, [], []
    monkeypatch.setattr(textparts, "byte_lengths", lambda raw, texts, n_chars=None:
                        given.append((len(texts), n_chars is not None)) or real(raw, texts, n_chars))
    segmented = bpe.BPE._segmented
    monkeypatch.setattr(bpe.BPE, "_segmented", lambda self, texts, joined, n_chars=None:
                        cut.append(1) or segmented(self, texts, joined, n_chars))
    rng = random.Random(3)
    pool = [chr(rng.randrange(0x4E00, 0xA000)) for _ in range(300)]  # (chars that repeat: cuts pay)
    cjk = " ".join("".join(rng.choices(pool, k=rng.randrange(1, 9))) for _ in range(3000))
    for text, via_cuts in ((corpus("code")[:40000], False), (cjk, True)):
        given.clear()
        cut.clear()
        tokmap.load(exported("o200k_base")).encode_ordinary(text)
        assert bool(cut) == via_cuts
        assert given and all(has for _n, has in given) and max(n for n, _h in given) > 500, given


def test_misses_in_batches_equal_one_batch(monkeypatch, exported, corpus):
    """Many distinct misses are merged MISS_BATCH at a time (set low here): each batch on its own
    (cut pieces and one-char parts among them, llama3 on multi.txt's mixed scripts), the ids in
    order equal one batch of all, and the cache then holds every piece."""
    text = corpus("multi")[:60000]
    one = tokmap.load(exported("llama3"))
    want = one.encode(text)
    monkeypatch.setattr(bpe, "MISS_BATCH", 97)
    tok = tokmap.load(exported("llama3"))
    calls = []
    many = tok.model._encode_many
    monkeypatch.setattr(tok.model, "_encode_many", lambda texts, n_chars=None: calls.append(len(texts)) or many(texts, n_chars))
    assert tok.encode(text) == want
    assert len(calls) > 10 and max(calls) == 97
    assert set(tok.pipeline.split_fast(text)) <= set(tok.model.piece_cache)


@pytest.mark.parametrize("seed", range(8))
def test_merge_chars_equals_sequential_bpe(seed):
    """BatchMerger.merge_chars (the closed form for words of 1-3 byte symbols) against the textbook
    loop on random tables over six bytes, every word of those bytes: which pair merges first (ties
    included, and tiktoken-style tables where the rank is the result), and the pair that merge makes."""
    rng = random.Random(f"chars-{seed}")
    table = random_table(rng, 6, rng.choice([8, 20, 40]), shared_ranks=seed % 2 == 1)
    base = list(range(6))
    if seed % 4 >= 2:
        table, base = ranked_by_result(table, rng, 6)
    merger = merger_for(table)
    byte_ids = np.full(256, mtok.NO_ID, dtype=np.int64)
    byte_ids[:6] = base
    words = [w for n in (1, 2, 3) for w in np.ndindex(*(6,) * n)]
    width = np.array([len(w) for w in words], dtype=np.int64)
    padded = np.array([list(w) + [0] * (3 - len(w)) for w in words], dtype=np.int64)
    flat, counts = merger.merge_chars(padded[:, 0], padded[:, 1], padded[:, 2], width, byte_ids)
    got, pos = [], 0
    for c in counts.tolist():
        got.append(flat[pos:pos + c].tolist())
        pos += c
    expect = [reference_bpe([base[b] for b in w], table) for w in words]
    assert got == expect
    # (each case met: a word of three left whole, merged once, merged twice)
    assert {len(e) for e, w in zip(expect, words) if len(w) == 3} == {1, 2, 3}
    # A used byte with no token: None, for the caller's scalar path; an unused one is no matter.
    one = np.array([1], dtype=np.int64)
    assert merger.merge_chars(one * 7, one, one, one * 2, byte_ids) is None
    assert merger.merge_chars(one, one * 7, one * 7, one, byte_ids) is not None


@pytest.mark.parametrize("name", ["cl100k_base", "llama3"])
def test_merge_chars_on_every_char_equals_the_batch_merge(name, exported):
    """BPE._merge_chars over every BMP char and a sample of astral ones (4 bytes: the batch merge's
    share, put back in place) equals _merge_ranges, which merges them all in rounds."""
    model = tokmap.load(exported(name)).pipeline.model
    model._start_batch()
    cps = [c for c in range(0x20, 0x10000) if not 0xD800 <= c < 0xE000] + list(range(0x1F300, 0x1F700, 7))
    random.Random(3).shuffle(cps)
    raw_bytes = "".join(map(chr, cps)).encode("utf-8")
    raw = np.frombuffer(raw_bytes, dtype=np.uint8)
    width = np.array([len(chr(c).encode("utf-8")) for c in cps], dtype=np.int64)
    starts = np.cumsum(width) - width
    flat, counts = model._merge_chars(raw, starts, width)
    ref_flat, ref_counts = model._merge_ranges(raw, starts, starts + width)
    assert counts.tolist() == ref_counts.tolist() and flat.tolist() == ref_flat.tolist()
    assert set(counts[width == 3].tolist()) >= {1, 2}
