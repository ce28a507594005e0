"""Benchmark runner: tokmap against tokenizers, tiktoken, mistral-common, sentencepiece, kitoken and tokie, in one run.

    RAYON_NUM_THREADS=1 python bench/run.py [--models llama3,gpt2] [--corpora en,code] [--quick]
                                            [--targets-only] [--parts corpora,short,hostile,cold,batch]
                                            [--out BENCHMARKS.md] [--chart bench/bench.png]

For each model it converts the source where a library has its own format (tokmap .mtok, kitoken
.kit, tokie .tkz, all under bench/out/), times loads (median of several, in-process), then for each
corpus times a cold encode (the best of up to 3 first calls, each on a freshly loaded object) and a
warm one (the same objects' second calls, the best of them), and checks each peer's ids against tokmap's.
Everything runs single-threaded, and each library on each model in a fresh child process
(run_model_isolated), in ROUNDS rounds of alternating order (tokmap first, then last), each figure
the library's best over the rounds.
Then the issue-4 parts: hostile input (bench/hostile.py), whole-process cold start (bench/cold_start.py),
encode_batch with 2 workers (bench/batch.py); short strings run per model. `--targets-only` runs only what
issue 4's targets name (bench/targets.py). Results go to BENCHMARKS.md (an "Issue-4 targets" section with
met / not met, then tables + ratios vs tokmap), bench/bench.png and bench/out/results.json.
See bench/README.md for how to read them.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import common
import short

PINNED_CPU = common.pin_threads()  # before any tokenizer library is imported

from common import CORPORA, MODELS, MODELS_BY_NAME, OUT, QUICK_CORPORA, REPO  # noqa: E402
from peers import ADAPTERS, REFERENCE, adapters_for  # noqa: E402
import batch  # noqa: E402
import rounds  # noqa: E402
import hostile  # noqa: E402
import targets  # noqa: E402

MiB = 1 << 20
HELLO = "Hello world"
MAX_MEASURE_S = 60.0   # a single timed call longer than this gets a prefix of the corpus instead
PEER_CAP_S = 30.0      # kitoken/tokie: a corpus whose trial call runs longer than this is skipped for that peer
CAPPED_PEERS = ("kitoken", "tokie")  # the reference libraries are never skipped
PROBE_CHARS = 32_768   # longer probe slices (four, plus four of a quarter that length) spread over the document


def _now() -> float:
    return time.perf_counter()


def _short_error(e: BaseException) -> str:
    msg = f"{type(e).__name__}: {e}".replace("\n", " ")
    return msg if len(msg) <= 160 else msg[:157] + "..."


def _log(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


# -- load ------------------------------------------------------------------------------------------

def measure_load(adapter, path: Path, model, repeats: int, budget_s: float) -> dict:
    """Median in-process load time, and load + encode(HELLO) (time to first ids), over up to `repeats`
    loads; stops early (after at least 3) once `budget_s` is spent."""
    loads, firsts = [], []
    spent = 0.0
    for i in range(repeats):
        gc.collect()
        t0 = _now()
        obj = adapter.load(path, model)
        t1 = _now()
        adapter.encode(obj, model, HELLO)
        t2 = _now()
        del obj
        loads.append(t1 - t0)
        firsts.append(t2 - t0)
        spent += t2 - t0
        if i >= 2 and spent > budget_s:
            break
    return {"load_ms": 1000 * statistics.median(loads), "first_ms": 1000 * statistics.median(firsts),
            "load_n": len(loads), "load_all_ms": [round(1000 * x, 3) for x in loads]}


# -- corpus budget ---------------------------------------------------------------------------------

def probe_seconds(adapter, obj, model, text: str) -> float:
    """Predicted seconds for one call of `adapter` on `text`, encoded by `obj` (pipeline already built).

    Four slices of PROBE_CHARS // 4 and four of PROBE_CHARS characters, spread over the document (at
    different places, so one size does not warm the caches for the other), give the cost per slice at two
    lengths. Their ratio is the growth exponent e (a library that is quadratic in the text length, such
    as kitoken on minilm/wagahai, shows e ≈ 2); below 1.5 it is taken as 1 (noise), above 3 as 3. The
    prediction is the per-slice time at PROBE_CHARS times (len(text) / PROBE_CHARS) ** e."""
    n = len(text)
    step = n // 4
    small, big = PROBE_CHARS // 4, PROBE_CHARS

    def cost(size: int, shift: int) -> float:
        slices = [text[i * step + shift:i * step + shift + size] for i in range(4)]
        t0 = _now()
        for s in slices:
            adapter.encode(obj, model, s)
        return max(_now() - t0, 1e-9) / 4

    t_big = cost(big, 0)
    t_small = cost(small, step // 2)
    e = math.log(max(t_big / t_small, 1e-9)) / math.log(big / small)
    e = 1.0 if e < 1.5 else min(e, 3.0)
    return t_big * (n / big) ** e


def choose_text(text: str, tokmap_adapter, path: Path, model, max_s: float,
                corpus_file: Path) -> tuple[str, str | None]:
    """The corpus, or a prefix of it when tokmap would need more than `max_s` for one call. The rate
    comes from a probe on a separate fresh object: pipeline built by one tiny call, then four slices spread
    over the document, so the caches are nearly empty as in a cold call. A probe over the limit is then
    checked by one real cold call on the whole document in a worker process, stopped at the limit: the
    slices' fit can mistake a one-time build that only longer texts trigger (SentencePiece BPE's pair
    table, built once the heap has merged enough) for super-linear growth (mistral-v3 multi: "estimated
    508 s" for a document that takes 2.7 s). Returns (text, note or None)."""
    nbytes = len(text.encode("utf-8"))
    if len(text) <= 4 * PROBE_CHARS:
        return text, None
    obj = tokmap_adapter.load(path, model)
    tokmap_adapter.encode(obj, model, HELLO)
    predicted = probe_seconds(tokmap_adapter, obj, model, text)
    del obj
    target = 0.75 * max_s  # margin: the probe is an estimate
    if predicted <= target:
        return text, None
    trial = hostile.Worker(tokmap_adapter.name, model.name, path, target)
    try:
        if trial.request({"file": str(corpus_file), "chars": len(text), "repeats": 1}, target) is not None:
            return text, None
    except (OSError, RuntimeError):
        pass  # (the prefix, as the probe says)
    finally:
        trial.close()
    keep_chars = int(len(text) * target / predicted)  # (as if linear: a superlinear cost only gets cheaper)
    cut = text.rfind("\n", 0, keep_chars)
    if cut > keep_chars // 2:
        keep_chars = cut + 1
    prefix = text[:keep_chars]
    note = (f"encoded a prefix, {len(prefix.encode('utf-8')) / MiB:.2f} of {nbytes / MiB:.2f} MiB "
            f"(tokmap estimated at {predicted:.0f} s for the whole document; limit {max_s:.0f} s per call)")
    return prefix, note


# -- encode ----------------------------------------------------------------------------------------

def _first_diff(a: list[int], b: list[int]) -> str:
    n = min(len(a), len(b))
    i = next((k for k in range(n) if a[k] != b[k]), n)
    return (f"{len(b)} ids vs tokmap's {len(a)}; first difference at index {i}: "
            f"{b[i:i + 4]} vs tokmap's {a[i:i + 4]}")


# cold: the best of up to COLD_CALLS first calls, each on a freshly loaded object, while the next
# one (predicted to take as long as the last) keeps them within COLD_BUDGET_S. One first call is
# one sample of the machine: on this VM single cold figures of one library moved by 15% to over 2x
# between runs (kitoken minilm en.txt 4.7 and 10.4 MiB/s; tokmap gemma3 wagahai.txt 73 ms alone,
# 83-85 ms after tokenizers had encoded the earlier corpora in the process). hostile.py takes its calls the
# same way (best of 3 on fresh objects).
# warm: issue 4's "warm (second call)": each of those objects is called a second time with the
# same text, and the best of these second calls counts. (Until 2026-11-28 warm was the best of up
# to 3 further calls on the last object: for tokmap that was the third call or later, after its
# chunk caches had filled, which a second call never sees.) COLD_BUDGET_S covers both calls.
COLD_CALLS = 3
COLD_BUDGET_S = 3.0
# Each model's libraries run ROUNDS times over, in alternating order (run_model_isolated). This VM
# switches between two speeds within minutes, for every library alike (a pure-Python loop 36 or 57
# ms, tiktoken's cold o200k en.txt 15 or 27 ms, tokmap's 33 or 57 ms, measured minutes apart on
# 2026-11-28), while one model's children run one after another for minutes: with one round, a
# ratio compared two libraries measured in different phases as often as not.
ROUNDS = 2


def measure_cold(adapter, path: Path, model, text: str):
    """(the ids, the fastest first call's seconds, the fastest second call's seconds, how many
    objects, whether all calls gave the same ids): each object freshly loaded, then called twice
    with the text (cold, then warm)."""
    ids, cold, warm, spent, runs, stable = None, None, None, 0.0, 0, True
    while True:
        obj = None  # (the previous object goes before the next one loads)
        obj = adapter.load(path, model)
        gc.collect()
        t0 = _now()
        got = adapter.encode(obj, model, text)
        dt = _now() - t0
        t0 = _now()
        again = adapter.encode(obj, model, text)
        dw = _now() - t0
        if ids is None:
            ids = got
        else:
            stable = stable and list(got) == list(ids)
        stable = stable and list(again) == list(ids)
        cold = dt if cold is None else min(cold, dt)
        warm = dw if warm is None else min(warm, dw)
        spent += dt + dw
        runs += 1
        if runs >= COLD_CALLS or spent + dt + dw > COLD_BUDGET_S:
            del obj
            return ids, cold, warm, runs, stable


def measure_encode(adapter, path: Path, model, text: str, nbytes: int, tokmap_ids) -> dict:
    row = {"lib": adapter.name}
    try:
        ids, cold, warm, cold_runs, stable = measure_cold(adapter, path, model, text)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # a failing peer is a result, not a crash (pyo3 panics are BaseExceptions)
        row.update(status="error", reason=_short_error(e))
        _log(f"    {adapter.name}: ERROR {row['reason']}")
        return row
    row.update(status="ok", cold_s=cold, cold_runs=cold_runs, warm_s=warm, cold_mibs=nbytes / MiB / cold,
               warm_mibs=nbytes / MiB / warm, n_ids=len(ids), stable=stable)
    if adapter.name == "tokmap":
        row["ids"] = ids
        if tokmap_ids is not None:  # (a later round: the first round's ids)
            row["stable"] = stable and list(ids) == tokmap_ids
    elif tokmap_ids is not None:
        ids = list(ids)
        row["ids_equal"] = ids == tokmap_ids
        if not row["ids_equal"]:
            row["diff"] = _first_diff(tokmap_ids, ids)
    _log(f"    {adapter.name:15s} cold {row['cold_mibs']:8.2f} MiB/s (best of {cold_runs})  "
         f"warm {row['warm_mibs']:8.2f} MiB/s  ids {len(ids)}"
         + ("" if row.get("ids_equal", True) else "  (ids differ from tokmap)"))
    return row


# -- one model -------------------------------------------------------------------------------------

def bench_model(model, td: Path, corpora: list[str], texts: dict[str, str], args, libs=None,
                prepared: dict | None = None, ref: dict | None = None, ref_out: dict | None = None) -> dict:
    """Loads, then per corpus cold/warm encodes (kitoken/tokie skipped on a corpus where a trial call takes
    longer than --peer-cap), then short strings. libs: the libraries to run (None: all for this format). prepared[(model, lib)] gets
    the file each library loaded. ref: what a tokmap run of this model in another process chose and
    gave (ref_out of that run): per corpus the characters encoded, the note and tokmap's ids, and
    tokmap's ids of the short strings; the peers then encode the same text and are checked against
    those ids. ref_out (a dict) is filled the same way from this run's tokmap."""
    _log(f"== {model.name} ({model.kind}: {model.relpath})" + (f": {', '.join(sorted(libs))}" if libs else ""))
    res = {"name": model.name, "kind": model.kind, "source": model.relpath,
           "reference": REFERENCE[model.kind], "libs": [], "corpora": []}
    if model.no_trunc:
        res["source_note"] = (f"`{model.relpath}` sets truncation/padding; every library here reads "
                              f"`bench/out/{model.name}.notrunc.json`, a copy with both set to null (tokmap "
                              f"applies the file's truncation/padding in encode() and has no switch to turn "
                              f"them off; tokenizers and tokie also get no_truncation()/no_padding()).")
    adapters = [a for a in adapters_for(model) if libs is None or a.name in libs]
    ready = []  # (adapter, path)
    for a in adapters:
        lib = {"lib": a.name, "version": common._version(a.dist)}
        res["libs"].append(lib)
        reason = a.unsupported(model)
        if reason:
            lib.update(status="n/a", reason=reason)
            continue
        try:
            path, build_s = a.prepare(model, td)
            lib.update(file=str(path.relative_to(REPO) if path.is_relative_to(REPO) else path),
                       size=path.stat().st_size, build_s=build_s)
            lib.update(measure_load(a, path, model, args.load_repeats, args.load_budget))
            lib["status"] = "ok"
            ready.append((a, path))
            if prepared is not None:
                prepared[(model.name, a.name)] = path
            _log(f"  {a.name:15s} load {lib['load_ms']:9.2f} ms (median of {lib['load_n']}), "
                 f"size {lib['size'] / MiB:.2f} MiB")
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            lib.update(status="error", reason=_short_error(e))
            _log(f"  {a.name}: ERROR {lib['reason']}")
            if args.verbose:
                traceback.print_exc()
    tokmap_ready = next(((a, p) for a, p in ready if a.name == "tokmap"), None)
    trials = {}  # peer name -> hostile.Worker for the peer cap
    for c in corpora:
        full = texts[c]
        if ref is not None and c in ref:
            text, note = full[:ref[c]["chars"]], ref[c]["note"]
        else:
            text, note = (choose_text(full, *tokmap_ready, model, args.max_seconds, td / "corpus" / f"{c}.txt")
                          if tokmap_ready else (full, None))
        nbytes = len(text.encode("utf-8"))
        _log(f"  -- {c}: {nbytes / MiB:.2f} MiB" + (f" [{note}]" if note else ""))
        entry = {"corpus": c, "bytes": nbytes, "bytes_total": len(full.encode("utf-8")), "note": note, "rows": []}
        tokmap_ids = ref[c]["ids"] if ref is not None and c in ref else None
        for a, path in ready:
            skip = None
            if a.name in CAPPED_PEERS and args.peer_cap and len(text) > 2 * PROBE_CHARS:
                skip = peer_over_cap(a, path, model, td / "corpus" / f"{c}.txt", text, args.peer_cap, trials)
            if skip:
                row = skip
            else:
                row = measure_encode(a, path, model, text, nbytes, tokmap_ids)
            if a.name == "tokmap":
                tokmap_ids = row.pop("ids", None)
                if ref_out is not None and tokmap_ids is not None:
                    ref_out[c] = {"chars": len(text), "note": note, "ids": tokmap_ids}
            entry["rows"].append(row)
        del tokmap_ids
        gc.collect()
        res["corpora"].append(entry)
    for w in trials.values():
        w.close()
    if "short" in args.parts:
        res["short"] = bench_short(model, ready, (ref or {}).get("short"), ref_out)
    return res


def peer_over_cap(adapter, path: Path, model, corpus_file: Path, text: str, cap: float, trials: dict) -> dict | None:
    """A "skipped" row when one call of this peer on `text` does not finish within `cap` seconds, tried in a
    worker process (bench/hostile.py's, same CPU pin and environment) that is killed at the cap; None when
    it finishes. Probing slices cannot bound this: kitoken on minilm spends ~2 min on multi although every
    32K-character slice of it takes under 2 s. One worker per peer and model serves all corpora."""
    if adapter.name not in trials:
        trials[adapter.name] = hostile.Worker(adapter.name, model.name, path, cap)
    t0 = _now()
    try:
        out = trials[adapter.name].request({"file": str(corpus_file), "chars": len(text), "repeats": 1}, cap + 10)
    except (OSError, RuntimeError):
        return None  # let the real measurement report the problem
    if out is not None:
        return None
    _log(f"    {adapter.name:15s} skipped: a trial call did not finish in {_now() - t0:.0f} s (cap {cap:.0f} s)")
    return {"lib": adapter.name, "status": "skipped", "over_s": cap,
            "reason": f"skipped, > {cap:.0f} s: a trial call in a worker process was stopped at the cap"}


def bench_short(model, ready, tokmap_ids=None, ref_out: dict | None = None) -> dict:
    """Short-string latency per library (tokmap first, so the peers' ids are compared with its; or
    with tokmap_ids, from a tokmap run in another process). ref_out["short"] gets tokmap's ids."""
    out = {}
    for a, path in ready:
        try:
            obj = a.load(path, model)
            r = short.measure(a, obj, model, tokmap_ids if a.name != "tokmap" else None)
            del obj
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            out[a.name] = {"error": _short_error(e)}
            continue
        if a.name == "tokmap":
            tokmap_ids = r.pop("ids")
            if ref_out is not None:
                ref_out["short"] = tokmap_ids
        else:
            r.pop("ids", None)
        out[a.name] = r
        _log(f"    short {a.name:15s} median {r['median_us']:7.1f} µs/call  slowest {r['max_us']:7.1f} µs"
             + ("" if r.get("ids_equal", True) else "  (ids differ)"))
    return out


# -- main ------------------------------------------------------------------------------------------

PARTS = ["corpora", "short", "hostile", "cold", "batch"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=None,
                   help="comma-separated, from: " + ", ".join(m.name for m in MODELS))
    p.add_argument("--corpora", default=None, help="comma-separated, from: " + ", ".join(CORPORA))
    p.add_argument("--quick", action="store_true",
                   help="smoke run: corpora en and code only; unless --out/--chart are given, writes to "
                        "bench/out/ so the committed BENCHMARKS.md and bench/bench.png stay as they are")
    p.add_argument("--targets-only", action="store_true",
                   help="only what issue 4's targets need: their models, tokmap + the peer each target names, "
                        "their corpora, plus hostile input, short strings, cold start and encode_batch; unless "
                        "--out/--chart are given, writes to bench/out/BENCHMARKS-targets.md")
    p.add_argument("--parts", default=None,
                   help="comma-separated, from: " + ", ".join(PARTS) + " (corpora = loads + cold/warm encodes; "
                        "default: all, with --quick: corpora,short)")
    p.add_argument("--out", default=None, help="markdown report (default: BENCHMARKS.md at the repo root)")
    p.add_argument("--chart", default=None, help="PNG chart (default: bench/bench.png)")
    p.add_argument("--rounds", type=int, default=ROUNDS,
                   help="rounds of each model's library children, in alternating order (best of them)")
    p.add_argument("--load-repeats", type=int, default=7, help="loads per library and model (median)")
    p.add_argument("--load-budget", type=float, default=4.0,
                   help="stop repeating loads after this many seconds (at least 3 loads)")
    p.add_argument("--max-seconds", type=float, default=MAX_MEASURE_S,
                   help="encode a prefix of a corpus when one tokmap call is predicted to take longer")
    p.add_argument("--peer-cap", type=float, default=PEER_CAP_S,
                   help="kitoken/tokie: skip a corpus when a trial call in a worker process takes longer "
                        "(0: no cap, no trial)")
    p.add_argument("--hostile-models", default=",".join(m for m, _ in hostile.DEFAULT_PAIRS),
                   help="models for the hostile-input cases (tokmap against the format's reference library)")
    p.add_argument("--hostile-cap", type=float, default=20.0,
                   help="skip 10^6 for a library whose 10^5 call took longer than this (s)")
    p.add_argument("--hostile-timeout", type=float, default=90.0,
                   help="kill a hostile-input call that runs longer than this (s)")
    p.add_argument("--hostile-sizes", default=",".join(map(str, hostile.SIZES)),
                   help="the two input lengths, small first (smaller ones for a quick try)")
    p.add_argument("--cold-runs", type=int, default=20, help="hyperfine runs per cold-start command")
    p.add_argument("--batch-workers", type=int, default=2)
    p.add_argument("--batch-model", default="llama3")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--model-child", default=None, help=argparse.SUPPRESS)  # see run_model_isolated
    p.add_argument("--lib-child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.parts is None:
        args.parts = "corpora,short" if args.quick else ",".join(PARTS)
    args.parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    bad = [x for x in args.parts if x not in PARTS]
    if bad:
        p.error(f"unknown part(s) {bad}; known: {PARTS}")
    wanted = targets.target_models() if args.targets_only else None
    default_models = list(wanted) if wanted else [m.name for m in MODELS]
    names = [n.strip() for n in (args.models or ",".join(default_models)).split(",") if n.strip()]
    bad = [n for n in names if n not in MODELS_BY_NAME]
    if bad:
        p.error(f"unknown model(s) {bad}; known: {list(MODELS_BY_NAME)}")
    args.model_list = [MODELS_BY_NAME[n] for n in names]
    # libraries per model: None = every library for that format
    args.libs = {n: (wanted.get(n, {"tokmap"}) if wanted is not None else None) for n in names}
    if args.corpora:
        args.corpus_list = [c.strip() for c in args.corpora.split(",") if c.strip()]
        bad = [c for c in args.corpus_list if c not in CORPORA]
        if bad:
            p.error(f"unknown corpus/corpora {bad}; known: {CORPORA}")
    else:
        args.corpus_list = QUICK_CORPORA if args.quick else CORPORA
    # corpora per model: under --targets-only the tiktoken targets name en, code and multi only
    args.model_corpora = {n: ([c for c in targets.target_corpora(n) if c in args.corpus_list]
                              if args.targets_only else list(args.corpus_list)) for n in names}
    tag = "quick" if args.quick else "targets" if args.targets_only else None
    if args.out is None:
        args.out = str(OUT / f"BENCHMARKS-{tag}.md") if tag else str(REPO / "BENCHMARKS.md")
    if args.chart is None:
        args.chart = str(OUT / f"bench-{tag}.png") if tag else str(REPO / "bench" / "bench.png")
    args.tag = tag
    return args


def path_for_factory(td: Path, prepared: dict):
    """(model, lib) -> the file that library loads: the one bench_model used in this run, else made now."""
    by = {a.name: a for a in ADAPTERS}

    def path_for(model_name: str, lib: str) -> Path:
        key = (model_name, lib)
        if key not in prepared:
            prepared[key] = by[lib].prepare(MODELS_BY_NAME[model_name], td)[0]
        return prepared[key]
    return path_for


def _guarded(label: str, fn, *a, **kw):
    """Run one part; a failure becomes {"status": "error"} in the results, not a lost run."""
    t0 = _now()
    try:
        out = fn(*a, **kw)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        _log(f"  {label}: ERROR {_short_error(e)}")
        traceback.print_exc()
        out = {"status": "error", "reason": _short_error(e)}
    _log(f"  {label}: {_now() - t0:.0f} s")
    return out


def _ref_file(model_name: str) -> Path:
    """Where a model's tokmap child leaves its chosen texts and ids for the peers' children."""
    return OUT / f".ref-{model_name}.pickle"


def run_model_isolated(model, argv: list[str], prepared: dict, libs=None, rounds_wanted: int = ROUNDS) -> dict:
    """bench_model for one model, each of its libraries in a child process of its own (this script
    with --model-child and --lib-child); the rows merged back into one result. rounds_wanted
    rounds (ROUNDS) in alternating order, tokmap first, then last; each figure the best of the
    rounds (rounds.best_of_rounds).

    Each model starts from a fresh interpreter so that its figures do not depend on the models
    measured before it: after gemma3 (262K vocabulary) had run in the same process, glibc's raised
    mmap threshold left every library slower on the next model (minilm warm en: tokmap 12.9 -> 7.9
    MiB/s, kitoken 12.0 -> 8.5 MiB/s). For the same reason each library runs alone: in a process
    where tokenizers had encoded the earlier corpora, tokmap's cold calls (numpy arrays made and
    dropped by the thousand) ran 15-30% slower on wagahai.txt and utf8seq.txt under Llama 3 (8.9
    and 12.7 against 10.2-10.5 and 15.5-15.8 MiB/s, two runs each); in the same experiment tokenizers'
    and kitoken's figures alone were within the spread of theirs beside the others. The tokmap child writes what the others
    need: the text it chose per corpus (a prefix when a call would run too long) and its ids, which
    the peers are checked against. A child inherits the CPU pin and the environment."""
    names = [a.name for a in adapters_for(model) if libs is None or a.name in libs]
    ref_file = _ref_file(model.name)
    ref_file.unlink(missing_ok=True)
    per_round = []
    try:
        for r in range(max(1, rounds_wanted)):
            res = None
            # Alternating order: a library measured early in one round is measured late in the
            # next, so a slow stretch of the machine falls on each library in turn. The first
            # round runs tokmap first: its child writes the texts and ids the others read.
            for lib in (names if r % 2 == 0 else names[::-1]):
                cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--model-child", model.name,
                       "--lib-child", lib]
                p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
                if p.returncode != 0:
                    raise RuntimeError(f"the bench child for {model.name} / {lib} exited with {p.returncode}")
                out = json.loads(p.stdout.strip().splitlines()[-1])
                for name, path in out["prepared"].items():
                    prepared[(model.name, name)] = Path(path)
                res = out["result"] if res is None else _merge_lib(res, out["result"])
            per_round.append(res)
    finally:
        ref_file.unlink(missing_ok=True)
    best = per_round[0]
    for more in per_round[1:]:
        best = rounds.best_of_rounds(best, more)
    best["rounds"] = len(per_round)
    return best


def _merge_lib(res: dict, more: dict) -> dict:
    """One model's result with another library's (the same model and corpora, run apart) added."""
    res["libs"] += more["libs"]
    by_corpus = {e["corpus"]: e for e in res["corpora"]}
    for e in more["corpora"]:
        by_corpus[e["corpus"]]["rows"] += e["rows"]
    if "short" in more:
        res.setdefault("short", {}).update(more["short"])
    return res


def model_child_main(args, td: Path) -> int:
    """The child side of run_model_isolated: one library's bench_model for one model, printed as one
    JSON line (tokmap's child also writes the reference the others read)."""
    import pickle

    model = MODELS_BY_NAME[args.model_child]
    corpora = args.model_corpora[model.name] if "corpora" in args.parts else []
    texts = {c: (td / "corpus" / f"{c}.txt").read_text(encoding="utf-8") for c in corpora}
    ref_file = _ref_file(model.name)
    # (tokmap's child writes the reference in the first round and reads it in the next, so that
    # every round encodes the same prefixes and its ids are checked against the first round's)
    ref = pickle.loads(ref_file.read_bytes()) if ref_file.exists() else None
    ref_out = {} if args.lib_child == "tokmap" and ref is None else None
    prepared: dict = {}
    res = bench_model(model, td, corpora, texts, args, libs={args.lib_child}, prepared=prepared, ref=ref,
                      ref_out=ref_out)
    if ref_out is not None:
        ref_file.write_bytes(pickle.dumps(ref_out, protocol=pickle.HIGHEST_PROTOCOL))
    print(json.dumps({"result": res, "prepared": {lib: str(path) for (_m, lib), path in prepared.items()}}))
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    td = common.testdata_dir()
    if args.model_child:
        return model_child_main(args, td)
    import cold_start
    cold_start.byte_compile()  # every part times tokmap from bytecode, as a wheel install has it
    if not (td / "corpus").is_dir():
        print(f"testdata not found at {td} (set TOKMAP_TESTDATA)", file=sys.stderr)
        return 2
    t_start = _now()
    results = {"machine": common.machine_info(), "testdata": str(td),
               "config": {"models": [m.name for m in args.model_list], "corpora": args.corpus_list,
                          "load_repeats": args.load_repeats, "max_measure_s": args.max_seconds,
                          "peer_cap_s": args.peer_cap, "parts": args.parts,
                          "env": common.SINGLE_THREAD_ENV, "quick": args.quick, "targets_only": args.targets_only,
                          "isolation": "library",  # one process per model and library (run_model_isolated)
                          "rounds": args.rounds},
               "models": []}
    prepared: dict = {}
    path_for = path_for_factory(td, prepared)
    for model in args.model_list:
        results["models"].append(run_model_isolated(model, argv, prepared, args.libs[model.name], args.rounds))
    _log(f"== issue-4 parts ({_now() - t_start:.0f} s so far)")
    results["file_size"] = _guarded("file size", file_sizes, path_for)
    if "hostile" in args.parts:
        pairs = []
        for name in [n.strip() for n in args.hostile_models.split(",") if n.strip()]:
            ref = REFERENCE[MODELS_BY_NAME[name].kind]
            pairs.append((name, [("tokmap", path_for(name, "tokmap")), (ref, path_for(name, ref))]))
        sizes = tuple(int(x) for x in args.hostile_sizes.split(","))
        results["hostile"] = _guarded("hostile input", hostile.run, pairs, args.hostile_cap,
                                      args.hostile_timeout, log=_log, sizes=sizes)
    if "cold" in args.parts:
        import cold_start
        results["cold_start"] = _guarded("cold start", cold_start.measure, td, args.cold_runs, path_for, log=_log)
    if "batch" in args.parts:
        results["batch"] = _guarded("encode_batch", batch.run, path_for(args.batch_model, "tokmap"),
                                    args.corpus_list, args.batch_workers, log=_log)
    results["elapsed_s"] = _now() - t_start

    import report  # matplotlib is imported only now, outside every timed region
    out, chart = Path(args.out), Path(args.chart)
    (OUT / (f"results-{args.tag}.json" if args.tag else "results.json")).write_text(json.dumps(results, indent=1))
    chart_ok = report.write_chart(results, chart)
    report.write_markdown(results, out, chart if chart_ok else None)
    _log(f"wrote {out}" + (f" and {chart}" if chart_ok else "") + f" in {results['elapsed_s']:.0f} s")
    return 0


def file_sizes(path_for) -> dict:
    """llama3.mtok against tokie's llama3.tkz (issue 4: no larger)."""
    try:
        import tokie  # noqa: F401
    except ImportError:
        return {"reason": "tokie is not installed"}
    m, k = path_for(targets.FILE_SIZE_MODEL, "tokmap"), path_for(targets.FILE_SIZE_MODEL, "tokie")
    return {"mtok": m.stat().st_size, "tkz": k.stat().st_size, "mtok_file": m.name, "tkz_file": k.name}


if __name__ == "__main__":
    sys.exit(main())
