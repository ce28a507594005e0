"""Issue 4's targets: which models/peers/corpora they name, and the "Issue-4 targets" section of BENCHMARKS.md.

Everything here reads bench/run.py's results dict; nothing is measured in this module. A figure is
"met" or "not met" against the target written next to it; a cell without a figure says why (library
cannot read the file, skipped by a time cap, not part of this run).
"""

from __future__ import annotations

from dataclasses import dataclass

from common import CORPORA, fmt_ratio

TINY = 1e-12


@dataclass(frozen=True)
class Throughput:
    """tokmap / peer encode throughput on each listed corpus (None: every corpus), cold and warm."""
    models: tuple[str, ...]
    peer: str
    minimum: float
    corpora: tuple[str, ...] | None
    title: str


THROUGHPUT = [
    Throughput(("cl100k_base", "o200k_base"), "tiktoken", 1.0, ("en", "code", "multi"),
               "at least tiktoken's (cl100k_base, o200k_base; en, code, multi)"),
    Throughput(("llama3", "qwen3", "gpt4o"), "tokenizers", 5.0, None,
               "at least 5× tokenizers' (llama3, qwen3, gpt4o tokenizer.json; every corpus)"),
    Throughput(("botchan-unigram", "minilm", "gemma3", "llama2"), "kitoken", 1.0, None,
               "at least kitoken's (Unigram, WordPiece, SentencePiece-BPE; every corpus)"),
]
HOSTILE_SCALING_MAX = 15.0   # time(10^6) / time(10^5)
SHORT_MAX_US = 10.0
COLD_START_MAX = 0.5         # tokmap / tokie wall time
COLD_START_GROUPS = ("llama3", "gemma3")
BATCH_MIN = 1.8              # 2 workers vs 1
FILE_SIZE_MODEL = "llama3"   # .mtok vs tokie's .tkz


def target_models() -> dict[str, set[str]]:
    """Model -> the libraries `--targets-only` runs for it (tokmap plus the peer its target names)."""
    out: dict[str, set[str]] = {}
    for t in THROUGHPUT:
        for m in t.models:
            out.setdefault(m, {"tokmap"}).add(t.peer)
    return out


def target_corpora(model: str) -> list[str]:
    for t in THROUGHPUT:
        if model in t.models and t.corpora:
            return list(t.corpora)
    return list(CORPORA)


# -- formatting ------------------------------------------------------------------------------------

def _ceiling_note(b: dict) -> str:
    """The encode_batch row's note on bench/ceiling.py's figure: N processes sharing nothing."""
    c = b.get("ceiling") or {}
    if "ratio" not in c:
        return f" (ceiling not measured: {c['error']})" if c.get("error") else ""
    rounds = " / ".join(f"{x:.2f}" for x in c["ratio_rounds"])
    return (f". For comparison, {c['workers']} independent processes sharing nothing (bench/ceiling.py): "
            f"{c['ratio']:.2f}× (rounds {rounds})")


def judged(x: float, threshold: float, fmt=fmt_ratio) -> str:
    """fmt(x), with more digits where fmt would print a value on one side of the threshold as the
    threshold itself (1.7954 against 1.8: "1.795×", not "1.80× not met")."""
    s = fmt(x)
    if x == threshold or s != fmt(threshold):
        return s
    unit = "×" if s.endswith("×") else ""
    digits = next((d for d in range(3, 12) if float(f"{x:.{d}f}") != threshold), 12)
    return f"{x:.{digits}f}{unit}"


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("met" if ok else "**not met**")


