"""Benchmark runner: tokmap against tokenizers, tiktoken, mistral-common, sentencepiece, kitoken and tokie, in one process.

    RAYON_NUM_THREADS=1 python bench/run.py [--models llama3,gpt2] [--corpora en,code] [--quick]
                                            [--out BENCHMARKS.md] [--chart bench/bench.png]

For each model it converts the source where a library has its own format (tokmap .mtok, kitoken
.kit, tokie .tkz, all under bench/out/), times loads (median of several, in-process), then for each
corpus times a cold encode (first call on a freshly loaded object) and a warm one (second call on
that object), and checks each peer's ids against tokmap's. Everything runs single-threaded.
Results go to BENCHMARKS.md (tables + ratios vs tokmap), bench/bench.png and bench/out/results.json.
See bench/README.md for how to read them.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

import common

PINNED_CPU = common.pin_threads()  # before any tokenizer library is imported

from common import CORPORA, MODELS, MODELS_BY_NAME, OUT, QUICK_CORPORA, REPO  # noqa: E402
from peers import REFERENCE, adapters_for  # noqa: E402

MiB = 1 << 20
HELLO = "Hello world"
MAX_MEASURE_S = 60.0   # a single timed call longer than this gets a prefix of the corpus instead
PROBE_CHARS = 16_384   # per probe slice; four slices spread over the document


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

def choose_text(text: str, tokmap_adapter, path: Path, model, max_s: float) -> tuple[str, str | None]:
    """The corpus, or a prefix of it when tokmap (the slowest library here) would need more than
    `max_s` for one call. The rate comes from a probe on a separate fresh object: pipeline
    built by one tiny call, then four slices spread over the document, so the caches are nearly empty
    as in a cold call. Returns (text, note or None)."""
    nbytes = len(text.encode("utf-8"))
    if len(text) <= 8 * PROBE_CHARS:
        return text, None
    obj = tokmap_adapter.load(path, model)
    tokmap_adapter.encode(obj, model, HELLO)
    step = len(text) // 4
    slices = [text[i * step:i * step + PROBE_CHARS] for i in range(4)]
    probe_bytes = sum(len(s.encode("utf-8")) for s in slices)
    t0 = _now()
    for s in slices:
        tokmap_adapter.encode(obj, model, s)
    rate = probe_bytes / max(_now() - t0, 1e-9)  # bytes/s
    del obj
    target = 0.75 * max_s  # margin: the probe is an estimate
    if nbytes / rate <= target:
        return text, None
    keep_bytes = rate * target
    keep_chars = int(len(text) * keep_bytes / nbytes)
    cut = text.rfind("\n", 0, keep_chars)
    if cut > keep_chars // 2:
        keep_chars = cut + 1
    prefix = text[:keep_chars]
    note = (f"encoded a prefix, {len(prefix.encode('utf-8')) / MiB:.2f} of {nbytes / MiB:.2f} MiB "
            f"(tokmap estimated at {nbytes / rate:.0f} s for the whole document; limit {max_s:.0f} s per call)")
    return prefix, note


# -- encode ----------------------------------------------------------------------------------------

def _first_diff(a: list[int], b: list[int]) -> str:
    n = min(len(a), len(b))
    i = next((k for k in range(n) if a[k] != b[k]), n)
    return (f"{len(b)} ids vs tokmap's {len(a)}; first difference at index {i}: "
            f"{b[i:i + 4]} vs tokmap's {a[i:i + 4]}")


def measure_encode(adapter, path: Path, model, text: str, nbytes: int, tokmap_ids) -> dict:
    row = {"lib": adapter.name}
    try:
        obj = adapter.load(path, model)
        gc.collect()
        t0 = _now()
        ids = adapter.encode(obj, model, text)
        t1 = _now()
        ids2 = adapter.encode(obj, model, text)
        t2 = _now()
        del obj
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # a failing peer is a result, not a crash (pyo3 panics are BaseExceptions)
        row.update(status="error", reason=_short_error(e))
        _log(f"    {adapter.name}: ERROR {row['reason']}")
        return row
    cold, warm = t1 - t0, t2 - t1
    row.update(status="ok", cold_s=cold, warm_s=warm, cold_mibs=nbytes / MiB / cold, warm_mibs=nbytes / MiB / warm,
               n_ids=len(ids), stable=list(ids2) == list(ids))
    if adapter.name == "tokmap":
        row["ids"] = ids
    elif tokmap_ids is not None:
        ids = list(ids)
        row["ids_equal"] = ids == tokmap_ids
        if not row["ids_equal"]:
            row["diff"] = _first_diff(tokmap_ids, ids)
    _log(f"    {adapter.name:15s} cold {row['cold_mibs']:8.2f} MiB/s  warm {row['warm_mibs']:8.2f} MiB/s  "
         f"ids {len(ids)}" + ("" if row.get("ids_equal", True) else "  (ids differ from tokmap)"))
    return row


# -- one model -------------------------------------------------------------------------------------

def bench_model(model, td: Path, corpora: list[str], texts: dict[str, str], args) -> dict:
    _log(f"== {model.name} ({model.kind}: {model.relpath})")
    res = {"name": model.name, "kind": model.kind, "source": model.relpath,
           "reference": REFERENCE[model.kind], "libs": [], "corpora": []}
    if model.no_trunc:
        res["source_note"] = (f"`{model.relpath}` sets truncation/padding; every library here reads "
                              f"`bench/out/{model.name}.notrunc.json`, a copy with both set to null (tokmap "
                              f"applies the file's truncation/padding in encode() and has no switch to turn "
                              f"them off; tokenizers and tokie also get no_truncation()/no_padding()).")
    adapters = adapters_for(model)
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
    for c in corpora:
        full = texts[c]
        text, note = (choose_text(full, *tokmap_ready, model, args.max_seconds) if tokmap_ready else (full, None))
        nbytes = len(text.encode("utf-8"))
        _log(f"  -- {c}: {nbytes / MiB:.2f} MiB" + (f" [{note}]" if note else ""))
        entry = {"corpus": c, "bytes": nbytes, "bytes_total": len(full.encode("utf-8")), "note": note, "rows": []}
        tokmap_ids = None
        for a, path in ready:
            row = measure_encode(a, path, model, text, nbytes, tokmap_ids)
            if a.name == "tokmap":
                tokmap_ids = row.pop("ids", None)
            entry["rows"].append(row)
        del tokmap_ids
        gc.collect()
        res["corpora"].append(entry)
    return res


# -- main ------------------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(m.name for m in MODELS),
                   help="comma-separated, from: " + ", ".join(m.name for m in MODELS))
    p.add_argument("--corpora", default=None, help="comma-separated, from: " + ", ".join(CORPORA))
    p.add_argument("--quick", action="store_true",
                   help="smoke run: corpora en and code only; unless --out/--chart are given, writes to "
                        "bench/out/ so the committed BENCHMARKS.md and bench/bench.png stay as they are")
    p.add_argument("--out", default=None, help="markdown report (default: BENCHMARKS.md at the repo root)")
    p.add_argument("--chart", default=None, help="PNG chart (default: bench/bench.png)")
    p.add_argument("--load-repeats", type=int, default=7, help="loads per library and model (median)")
    p.add_argument("--load-budget", type=float, default=4.0,
                   help="stop repeating loads after this many seconds (at least 3 loads)")
    p.add_argument("--max-seconds", type=float, default=MAX_MEASURE_S,
                   help="encode a prefix of a corpus when one tokmap call is predicted to take longer")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    bad = [n for n in names if n not in MODELS_BY_NAME]
    if bad:
        p.error(f"unknown model(s) {bad}; known: {list(MODELS_BY_NAME)}")
    args.model_list = [MODELS_BY_NAME[n] for n in names]
    if args.corpora:
        args.corpus_list = [c.strip() for c in args.corpora.split(",") if c.strip()]
        bad = [c for c in args.corpus_list if c not in CORPORA]
        if bad:
            p.error(f"unknown corpus/corpora {bad}; known: {CORPORA}")
    else:
        args.corpus_list = QUICK_CORPORA if args.quick else CORPORA
    if args.out is None:
        args.out = str(OUT / "BENCHMARKS-quick.md") if args.quick else str(REPO / "BENCHMARKS.md")
    if args.chart is None:
        args.chart = str(OUT / "bench-quick.png") if args.quick else str(REPO / "bench" / "bench.png")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    td = common.testdata_dir()
    if not (td / "corpus").is_dir():
        print(f"testdata not found at {td} (set TOKMAP_TESTDATA)", file=sys.stderr)
        return 2
    t_start = _now()
    texts = {c: (td / "corpus" / f"{c}.txt").read_text(encoding="utf-8") for c in args.corpus_list}
    results = {"machine": common.machine_info(), "testdata": str(td),
               "config": {"models": [m.name for m in args.model_list], "corpora": args.corpus_list,
                          "load_repeats": args.load_repeats, "max_measure_s": args.max_seconds,
                          "env": common.SINGLE_THREAD_ENV, "quick": args.quick},
               "models": []}
    for model in args.model_list:
        results["models"].append(bench_model(model, td, args.corpus_list, texts, args))
    results["elapsed_s"] = _now() - t_start

    import report  # matplotlib is imported only now, outside every timed region
    out, chart = Path(args.out), Path(args.chart)
    (OUT / ("results-quick.json" if args.quick else "results.json")).write_text(json.dumps(results, indent=1))
    chart_ok = report.write_chart(results, chart)
    report.write_markdown(results, out, chart if chart_ok else None)
    _log(f"wrote {out}" + (f" and {chart}" if chart_ok else "") + f" in {results['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
