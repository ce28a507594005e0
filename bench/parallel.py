"""encode_batch in one process against N worker processes (issue 4: 2 workers >= 1.8x one process).

    python bench/parallel.py [--models llama3,cl100k_base] [--sets lines,en,...] [--workers 2]
                             [--repeat 5] [--mode fresh|warm|cold] [--json out.json]

Document sets: `lines` groups each corpus's non-empty lines into ~100 documents (499 in all:
utf8seq.txt is a single line), `<corpus>` (e.g. `en`) one corpus's lines in ~100 documents,
`corpora` the six corpora as six documents (use it with --mode warm or cold: six documents cannot
be dealt into fresh slices; multi.txt is 65% of the bytes but not of the time, so two workers
still balance). Each run times the single
process, then the pool, on the same batch; `--mode` says which batch (see measure(): by default
documents neither side has seen, after a warm-up slice); the best and median MiB/s and ratios
over the runs are reported.

Machines shared with other jobs make wall-clock ratios noisy, so CPU seconds are reported too:
workers' CPU time well above the single process's means overhead, and "CPU ratio" (the single
process's CPU seconds over the busiest worker's plus the caller's, run by run) is the ratio a free
core per worker would give -- a projection, not a timing. A wall ratio well below it means the
cores were busy with something else. On Linux with sched_autogroup_enabled=1 (the shared dev
machine) the scheduler splits CPU between sessions: while another session keeps a core busy, a
session's two workers share the one core the single process would have had, and the wall ratio
cannot pass ~1.

`measure(mtok_path, texts, workers)` is importable: bench/run.py can call it for its figure. It
widens the CPU affinity for its duration (run.py pins itself to one CPU, which workers inherit).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import tokmap  # noqa: E402

MiB = 1 << 20
CORPORA = ["en", "code", "multi", "pride", "wagahai", "utf8seq"]


def _cpu_of(pid: int) -> float:
    """utime + stime of a process in seconds (Linux /proc), 0.0 where unavailable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _workers_cpu(tok) -> list[float]:
    pool = tok._pool
    return [_cpu_of(w.proc.pid) for w in pool.workers] if pool is not None else []


def _timed(fn, tok):
    """fn's result, wall seconds, the caller's CPU seconds and each worker's CPU seconds."""
    c0, w0, t0 = time.process_time(), _workers_cpu(tok), time.perf_counter()
    out = fn()
    wall, c1, w1 = time.perf_counter() - t0, time.process_time(), _workers_cpu(tok)
    return out, wall, c1 - c0, [y - x for x, y in zip(w0, w1)] if len(w0) == len(w1) else w1


def fresh_slices(texts: list, repeat: int) -> list[list]:
    """The documents dealt into repeat + 1 interleaved slices (slice 0: the warm-up)."""
    return [texts[i::repeat + 1] for i in range(repeat + 1)]


