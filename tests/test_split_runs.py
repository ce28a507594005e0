"""Runs of the split pattern's D{1,k} alternative taken whole (SplitStep.runs, models/bpe_runs.py),
against the references on the real files.

The exporter stores the pattern with that alternative as D++ when no other alternative consumes
D's chars (tests/test_regex_compile.py checks the rewrite itself); the runtime then finds each run
longer than k as one piece and the model encodes its k-char cuts: one at a time as strs, or a long
run by numpy over the run's own alphabet. Ids must equal tiktoken's / tokenizers'.
"""

from __future__ import annotations

import random

import pytest

import tokmap
from tokmap import mtok
from tokmap.runtime.models import bpe, bpe_runs

from conftest import model_source
from test_hostile_files import check_error, with_meta, without_split_field, write

# name: k (qwen3's \p{N} is D{1,1}; llama3 and gpt4o spell it \p{N}{1,3})
MODELS = {"cl100k_base": 3, "o200k_base": 3, "qwen3": 1, "llama3": 3}
DIGITS = "0123456789"
OTHER_NUMBERS = "\u0660\u0661\u0662\u0663\u00b2\u00b3\u2167\u2460\U0001d7ce\U0001d7cf"  # Arabic-Indic, super, roman...


@pytest.fixture(scope="module")
def refs(testdata):
    import tiktoken
    import tokenizers

    from test_conformance import Ref

    out = {}
    for name in MODELS:
        if name in ("cl100k_base", "o200k_base"):
            r = Ref(name, model_source(testdata, name))
            out[name] = r.tok.encode_ordinary
        else:
            t = tokenizers.Tokenizer.from_file(str(model_source(testdata, name)))
            out[name] = lambda s, t=t: t.encode(s, add_special_tokens=False).ids
    assert tiktoken
    return out


def _encode(tok, name, text):
    return tok.encode_ordinary(text) if name.endswith("_base") else tok.encode(text, add_special_tokens=False)


def _texts(seed: int) -> list[str]:
    rng = random.Random(seed)
    numbers = " ".join(str(rng.randrange(10 ** rng.randrange(1, 16))) for _ in range(3000))
    table = "\n".join(",".join(str(rng.randrange(10 ** 9)) for _ in range(8)) for _ in range(300))
    mixed = "".join(rng.choice(DIGITS * 4 + OTHER_NUMBERS + "ab ,.\n") for _ in range(20000))
    return [
        numbers, table, mixed,
        "".join(rng.choice(DIGITS) for _ in range(100_000)),  # one long ASCII run (numpy)
        "x" + "".join(rng.choice(DIGITS) for _ in range(5000)) + "y" + "7" * 4097 + " " + "12" * 3000,
        "".join(rng.choice(OTHER_NUMBERS) for _ in range(9000)),  # a long non-ASCII run, astral digits too
        "Year 2026: 1234567 items, 3.14159, \u0661\u0662\u0663\u0664\u0665 and 00000000000000000000 ok",
    ]


@pytest.mark.parametrize("name", MODELS)
def test_runs_equal_the_reference(name, exported, refs, monkeypatch):
    """Cold and warm, with spies seeing both the str cuts and the numpy cuts taken."""
    seen = {"runs": 0, "numpy": 0}
    real_runs, real_np = bpe_runs.run_ids, bpe_runs.long_run_ids

    def run_ids(model, runs):
        seen["runs"] += len(runs[1])
        assert runs[0] == MODELS[name]
        return real_runs(model, runs)

    def long_run_ids(model, p, k):
        got = real_np(model, p, k)
        seen["numpy"] += got is not None
        return got

    monkeypatch.setattr(bpe_runs, "run_ids", run_ids)
    monkeypatch.setattr(bpe_runs, "long_run_ids", long_run_ids)
    ref = refs[name]
    tok = tokmap.load(exported(name))
    for text in _texts(1):
        want = ref(text)
        assert _encode(tok, name, text) == want, text[:60]
        assert _encode(tok, name, text) == want, text[:60]
    assert seen["runs"] > 1000 and seen["numpy"] >= 3


@pytest.mark.parametrize("name", ["cl100k_base", "qwen3"])
def test_runs_when_the_cache_empties_and_alphabets_are_wide(name, exported, refs, monkeypatch):
    """A tiny piece cache (emptied inside the run's own encode) and a run whose alphabet is too
    wide for a table of every cut (each cut a str then) give the same ids."""
    monkeypatch.setattr(bpe, "CACHE_MAX", 64)
    monkeypatch.setattr(bpe_runs, "RUN_KEYS", 8)
    ref = refs[name]
    tok = tokmap.load(exported(name))
    for text in _texts(2):
        assert _encode(tok, name, text) == ref(text), text[:60]


def test_files_without_runs_encode_alike(exported, tmp_path):
    """A file written before the runs field (META without it) splits digits the old way."""
    path = exported("cl100k_base")
    bare = tokmap.load(without_split_field(path, tmp_path, "runs"))
    tok = tokmap.load(path)
    assert tok.pipeline.runs and not bare.pipeline.runs
    for text in _texts(3)[:4]:
        assert bare.encode_ordinary(text) == tok.encode_ordinary(text)


@pytest.mark.parametrize("runs,match", [
    ({"regex": "[0-9]++|.", "set": "[0-9]", "k": 0}, "runs.k"),
    ({"regex": "[0-9]++|.", "set": "[0-9]"}, "runs.k"),
    ({"regex": 5, "set": "[0-9]", "k": 3}, "runs.regex"),
    ({"regex": "[0-9]++|(", "set": "[0-9]", "k": 3}, "runs regex does not compile"),
])
def test_damaged_runs_refused(exported, tmp_path, runs, match):
    path = exported("cl100k_base")

    def edit(meta):
        meta["pre_tokenizer"][0]["runs"] = runs

    bad = write(tmp_path, with_meta(path, edit), "badruns.mtok")
    with pytest.raises(tokmap.FormatError) as ei:  # at load (types), or at the first text of runs
        tokmap.load(bad).encode_ordinary("1" * 5000)
    check_error(ei.value, bad, "meta", tokmap.load(path)._f.sections[mtok.SECTION_META][1], match)
