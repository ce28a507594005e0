"""Turn bench/run.py's results into BENCHMARKS.md (tables + ratios vs tokmap) and a PNG chart.

Ratios are always tokmap / peer, for load time (ms: below 1 means tokmap loads faster) and for
throughput (MiB/s: above 1 means tokmap encodes faster). The issue-4 target section comes from
bench/targets.py. The cold-start section is rendered from this run's measurement when there is one;
otherwise the section an earlier bench/cold_start.py run wrote into BENCHMARKS.md is carried over.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import common
from common import fmt_ratio
import targets

MiB = 1 << 20
SLOTS = ["tokmap", "reference", "kitoken", "tokie"]
COLORS = {"tokmap": "#d62728", "tokenizers": "#1f77b4", "tiktoken": "#17becf", "mistral-common": "#9467bd",
          "sentencepiece": "#8c564b",
          "kitoken": "#2ca02c", "tokie": "#ff7f0e"}


# -- number formatting -----------------------------------------------------------------------------

def fmt_ms(x: float) -> str:
    if x < 1:
        return f"{x:.2f}"
    if x < 100:
        return f"{x:.1f}"
    return f"{x:,.0f}"


def fmt_rate(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def fmt_size(n: int) -> str:
    return f"{n / MiB:.2f} MiB" if n >= MiB // 10 else f"{n / 1024:.0f} KiB"


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


# -- lookups ---------------------------------------------------------------------------------------

def _lib(model: dict, name: str) -> dict | None:
    return next((l for l in model["libs"] if l["lib"] == name), None)


def _slot_name(model: dict, slot: str) -> str:
    return model["reference"] if slot == "reference" else slot


def _rows(model: dict, lib: str) -> list[dict]:
    out = []
    for c in model["corpora"]:
        out += [r for r in c["rows"] if r["lib"] == lib and r.get("status") == "ok"]
    return out


def warm_geomean(model: dict, lib: str, key: str = "warm_mibs"):
    """Geometric mean over the corpora; None unless the library ran on every corpus of the model."""
    rows = _rows(model, lib)
    if not rows or len(rows) != len(model["corpora"]):
        return None
    return geomean([r[key] for r in rows])


# -- markdown --------------------------------------------------------------------------------------

def _run_col(results: dict) -> tuple[str, str]:
    """Header and separator of the 'run' column, present only for a merged report (bench/merge.py)."""
    return (" run |", " --- |") if results.get("runs") else ("", "")


def _run_cell(m: dict) -> str:
    return f" {m['run']} |" if "run" in m else ""


def _summary_tables(results: dict) -> list[str]:
    models = results["models"]
    rh, rs = _run_col(results)
    lines = ["## Summary", "",
             "Load time, in-process, median (ms; lower is better). In brackets: tokmap / peer "
             "(below 1× = tokmap loads faster).", "",
             "| model | source |" + rh + " tokmap | reference library | kitoken (.kit) | tokie (.tkz) |",
             "| --- | --- |" + rs + " ---: | ---: | ---: | ---: |"]
    for m in models:
        tm = _lib(m, "tokmap")
        tm_ms = tm["load_ms"] if tm and tm.get("status") == "ok" else None
        cells = []
        for slot in SLOTS:
            lib = _lib(m, _slot_name(m, slot))
            if not lib or lib.get("status") != "ok":
                cells.append("n/a" if not lib or lib.get("status") == "n/a" else "error")
                continue
            cell = fmt_ms(lib["load_ms"])
            if slot == "reference":
                cell = f"{lib['lib']}: {cell}"
            if slot != "tokmap" and tm_ms:
                cell += f" ({fmt_ratio(tm_ms / lib['load_ms'])})"
            cells.append(cell)
        lines.append(f"| {m['name']} | {m['kind']} |{_run_cell(m)} " + " | ".join(cells) + " |")
    for key, title in (("warm_mibs", "Warm"), ("cold_mibs", "Cold")):
        lines += ["", f"{title} encode throughput, geometric mean over the corpora (MiB/s; higher is better). "
                  "In brackets: tokmap / peer (above 1× = tokmap faster).", "",
                  "| model |" + rh + " tokmap | reference library | kitoken | tokie |",
                  "| --- |" + rs + " ---: | ---: | ---: | ---: |"]
        for m in models:
            tm = warm_geomean(m, "tokmap", key)
            cells = []
            for slot in SLOTS:
                name = _slot_name(m, slot)
                g = warm_geomean(m, name, key)
                lib = _lib(m, name)
                if g is None:
                    cells.append("n/a" if lib and lib.get("status") == "n/a" else "—")
                    continue
                cell = fmt_rate(g)
                if slot == "reference":
                    cell = f"{name}: {cell}"
                if slot != "tokmap" and tm:
                    cell += f" ({fmt_ratio(tm / g)})"
                cells.append(cell)
            lines.append(f"| {m['name']} |{_run_cell(m)} " + " | ".join(cells) + " |")
    return lines


def _model_section(m: dict) -> list[str]:
    kind_label = {"hf": "tokenizer.json", "tiktoken": ".tiktoken", "tekken": "Tekken json",
                  "spm": "SentencePiece .model"}[m["kind"]]
    lines = [f"### {m['name']} — {kind_label} (`{m['source']}`)", "",
             "| library | loads | file size | one-time convert (s) | load ms (median) | tokmap/peer load "
             "| load + encode('Hello world') ms | tokmap/peer |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    tm = _lib(m, "tokmap")
    tm_ok = tm and tm.get("status") == "ok"
    notes = []
    if m.get("run_label"):
        lines[1:1] = ["", f"From {m['run_label']}."]
    if m.get("source_note"):
        lines[1:1] = ["", m["source_note"]]
    for lib in m["libs"]:
        name = f"{lib['lib']} {lib['version']}"
        if lib.get("status") != "ok":
            lines.append(f"| {name} | — | — | — | {lib.get('status', '?')} | — | — | — |")
            notes.append(f"{lib['lib']}: {lib.get('status')} — {lib.get('reason', '')}")
            continue
        build = "—" if lib.get("build_s") is None else f"{lib['build_s']:.2f}"
        r_load = fmt_ratio(tm["load_ms"] / lib["load_ms"]) if tm_ok and lib["lib"] != "tokmap" else ""
        r_first = fmt_ratio(tm["first_ms"] / lib["first_ms"]) if tm_ok and lib["lib"] != "tokmap" else ""
        lines.append(f"| {name} | `{Path(lib['file']).name}` | {fmt_size(lib['size'])} | {build} | "
                     f"{fmt_ms(lib['load_ms'])} (n={lib['load_n']}) | {r_load} | {fmt_ms(lib['first_ms'])} | {r_first} |")
    lines += ["", "| corpus | input | library | cold MiB/s | warm MiB/s | tokmap/peer cold | tokmap/peer warm "
              "| ids equal tokmap's |",
              "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |"]
    for c in m["corpora"]:
        size = f"{c['bytes'] / MiB:.2f} MiB"
        if c.get("note"):
            size += f" (prefix of {c['bytes_total'] / MiB:.2f})"
            notes.append(f"{c['corpus']}: {c['note']}")
        tmr = next((r for r in c["rows"] if r["lib"] == "tokmap" and r.get("status") == "ok"), None)
        for i, r in enumerate(c["rows"]):
            first = (f"{c['corpus']}", size) if i == 0 else ("", "")
            if r.get("status") == "skipped":
                lines.append(f"| {first[0]} | {first[1]} | {r['lib']} | skipped | skipped | — | — | — |")
                notes.append(f"{c['corpus']} / {r['lib']}: {r.get('reason', '')}")
                continue
            if r.get("status") != "ok":
                lines.append(f"| {first[0]} | {first[1]} | {r['lib']} | error | error | — | — | — |")
                notes.append(f"{c['corpus']} / {r['lib']}: {r.get('reason', '')}")
                continue
            if r["lib"] == "tokmap":
                eq, rc, rw = "(itself)", "", ""
            else:
                eq = {True: "yes", False: "**no**", None: "—"}[r.get("ids_equal")]
                rc = fmt_ratio(tmr["cold_mibs"] / r["cold_mibs"]) if tmr else "—"
                rw = fmt_ratio(tmr["warm_mibs"] / r["warm_mibs"]) if tmr else "—"
                if r.get("ids_equal") is False:
                    notes.append(f"{c['corpus']} / {r['lib']}: ids differ from tokmap's — {r['diff']}")
            if max(r["cold_s"], r["warm_s"]) > m.get("max_measure_s", float("inf")):
                notes.append(f"{c['corpus']} / {r['lib']}: one call took {max(r['cold_s'], r['warm_s']):.0f} s "
                             f"(cold {r['cold_s']:.0f} s, warm {r['warm_s']:.0f} s), above the "
                             f"{m['max_measure_s']:.0f} s budget: the prefix rule predicts from tokmap's speed "
                             f"only, so a peer slower than tokmap still encodes the whole document")
            if not r.get("stable", True):
                notes.append(f"{c['corpus']} / {r['lib']}: repeated calls (in a round, or across rounds) gave different ids")
            lines.append(f"| {first[0]} | {first[1]} | {r['lib']} | {fmt_rate(r['cold_mibs'])} | "
                         f"{fmt_rate(r['warm_mibs'])} | {rc} | {rw} | {eq} |")
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    return lines + [""]


def render_markdown(results: dict, chart_rel: str | None) -> str:
    cfg = results["config"]
    lines = ["# Benchmarks", "",
             "tokmap next to the libraries people use for the same files, "
             + ("each library on each model in its own Python process, " if cfg.get("isolation") == "library"
                else "each model in its own Python process (all its libraries in that process), ") +
             "single-threaded (`RAYON_NUM_THREADS=1`, `TOKENIZERS_PARALLELISM=false`, tiktoken through "
             "`encode_ordinary`, one whole document per call). Produced by `make bench` "
             "(`RAYON_NUM_THREADS=1 python bench/run.py`); what each number means is in "
             "[bench/README.md](bench/README.md).", "",
             "## Machine", ""]
    if results.get("runs"):
        lines += ["This file merges separate runs of `bench/run.py` (by `bench/merge.py`); the `run` column "
                  "of the summary tables and the first line of each per-model section say which run a "
                  "model's numbers come from. Runs on different dates or under different machine load are "
                  "less comparable with each other than rows of one run.", ""]
        for i, r in enumerate(results["runs"], 1):
            rc = r["config"]
            lines += [f"### Run {i}: {', '.join(rc['models'])}", "", common.machine_markdown(r["machine"]),
                      f"- Corpora: {', '.join(rc['corpora'])} (`{r['testdata']}/corpus`). "
                      f"Whole run: {r['elapsed_s'] / 60:.1f} min." + (f" {r['note']}" if r.get("note") else ""),
                      ""]
    else:
        lines += [common.machine_markdown(results["machine"]), "",
                  f"Models: {', '.join(cfg['models'])}. Corpora: {', '.join(cfg['corpora'])} "
                  f"(`{results['testdata']}/corpus`). Whole run: {results['elapsed_s'] / 60:.1f} min.", ""]
    if chart_rel:
        lines += [f"![load time and throughput]({chart_rel})", ""]
    lines += targets.render(results)
    lines += _summary_tables(results)
    lines += ["", "## Per model", "",
              "Load: `load ms` is the median of n in-process loads of the file in the `loads` column "
              "(tokmap maps the file and reads its header; building the encoder happens on first use, "
              "which `load + encode('Hello world')` includes). `one-time convert` is the export / "
              "conversion from the source file that produced that file, run once.", "",
              "Encode: MiB/s of UTF-8 input. cold = the best of up to 3 first calls, each on a freshly loaded "
              "object, warm = the best of those objects' second calls with the same text (issue 4's "
              "\"warm (second call)\"; fewer objects once the next one's two calls would pass 3 s in all). "
              "`ids equal` compares the peer's ids with tokmap's on the same input. "
              f"Each library on each model ran in {cfg.get('rounds', 1)} round(s) of alternating order "
              "(tokmap first, then last): every figure is the library's best over the rounds.", ""]
    for m in results["models"]:
        cfg_m = next((r["config"] for r in results.get("runs", []) if m["name"] in r["config"]["models"]), cfg)
        m = m | {"max_measure_s": cfg_m.get("max_measure_s", float("inf"))}
        lines += _model_section(m)
    return "\n".join(lines) + "\n"


def write_markdown(results: dict, out: Path, chart: Path | None) -> None:
    chart_rel = os.path.relpath(chart, out.parent) if chart else None
    doc = render_markdown(results, chart_rel)
    if (results.get("cold_start") or {}).get("rows"):  # measured in this run
        import cold_start
        section = cold_start.render(results["cold_start"], made_by="`make bench` (bench/run.py), in the same run")
        doc = doc.rstrip("\n") + "\n\n" + section + "\n"
    elif out.exists():  # keep the section an earlier bench/cold_start.py run wrote
        old = common.extract_section(out.read_text(encoding="utf-8"))
        if old:
            doc = doc.rstrip("\n") + "\n\n" + old + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(doc, encoding="utf-8")


# -- chart -----------------------------------------------------------------------------------------

def write_chart(results: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    except ImportError:
        return False
    models = results["models"]
    names = [m["name"] for m in models]
    panels = [("Load time, ms (median, log scale; lower is better)",
               lambda m, lib: (_lib(m, lib) or {}).get("load_ms") if (_lib(m, lib) or {}).get("status") == "ok"
               else None),
              ("Cold encode, MiB/s (geomean over corpora, log; higher is better)",
               lambda m, lib: warm_geomean(m, lib, "cold_mibs")),
              ("Warm encode, MiB/s (geomean over corpora, log; higher is better)",
               lambda m, lib: warm_geomean(m, lib, "warm_mibs"))]
    if len(models) <= 8:
        fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))
    else:  # many models: one panel per row
        fig, axes = plt.subplots(3, 1, figsize=(max(14, 0.95 * len(models)), 14))
    width = 0.2
    used = set()
    for ax, (title, getter) in zip(axes, panels):
        values = []
        for i, m in enumerate(models):
            for j, slot in enumerate(SLOTS):
                lib = _slot_name(m, slot)
                v = getter(m, lib)
                if v is None or v <= 0:
                    continue
                used.add(lib)
                values.append(v)
                ax.bar(i + (j - 1.5) * width, v, width, color=COLORS[lib])
        ax.set_yscale("log")
        if values:  # bars grow from well below the smallest value, so short bars stay visible
            ax.set_ylim(bottom=min(values) / 3, top=max(values) * 1.5)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=30, ha="right")
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", which="major", alpha=0.3)
    handles = [Patch(color=COLORS[k], label=k) for k in COLORS if k in used]
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), frameon=False)
    info = results["machine"]
    when = info["date"] if not results.get("runs") else \
        "runs of " + " and ".join(r["machine"]["date"] for r in results["runs"]) + " (see BENCHMARKS.md)"
    fig.text(0.5, 0.005, f"{info['cpu']}, single thread, Python {info['python'].split()[-1]}, {when}",
             ha="center", fontsize=8, color="#555")
    fig.tight_layout(rect=(0, 0.03, 1, 0.92 if len(models) <= 8 else 0.965))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
