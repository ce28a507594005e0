"""Merge several bench/run.py results files into one BENCHMARKS.md and chart.

    python bench/merge.py bench/out/results-A.json bench/out/results-B.json [--out BENCHMARKS.md]
                          [--chart bench/bench.png] [--json bench/out/results-merged.json]

Used when only some models were re-run (e.g. `run.py --models gemma3,llama2 --out bench/out/x.md`):
the models of every file are kept in the order of common.MODELS; a model present in several files
is taken from the last one. The report gets a `run` column and says per model which run (date,
machine, versions) its numbers come from. Hostile input, cold start, encode_batch and file size come
from the last file that has them; without a cold-start measurement the section of an existing --out is
kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import common
import report


def merge(paths: list[Path], notes: dict[int, str] | None = None) -> dict:
    runs, by_name = [], {}
    for i, p in enumerate(paths, 1):
        r = json.loads(p.read_text(encoding="utf-8"))
        runs.append({k: r[k] for k in ("machine", "testdata", "config", "elapsed_s")} | {"file": str(p)}
                    | ({"note": notes[i]} if notes and i in notes else {}))
        for m in r["models"]:
            by_name[m["name"]] = m | {"run": i, "run_label": f"run {i} ({r['machine']['date']})"}
    order = {m.name: k for k, m in enumerate(common.MODELS)}
    models = sorted(by_name.values(), key=lambda m: order.get(m["name"], len(order)))
    corpora = []
    for r in runs:
        corpora += [c for c in r["config"]["corpora"] if c not in corpora]
    last = runs[-1]
    out = {"machine": last["machine"], "testdata": last["testdata"],
           "config": {"models": [m["name"] for m in models], "corpora": corpora,
                      # (the report's header says how libraries were run only when every run did the same)
                      "isolation": "library" if all(r["config"].get("isolation") == "library" for r in runs) else None,
                      "rounds": min(r["config"].get("rounds", 1) for r in runs)},
           "elapsed_s": sum(r["elapsed_s"] for r in runs), "runs": runs, "models": models}
    # the run-wide issue-4 parts (hostile input, cold start, encode_batch, file size): from the last run
    # that has each
    for p in paths:
        r = json.loads(p.read_text(encoding="utf-8"))
        for key in PARTS:
            if r.get(key):
                out[key] = r[key]
    return out


PARTS = ("hostile", "cold_start", "batch", "file_size")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", type=Path, help="results JSON files from bench/run.py, oldest first")
    p.add_argument("--out", default=str(common.REPO / "BENCHMARKS.md"))
    p.add_argument("--chart", default=str(common.BENCH / "bench.png"))
    p.add_argument("--json", default=str(common.OUT / "results-merged.json"))
    p.add_argument("--note", action="append", default=[], metavar="N=TEXT",
                   help="a sentence printed under run N (1-based) in the Machine section; repeatable")
    args = p.parse_args(argv)
    notes = {}
    for n in args.note:
        k, _, text = n.partition("=")
        notes[int(k)] = text
    merged = merge(args.results, notes)
    Path(args.json).write_text(json.dumps(merged, indent=1))
    chart = Path(args.chart)
    ok = report.write_chart(merged, chart)
    report.write_markdown(merged, Path(args.out), chart if ok else None)
    print(f"wrote {args.out}" + (f" and {chart}" if ok else "") + f" from {len(args.results)} runs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
