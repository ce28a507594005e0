"""bench/rounds.py: two rounds of a model's bench children become one result, each library's best.

The bench's figures are what issue 4's closing notes quote, so the way two rounds combine is tested
like any other code: fastest call of either round, failures never hidden, ids checks and-ed.
"""

from __future__ import annotations

import copy
import pathlib
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def mods():
    sys.path.insert(0, str(BENCH))
    try:
        import rounds
        import short
        yield rounds, short
    finally:
        sys.path.remove(str(BENCH))


def _row(lib, cold, warm, nbytes, **extra):
    mib = 1 << 20
    return {"lib": lib, "status": "ok", "cold_s": cold, "warm_s": warm, "cold_mibs": nbytes / mib / cold,
            "warm_mibs": nbytes / mib / warm, "cold_runs": 3, "n_ids": 10, "stable": True} | extra


def _short(short, per, **extra):
    items = short.all_sentences()
    assert len(per) == len(items)
    return {"median_us": 0.0, "by_lang_us": {}, "max_us": 0.0, "max_sentence": "", "per_us": per,
            "n": len(items), "repeats": 200} | extra


def _round(short, tok, peer, per_tok, per_peer, load_tok=1.0, load_peer=50.0):
    nbytes = 1 << 20
    return {"name": "m", "libs": [{"lib": "tokmap", "status": "ok", "load_ms": load_tok, "first_ms": load_tok + 1,
                                   "load_n": 7, "load_all_ms": [load_tok] * 7},
                                  {"lib": "peer", "status": "ok", "load_ms": load_peer, "first_ms": load_peer + 1,
                                   "load_n": 7, "load_all_ms": [load_peer] * 7}],
            "corpora": [{"corpus": "en", "bytes": nbytes,
                         "rows": [_row("tokmap", *tok, nbytes), _row("peer", *peer, nbytes, ids_equal=True)]}],
            "short": {"tokmap": _short(short, per_tok), "peer": _short(short, per_peer, ids_equal=True)}}


def test_each_figure_is_the_best_of_either_round(mods):
    rounds, short = mods
    n = len(short.all_sentences())
    first = _round(short, (0.05, 0.02), (0.03, 0.03), [5.0] * n, [2.0] * n, load_tok=1.0, load_peer=60.0)
    # The second round: tokmap's cold call faster, its warm one slower; the peer's the other way.
    second = _round(short, (0.03, 0.04), (0.04, 0.01), [4.0] * (n - 1) + [9.0], [3.0] * n, load_tok=2.0,
                    load_peer=40.0)
    got = rounds.best_of_rounds(copy.deepcopy(first), copy.deepcopy(second))
    tok, peer = got["corpora"][0]["rows"]
    assert (tok["cold_s"], tok["warm_s"], peer["cold_s"], peer["warm_s"]) == (0.03, 0.02, 0.03, 0.01)
    assert tok["cold_mibs"] == pytest.approx(1 / 0.03) and peer["warm_mibs"] == pytest.approx(1 / 0.01)
    assert tok["cold_runs"] == 6 and tok["stable"] and peer["ids_equal"]
    assert [lib["load_ms"] for lib in got["libs"]] == [1.0, 40.0]
    assert got["libs"][0]["load_n"] == 14
    s_tok = got["short"]["tokmap"]
    assert s_tok["per_us"] == [4.0] * (n - 1) + [5.0]  # each sentence's lower time
    assert s_tok["median_us"] == 4.0 and s_tok["max_us"] == 5.0
    assert s_tok["max_sentence"] == short.all_sentences()[-1][1]
    assert got["short"]["peer"]["median_us"] == 2.0 and got["short"]["peer"]["ids_equal"]


def test_a_failure_or_a_difference_in_either_round_shows(mods):
    rounds, short = mods
    n = len(short.all_sentences())
    first = _round(short, (0.05, 0.02), (0.03, 0.03), [5.0] * n, [2.0] * n)
    second = _round(short, (0.03, 0.04), (0.04, 0.01), [4.0] * n, [3.0] * n)
    second["corpora"][0]["rows"][0]["stable"] = False  # tokmap's ids moved between the rounds
    second["corpora"][0]["rows"][1] |= {"ids_equal": False, "diff": "at 3"}
    second["short"]["peer"] |= {"ids_equal": False, "diff": "1 of 30 sentences differ"}
    got = rounds.best_of_rounds(copy.deepcopy(first), second)
    tok, peer = got["corpora"][0]["rows"]
    assert not tok["stable"]
    assert peer["ids_equal"] is False and peer["diff"] == "at 3"
    assert got["short"]["peer"]["ids_equal"] is False
    # An error in the second round replaces the first round's figures: a failure never hides.
    err = {"lib": "peer", "status": "error", "reason": "boom"}
    third = copy.deepcopy(first)
    third["corpora"][0]["rows"][1] = err
    got = rounds.best_of_rounds(copy.deepcopy(first), third)
    assert got["corpora"][0]["rows"][1] == err
    # ... and one in the first round stays.
    got = rounds.best_of_rounds(copy.deepcopy(third), copy.deepcopy(first))
    assert got["corpora"][0]["rows"][1] == err
