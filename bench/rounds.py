"""Two rounds of one model's bench children as one result (bench/run.py, --rounds): each figure the
library's best of the rounds. No side effects on import (run.py pins the CPU when imported), so
tests can exercise it."""

from __future__ import annotations

import short

MiB = 1 << 20


def best_of_rounds(res: dict, more: dict) -> dict:
    """One model's result from two rounds of the same libraries: each library's best figures.
    Loads: the lower median. Encodes: the fastest cold and warm call of either round, ids equal
    and stable only when they are in both. A row that is not "ok" in either round (an error, a
    skip) stays as the first such row: a failure shows, whatever the other round did. Short
    strings: each sentence's lower time, the summary figures taken again from those."""
    libs = {lib["lib"]: lib for lib in more["libs"]}
    for lib in res["libs"]:
        other = libs.get(lib["lib"])
        if other is None or lib.get("status") != "ok" or other.get("status") != "ok":
            continue
        lib["load_n"] += other["load_n"]
        lib["load_all_ms"] = lib["load_all_ms"] + other["load_all_ms"]
        lib["load_ms"] = min(lib["load_ms"], other["load_ms"])
        lib["first_ms"] = min(lib["first_ms"], other["first_ms"])
    by_corpus = {e["corpus"]: e for e in more["corpora"]}
    for e in res["corpora"]:
        rows = {row["lib"]: row for row in by_corpus[e["corpus"]]["rows"]}
        for k, row in enumerate(e["rows"]):
            other = rows.get(row["lib"])
            if other is None:
                continue
            if row.get("status") != "ok" or other.get("status") != "ok":
                e["rows"][k] = row if row.get("status") != "ok" else other
                continue
            for key in ("cold", "warm"):
                row[f"{key}_s"] = min(row[f"{key}_s"], other[f"{key}_s"])
                row[f"{key}_mibs"] = e["bytes"] / MiB / row[f"{key}_s"]
            row["cold_runs"] += other["cold_runs"]
            row["stable"] = row["stable"] and other["stable"] and row["n_ids"] == other["n_ids"]
            if "ids_equal" in row and not (row["ids_equal"] and other.get("ids_equal", False)):
                row["ids_equal"] = False
                row.setdefault("diff", other.get("diff"))
    for lib, r in (res.get("short") or {}).items():
        o = (more.get("short") or {}).get(lib)
        if "per_us" not in r or o is None or "per_us" not in o:
            if o is not None and "error" in o:
                res["short"][lib] = o
            continue
        res["short"][lib] = short.combine(r, o)
    return res