def measure(mtok_path, texts, workers: int = 2, repeat: int = 5, mode: str = "fresh") -> dict:
    """Single-process vs `workers`-process encode_batch of `texts`.

    mode "fresh" (default): the documents are dealt into repeat + 1 interleaved slices; slice 0 warms
    both sides (and starts the pool), then each run encodes a slice neither side has seen, so no
    piece cache holds its exact pieces -- a stream of new documents. "warm": the whole list once
    untimed, then again on each run (each side's caches already hold its pieces). "cold": a new
    tokenizer and a new pool per run, the pool's start included in the parallel time.
    """
    texts = list(texts)
    if mode == "fresh":
        slices = fresh_slices(texts, repeat)
        warmup, runs = slices[0], slices[1:]
    elif mode == "warm":
        warmup, runs = texts, [texts] * repeat
    else:
        warmup, runs = None, [texts] * repeat
    saved = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if saved is not None:
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    tok = tokmap.load(mtok_path)
    single, parallel, single_cpu, parallel_cpu, sizes = [], [], [], [], []
    identical = True
    start_s = None
    try:
        if warmup is not None:
            tok.encode_batch(warmup)
            start_s = _timed(lambda: tok.encode_batch(warmup, num_workers=workers), tok)[1]
        for batch in runs:
            if mode == "cold":
                tok.close()
                tok = tokmap.load(mtok_path)
            sizes.append(sum(len(t.encode("utf-8")) for t in batch))
            expected, s, c, _ = _timed(lambda: tok.encode_batch(batch), tok)
            single.append(s)
            single_cpu.append(c)
            got, s, c, wc = _timed(lambda: tok.encode_batch(batch, num_workers=workers), tok)
            parallel.append(s)
            parallel_cpu.append((c, wc))
            identical = identical and got == expected
    finally:
        tok.close()
        if saved is not None:
            os.sched_setaffinity(0, saved)
    s_rate = [n / MiB / t for n, t in zip(sizes, single)]
    p_rate = [n / MiB / t for n, t in zip(sizes, parallel)]
    ratios = [p / s for s, p in zip(s_rate, p_rate)]
    return {
        "model": Path(mtok_path).stem, "mode": mode, "documents": len(texts), "bytes": sum(len(t.encode("utf-8"))
                                                                                         for t in texts),
        "workers": workers, "repeat": repeat, "identical": identical,
        "single_mibs_best": max(s_rate), "single_mibs_median": statistics.median(s_rate),
        "parallel_mibs_best": max(p_rate), "parallel_mibs_median": statistics.median(p_rate),
        "ratio_best": max(ratios), "ratio_median": statistics.median(ratios), "ratio_runs": ratios,
        "single_mibs_runs": s_rate, "parallel_mibs_runs": p_rate,
        "single_cpu_s": sum(single_cpu), "parallel_cpu_s": sum(c + sum(wc) for c, wc in parallel_cpu),
        # What the wall ratio would be with a free core per worker: the single process's CPU time
        # over the busiest worker's (plus the caller's own), run by run. A projection, not a timing.
        "cpu_ratio": sum(single_cpu) / sum(c + max(wc, default=0.0) for c, wc in parallel_cpu),
        "pool_start_s": start_s, "cpu_runs": [[sc, c, wc] for sc, (c, wc) in zip(single_cpu, parallel_cpu)],
        "loadavg_after": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def documents(testdata: Path, which: str, per_corpus: int = 100) -> list[str]:
    """A document set by name (see the module docstring)."""
    read = lambda c: (testdata / "corpus" / f"{c}.txt").read_text(encoding="utf-8")  # noqa: E731
    if which == "corpora":
        return [read(c) for c in CORPORA]
    docs = []
    for c in CORPORA if which == "lines" else [which]:
        lines = [ln for ln in read(c).split("\n") if ln]
        step = max(1, -(-len(lines) // per_corpus))
        docs += ["\n".join(lines[i:i + step]) for i in range(0, len(lines), step)]
    return docs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="llama3,cl100k_base",
                    help="names of .mtok files in --dir, or paths to .mtok files")
    ap.add_argument("--dir", default=str(REPO / "bench" / "out"))
    ap.add_argument("--sets", default="lines")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mode", default="fresh", choices=["fresh", "warm", "cold"], help="see measure()")
    ap.add_argument("--testdata", default=os.environ.get("TOKMAP_TESTDATA", str(REPO.parent / "shared" / "testdata")))
    ap.add_argument("--json", help="also write every result to this file")
    a = ap.parse_args(argv)
    results = []
    print(f"mode {a.mode}, {a.workers} workers, {a.repeat} runs each; ratio = N-process MiB/s / 1-process MiB/s")
    print(f"{'model':<14} {'set':<8} {'docs':>5} {'MiB':>6} {'1 proc MiB/s':>13} {f'{a.workers} proc MiB/s':>13} "
          f"{'ratio best':>10} {'median':>7}  {'runs':<28} {'CPU s 1/N':>11} {'CPU ratio':>9} same")
    for m in a.models.split(","):
        path = Path(m) if m.endswith(".mtok") else Path(a.dir) / f"{m}.mtok"
        for s in a.sets.split(","):
            r = measure(path, documents(Path(a.testdata), s), a.workers, a.repeat, a.mode)
            r["set"] = s
            results.append(r)
            runs = " ".join(f"{x:.2f}" for x in r["ratio_runs"])
            print(f"{r['model']:<14} {s:<8} {r['documents']:>5} {r['bytes'] / MiB:>6.2f} "
                  f"{r['single_mibs_best']:>13.2f} {r['parallel_mibs_best']:>13.2f} {r['ratio_best']:>10.2f} "
                  f"{r['ratio_median']:>7.2f}  {runs:<28} {r['single_cpu_s']:>5.2f}/{r['parallel_cpu_s']:<5.2f} "
                  f"{r['cpu_ratio']:>9.2f} "
                  f"{'yes' if r['identical'] else 'NO'}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0 if all(r["identical"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