def _secs(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s" if x < 10 else f"{x:.1f} s"


def _model(results: dict, name: str) -> dict | None:
    return next((m for m in results.get("models", []) if m["name"] == name), None)


def _lib(model: dict, name: str) -> dict | None:
    return next((l for l in model["libs"] if l["lib"] == name), None)


# -- throughput ------------------------------------------------------------------------------------

def throughput_cells(results: dict, t: Throughput) -> list[dict]:
    """One dict per (model, mode, corpus): {model, mode, corpus, ratio, ok, text, estimated}."""
    cells = []
    for name in t.models:
        m = _model(results, name)
        for mode in ("cold", "warm"):
            for corpus in (t.corpora or CORPORA):
                cell = {"model": name, "mode": mode, "corpus": corpus, "ratio": None, "ok": None}
                cells.append(cell)
                if m is None:
                    cell["text"] = "not run"
                    continue
                lib = _lib(m, t.peer)
                if lib is None:
                    cell["text"] = "not run"
                    continue
                if lib.get("status") in ("n/a", "error"):
                    cell["text"] = "n/a (cannot read the file)"
                    cell["na"] = True
                    continue
                entry = next((c for c in m["corpora"] if c["corpus"] == corpus), None)
                if entry is None:
                    cell["text"] = "not run"
                    continue
                tm = next((r for r in entry["rows"] if r["lib"] == "tokmap"), None)
                pr = next((r for r in entry["rows"] if r["lib"] == t.peer), None)
                if not tm or tm.get("status") != "ok":
                    cell["text"] = "tokmap error"
                    cell["ok"] = False
                    continue
                if pr is None:
                    cell["text"] = "not run"
                    continue
                if pr.get("status") == "skipped":
                    # the peer needs more than the cap for one call: tokmap's time gives a lower bound
                    low = pr["over_s"] / max(tm[f"{mode}_s"], TINY)
                    cell.update(ratio=low, ok=True if low >= t.minimum else None, bound=True,
                                text=f"≥ {fmt_ratio(low)} " + ("met" if low >= t.minimum else "(no verdict)") +
                                     f" ({t.peer} > {pr['over_s']:.0f} s, skipped)")
                    continue
                if pr.get("status") != "ok":
                    cell["text"] = f"{t.peer} error"
                    cell["na"] = True
                    continue
                r = tm[f"{mode}_mibs"] / pr[f"{mode}_mibs"]
                cell.update(ratio=r, ok=r >= t.minimum, text=f"{judged(r, t.minimum)} {_verdict(r >= t.minimum)}",
                            tokmap_s=tm[f"{mode}_s"], tokmap_warm_s=tm["warm_s"], peer_s=pr[f"{mode}_s"])
    return cells


def remaining_rows(results: dict) -> list[dict]:
    """The cold cells not met, each with what tokmap's first call would have to shed to meet it.

    The target time is the peer's cold seconds divided by the target ratio. A first call does the
    work of a second call over the same text (split, cache lookups, joining the ids: the warm
    figure) plus its own: merging the document's distinct pieces, filling the caches, building
    first-use tables (cold - warm). With the warm part as it is, that own work must shrink by
    (cold - warm) / (target - warm); where the warm call alone is over the target, no cut of
    the first call's own work is enough. (A warm call can take shortcuts a first call cannot --
    spacecut.py's remembered chunks -- so the split is an estimate, not a measurement of parts.)"""
    rows = []
    for t in THROUGHPUT:
        for c in throughput_cells(results, t):
            if c["mode"] != "cold" or c["ok"] is not False or "peer_s" not in c:
                continue
            target = c["peer_s"] / t.minimum
            own = c["tokmap_s"] - c["tokmap_warm_s"]
            rows.append({**c, "peer": t.peer, "minimum": t.minimum, "target_s": target, "own_s": own,
                         "shrink": own / (target - c["tokmap_warm_s"]) if target > c["tokmap_warm_s"] else None})
    return rows


def _remaining_table(results: dict) -> list[str]:
    rows = remaining_rows(results)
    if not rows:
        return []
    ms = lambda x: f"{x * 1000:.1f} ms"  # noqa: E731
    lines = ["What the cold cells not met would need (each from this run's figures: see targets.remaining_rows). "
             "Target: the peer's cold time ÷ the target ratio. First-call work: tokmap's cold time minus its warm "
             "time on the same text (merging the distinct pieces, filling the caches, first-use tables).", "",
             "| model | corpus | target | tokmap cold | tokmap warm | first-call work | needed |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        if r["shrink"] is None:
            need = f"warm call alone is {r['tokmap_warm_s'] / r['target_s']:.2f}× the target"
        else:
            need = f"first-call work ÷ {r['shrink']:.1f} (to {ms(r['target_s'] - r['tokmap_warm_s'])})"
        lines.append(f"| {r['model']} | {r['corpus']} | ≤ {ms(r['target_s'])} ({r['peer']} "
                     f"{ms(r['peer_s'])} ÷ {r['minimum']:g}) | {ms(r['tokmap_s'])} | {ms(r['tokmap_warm_s'])} | "
                     f"{ms(r['own_s'])} | {need} |")
    return lines + [""]


def _throughput_table(results: dict, t: Throughput) -> list[str]:
    cells = throughput_cells(results, t)
    corpora = list(t.corpora or CORPORA)
    lines = [f"Encode throughput {t.title}: tokmap MiB/s ÷ {t.peer} MiB/s, target ≥ {t.minimum:g}×.", "",
             "| model | call | " + " | ".join(corpora) + " | met |",
             "| --- | --- | " + " | ".join("---" for _ in corpora) + " | ---: |"]
    notes = set()
    for name in t.models:
        for mode in ("cold", "warm"):
            row = [c for c in cells if c["model"] == name and c["mode"] == mode]
            judged = [c for c in row if c["ok"] is not None]
            met = sum(1 for c in judged if c["ok"])
            lines.append(f"| {name} | {mode} | " + " | ".join(c["text"] for c in row) +
                         f" | {met}/{len(judged)} |")
            m = _model(results, name)
            lib = _lib(m, t.peer) if m else None
            if lib and lib.get("status") in ("n/a", "error"):
                notes.add(f"{name}: {t.peer} cannot read the file — {lib.get('reason', '')}")
    if any(c.get("bound") for c in cells):
        notes.add(f"≥: {t.peer} was not measured on that corpus because a trial call did not finish within "
                  f"the per-call cap (`--peer-cap`); the cap divided by tokmap's measured time is a lower bound "
                  f"of the ratio.")
    if notes:
        lines += [""] + [f"- {n}" for n in sorted(notes)]
    return lines + [""]


def _throughput_summary(results: dict, t: Throughput) -> tuple[str, str, str]:
    cells = throughput_cells(results, t)
    judged = [c for c in cells if c["ok"] is not None]
    met = sum(1 for c in judged if c["ok"])
    na = sum(1 for c in cells if c.get("na"))
    missing = sum(1 for c in cells if c["ok"] is None and not c.get("na"))
    worst = min(judged, key=lambda c: c["ratio"] or 0, default=None)
    fig = f"{met} of {len(judged)} cells"
    if worst:
        fig += f"; lowest {fmt_ratio(worst['ratio'])} ({worst['model']} {worst['corpus']} {worst['mode']})"
    if na:
        fig += f"; {na} n/a (peer cannot read the file)"
    if missing:
        fig += f"; {missing} without a verdict (not run, or skipped)"
    return (f"Encode {t.title}", f"≥ {t.minimum:g}× per cell, cold and warm", fig, _overall(judged, missing))


def _overall(judged: list[dict], missing: int) -> str:
    if not judged:
        return "—"
    if any(not c["ok"] for c in judged):
        return _verdict(False)
    return "met" + (" where measured" if missing else "")


# -- hostile ---------------------------------------------------------------------------------------

def hostile_rows(results: dict) -> list[dict]:
    h = results.get("hostile")
    if not h:
        return []
    small, big = (str(n) for n in h["config"]["sizes"])
    out = []
    for m in h["models"]:
        ref = m["libs"][1] if len(m["libs"]) > 1 else None
        for c in m["cases"]:
            tm = c["results"].get("tokmap", {})
            rf = c["results"].get(ref, {}) if ref else {}
            row = {"model": m["name"], "case": c["case"], "ref": ref, "tm": tm, "rf": rf,
                   "small": small, "big": big}
            t1, t2 = tm.get(small, {}).get("seconds"), tm.get(big, {}).get("seconds")
            row["scaling"] = t2 / t1 if t1 and t2 else None
            r1, r2 = rf.get(small, {}).get("seconds"), rf.get(big, {}).get("seconds")
            row["ref_scaling"] = r2 / r1 if r1 and r2 else None
            vs = [a / b for a, b in ((t1, r1), (t2, r2)) if a and b]
            row["vs_ref"] = max(vs) if vs else None
            row["vs_ref_small"] = t1 / r1 if t1 and r1 else None
            row["vs_ref_big"] = t2 / r2 if t2 and r2 else None
            eq = []
            for n in (small, big):
                a, b = tm.get(n, {}).get("sha1"), rf.get(n, {}).get("sha1")
                if a and b:
                    eq.append(a == b)
            row["ids_equal"] = all(eq) if eq else None
            out.append(row)
    return out


def _hostile_cell(res: dict, n: str) -> str:
    r = res.get(n)
    if r is None:
        return "—"
    if "seconds" in r:
        return _secs(r["seconds"])
    if "timeout" in r:
        return f"> {r['timeout']:.0f} s (killed)"
    if "skipped" in r:
        return f"skipped ({r['skipped']})"
    return "error"


def _hostile_table(results: dict) -> list[str]:
    rows = hostile_rows(results)
    if not rows:
        return ["Hostile input: not measured in this run.", ""]
    h = results["hostile"]
    small, big = h["config"]["sizes"]
    from hostile import CASE_LABEL
    lines = [f"Hostile input, {small:,} and {big:,} characters (seeded, generated in the bench; seed "
             f"{h['config']['seed']}). Time of one `encode` call on a freshly loaded tokenizer (best of 3, "
             f"fewer when three calls would take over 12 s; both sizes alike). `scaling` = time({big:,}) ÷ time({small:,}), target ≤ {HOSTILE_SCALING_MAX:g}; "
             f"`tokmap/ref` = tokmap's time ÷ the reference's at each size, target ≤ 1× (never slower). "
             f"Caps: {big:,} is skipped for a library whose {small:,} call took > {h['config']['cap_s']:g} s; "
             f"a call running longer than {h['config']['timeout_s']:g} s is killed.", "",
             f"| model | input | tokmap {small:,} | tokmap {big:,} | tokmap scaling | ref | ref {small:,} "
             f"| ref {big:,} | ref scaling | tokmap/ref {small:,} | tokmap/ref {big:,} | ids equal ref |",
             "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        sc = r["scaling"]
        sc_txt = f"{judged(sc, HOSTILE_SCALING_MAX, lambda v: f'{v:.1f}')} {_verdict(sc <= HOSTILE_SCALING_MAX)}" if sc else "—"
        rsc = f"{r['ref_scaling']:.1f}" if r["ref_scaling"] else "—"
        vs = []
        for key in ("vs_ref_small", "vs_ref_big"):
            v = r[key]
            vs.append(f"{judged(v, 1.0)} {_verdict(v <= 1.0)}" if v else "—")
        eq = {True: "yes", False: "**no**", None: "—"}[r["ids_equal"]]
        lines.append(f"| {r['model']} | {CASE_LABEL.get(r['case'], r['case'])} | "
                     f"{_hostile_cell(r['tm'], r['small'])} | {_hostile_cell(r['tm'], r['big'])} | {sc_txt} | "
                     f"{r['ref'] or '—'} | {_hostile_cell(r['rf'], r['small'])} | {_hostile_cell(r['rf'], r['big'])} | "
                     f"{rsc} | {vs[0]} | {vs[1]} | {eq} |")
    return lines + [""]


# -- short strings ---------------------------------------------------------------------------------

def _short_table(results: dict) -> list[str]:
    models = [m for m in results.get("models", []) if m.get("short")]
    if not models:
        return ["Short strings: not measured in this run.", ""]
    import short
    peers = []
    for m in models:
        for lib in m["short"]:
            if lib != "tokmap" and lib not in peers:
                peers.append(lib)
    lines = [f"Short strings: {sum(len(v) for v in short.SENTENCES.values())} fixed sentences of 5–60 characters "
             f"({', '.join(f'{len(v)} {k}' for k, v in short.SENTENCES.items())}), warm, one call per `encode`. "
             f"Median over the sentences of µs per call (each sentence: best of {short.ROUNDS} loops of "
             f"{short.REPEATS} calls, one loop per round over all the sentences). Target: tokmap ≤ "
             f"{SHORT_MAX_US:g} µs. In brackets: tokmap ÷ peer (below 1× = tokmap faster).", "",
             "| model | tokmap µs | target | en / zh / code µs | slowest sentence µs | " +
             " | ".join(f"{p} µs" for p in peers) + " |",
             "| --- | ---: | --- | ---: | ---: | " + " | ".join("---:" for _ in peers) + " |"]
    notes = []
    for m in models:
        s = m["short"]
        tm = s.get("tokmap")
        if not tm or "median_us" not in tm:
            lines.append(f"| {m['name']} | {(tm or {}).get('error', 'error')} | — | — | — | " +
                         " | ".join("—" for _ in peers) + " |")
            continue
        cells = []
        for p in peers:
            ps = s.get(p)
            if not ps:
                cells.append("n/a")
            elif "median_us" not in ps:
                cells.append("error")
            else:
                cell = f"{ps['median_us']:.1f} ({fmt_ratio(tm['median_us'] / ps['median_us'])})"
                if ps.get("ids_equal") is False:
                    cell += " ids differ"
                    notes.append(f"{m['name']} / {p}: {ps.get('diff', '')}")
                cells.append(cell)
        bl = tm["by_lang_us"]
        lines.append(f"| {m['name']} | {tm['median_us']:.1f} | {_verdict(tm['median_us'] <= SHORT_MAX_US)} | "
                     f"{' / '.join(f'{bl[k]:.1f}' for k in ('en', 'zh', 'code') if k in bl)} | "
                     f"{tm['max_us']:.1f} (`{tm['max_sentence'][:24].replace('|', '¦')}`) | " + " | ".join(cells) + " |")
    if notes:
        lines += ["", "Notes (ids differ from tokmap's on some sentences):", ""] + [f"- {n}" for n in notes]
    return lines + [""]


# -- summary ---------------------------------------------------------------------------------------

def summary_rows(results: dict) -> list[tuple[str, str, str, str]]:
    rows = [_throughput_summary(results, t) for t in THROUGHPUT]
    hr = hostile_rows(results)
    if hr:
        sc = [r for r in hr if r["scaling"] is not None]
        worst = max(sc, key=lambda r: r["scaling"], default=None)
        unmeasured = len(hr) - len(sc)
        fig = f"{sum(1 for r in sc if r['scaling'] <= HOSTILE_SCALING_MAX)} of {len(sc)} inputs"
        if worst:
            fig += f"; highest {worst['scaling']:.1f} ({worst['model']}, {worst['case']})"
        if unmeasured:
            fig += f"; {unmeasured} without both sizes"
        rows.append(("Hostile input: 10× the length costs at most 15× the time (tokmap)",
                     f"≤ {HOSTILE_SCALING_MAX:g}", fig,
                     _verdict(not unmeasured and all(r["scaling"] <= HOSTILE_SCALING_MAX for r in sc)) if sc else "—"))
        vs = [r for r in hr if r["vs_ref"] is not None]
        worst = max(vs, key=lambda r: r["vs_ref"], default=None)
        fig = f"{sum(1 for r in vs if r['vs_ref'] <= 1)} of {len(vs)} inputs"
        if worst:
            fig += f"; slowest {judged(worst['vs_ref'], 1.0)} of {worst['ref']} ({worst['model']}, {worst['case']})"
        rows.append(("Hostile input: never slower than the reference (tokenizers; tiktoken for .tiktoken)",
                     "tokmap/ref ≤ 1× at both sizes", fig, _verdict(all(r["vs_ref"] <= 1 for r in vs)) if vs else "—"))
        eq = [r for r in hr if r["ids_equal"] is not None]
        rows.append(("Hostile input: ids equal the reference's", "all equal",
                     f"{sum(1 for r in eq if r['ids_equal'])} of {len(eq)} inputs",
                     _verdict(all(r["ids_equal"] for r in eq)) if eq else "—"))
    else:
        rows.append(("Hostile input", "scaling ≤ 15, never slower", "not measured in this run", "—"))
    sh = [(m["name"], m["short"]["tokmap"]) for m in results.get("models", [])
          if m.get("short", {}).get("tokmap", {}).get("median_us") is not None]
    if sh:
        worst = max(sh, key=lambda x: x[1]["median_us"])
        met = sum(1 for _n, s in sh if s["median_us"] <= SHORT_MAX_US)
        rows.append(("Short strings, warm: µs per `encode` call (median over the sentences)", f"≤ {SHORT_MAX_US:g} µs",
                     f"{met} of {len(sh)} models; highest {worst[1]['median_us']:.1f} µs ({worst[0]})",
                     _verdict(met == len(sh))))
    else:
        rows.append(("Short strings", f"≤ {SHORT_MAX_US:g} µs", "not measured in this run", "—"))
    cs = results.get("cold_start")
    for g in COLD_START_GROUPS:
        if cs and cs.get("rows"):
            import cold_start
            r = cold_start.wall_ratio(cs, g, "tokie")
            tm = next((x for x in cs["rows"] if x["group"] == g and x["label"].startswith("tokmap")), None)
            tk = next((x for x in cs["rows"] if x["group"] == g and x["label"].startswith("tokie")), None)
            fig = (f"{judged(r, COLD_START_MAX)} ({tm['median_ms']:.0f} ms vs {tk['median_ms']:.0f} ms)" if r
                   else "not measured")
            rows.append((f"Cold start of a whole process, {g}: tokmap ÷ tokie wall time",
                         f"≤ {COLD_START_MAX:g}×", fig, _verdict(r <= COLD_START_MAX) if r else "—"))
        else:
            rows.append((f"Cold start of a whole process, {g}", f"≤ {COLD_START_MAX:g}×",
                         "not measured in this run", "—"))
    b = results.get("batch")
    if b and b.get("status") == "ok":
        ident = {True: "identical", False: "**results differ**", None: "identity not reported"}[b.get("identical")]
        rows.append((f"`encode_batch`, {b['workers']} worker processes vs 1 ({b['documents']} documents, "
                     f"{b['bytes'] / (1 << 20):.1f} MiB)", f"≥ {BATCH_MIN:g}×",
                     f"{judged(b['speedup'], BATCH_MIN, lambda v: f'{v:.2f}×')} ({b['single_mibs']:.2f} → "
                     f"{b['parallel_mibs']:.2f} MiB/s)"
                     + (f"; median of {len(b['ratio_runs'])} runs, rounds "
                        + " / ".join(f"{x:.2f}" for x in b["round_medians"]) if b.get("round_medians") else "")
                     + f"; {ident}" + _ceiling_note(b),
                     _verdict(b["speedup"] >= BATCH_MIN and b.get("identical") is not False)))
    else:
        why = (b or {}).get("reason", "not measured in this run")
        rows.append(("`encode_batch`, 2 worker processes vs 1", f"≥ {BATCH_MIN:g}×",
                     "not available" + (f" ({why})" if why and "not available" not in why else f": {why}"), "—"))
    fs = results.get("file_size", {})
    a, k = fs.get("mtok"), fs.get("tkz")
    if a and k:
        rows.append((f"File size: {FILE_SIZE_MODEL}.mtok vs tokie's {FILE_SIZE_MODEL}.tkz", "≤ 1×",
                     f"{a / (1 << 20):.2f} MiB vs {k / (1 << 20):.2f} MiB = {judged(a / k, 1.0)}", _verdict(a <= k)))
    else:
        rows.append((f"File size: {FILE_SIZE_MODEL}.mtok vs .tkz", "≤ 1×",
                     fs.get("reason", "not measured in this run"), "—"))
    rows.append(("Exactness: every conformance test of the earlier issues passes", "all pass",
                 "not measured by the bench (`make test`); the tables here compare ids per corpus, input and sentence",
                 "—"))
    return rows


def render(results: dict) -> list[str]:
    cfg = results.get("config", {})
    lines = ["## Issue-4 targets", "",
             "Every figure in this section comes from this run"
             + (" (`--targets-only`: only the models, peers and corpora the targets name)" if cfg.get("targets_only")
                else "") + ". Ratios are tokmap ÷ peer; \"met\" / \"not met\" compare them with the target "
             "written next to them.", "",
             "| target | threshold | measured | verdict |", "| --- | --- | --- | --- |"]
    for what, thr, fig, verdict in summary_rows(results):
        lines.append(f"| {what} | {thr} | {fig} | {verdict} |")
    lines += ["", "### Encode throughput against the targets", ""]
    for t in THROUGHPUT:
        lines += _throughput_table(results, t)
    lines += _remaining_table(results)
    lines += ["### Hostile input", ""] + _hostile_table(results)
    lines += ["### Short strings", ""] + _short_table(results)
    lines += ["### Cold start, encode_batch, file size", "",
              "Cold start: the full table is in [Whole-process cold start](#whole-process-cold-start) below. "
              "encode_batch and file size: the figures in the summary above"
              + (f" (encode_batch: {results['batch'].get('source')})." if (results.get("batch") or {}).get("source")
                 else "."), ""]
    return lines
