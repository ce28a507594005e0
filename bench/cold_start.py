"""Whole-process cold start: a new Python that imports a library, loads a tokenizer and encodes one word.

    python bench/cold_start.py [--runs 20] [--groups llama3,gemma3,o200k_base] [--out BENCHMARKS.md] [--no-write]

Each command is `python -c "import LIB; LOAD(P).encode('Hello world')"`, timed over N runs with
hyperfine when it is installed (else time.perf_counter around subprocess.run), next to
`python -c pass` as the floor. Three groups: llama3 and gemma3 (tokmap .mtok, tokie .tkz, tokenizers
tokenizer.json, kitoken .kit) and o200k_base (tokmap .mtok, tiktoken from the .tiktoken file, kitoken .kit).
The converted files are made first (same places as bench/run.py: bench/out/). The table is printed and
written into BENCHMARKS.md between cold-start markers (replacing an older one). bench/run.py calls
`measure()` itself, so `make bench` has this table from the same run; this script re-measures it alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

common.pin_threads(one_cpu=False)  # the children run wherever the OS puts them

from common import MODELS_BY_NAME, OUT, REPO  # noqa: E402


def byte_compile() -> None:
    """Write tokmap's .pyc files into its __pycache__ folders, as a wheel install does. Without it, an
    environment that sets PYTHONDONTWRITEBYTECODE=1 recompiles tokmap's sources in every run, and the
    table times the compiler (the peers' Python parts have their bytecode in site-packages already)."""
    import compileall

    if not compileall.compile_dir(str(REPO / "tokmap"), quiet=1):
        raise SystemExit("compileall failed on tokmap/")


def _default_path_for(td: Path):
    """Standalone use: convert each file once per invocation (same places as bench/run.py: bench/out/)."""
    from peers import ADAPTERS
    by, made = {a.name: a for a in ADAPTERS}, {}

    def path_for(model_name: str, lib: str) -> Path:
        if (model_name, lib) not in made:
            made[(model_name, lib)] = by[lib].prepare(MODELS_BY_NAME[model_name], td)[0]
        return made[(model_name, lib)]
    return path_for


# Commands slower than this many seconds per run get SLOW_RUNS runs instead of --runs (gemma3 via tokenizers
# takes ~2.5 s a run here).
SLOW_S = 1.0
SLOW_RUNS = 5
ROUNDS = 4  # the fast commands are timed in this many interleaved turns


def build_commands(td: Path, path_for=None, groups=("llama3", "gemma3", "o200k_base")) -> list[tuple[str, str, str]]:
    """(group, label, python source) for each measured command. path_for(model, lib) gives the file a
    library loads (tokmap .mtok, tokie .tkz, kitoken .kit, or the source file for the reference)."""
    byte_compile()  # here, so that every caller times tokmap from bytecode
    from tokmap.formats.tiktoken import ENCODINGS
    path_for = path_for or _default_path_for(td)
    cmds = [("floor", "python -c pass", "pass")]
    have = {}
    for lib in ("tokie", "kitoken"):
        try:
            __import__(lib)
            have[lib] = True
        except ImportError:
            have[lib] = False
    for g in groups:
        model = MODELS_BY_NAME[g]
        src = model.source(td)
        if model.kind == "hf":
            cmds.append((g, "tokmap (.mtok)",
                         f"import tokmap; tokmap.load({str(path_for(g, 'tokmap'))!r}).encode('Hello world')"))
            if have["tokie"]:
                cmds.append((g, "tokie (.tkz)", f"import tokie; tokie.Tokenizer.from_file("
                                                f"{str(path_for(g, 'tokie'))!r}).encode('Hello world')"))
            cmds.append((g, "tokenizers (tokenizer.json)",
                         f"import tokenizers; tokenizers.Tokenizer.from_file({str(src)!r}).encode('Hello world')"))
        elif model.kind == "tiktoken":
            cmds.append((g, "tokmap (.mtok)", f"import tokmap; tokmap.load({str(path_for(g, 'tokmap'))!r})"
                                              ".encode_ordinary('Hello world')"))
            _sha, pattern, specials = ENCODINGS[model.encoding]
            cmds.append((g, "tiktoken (.tiktoken)",
                         f"import tiktoken, tiktoken.load; tiktoken.Encoding(name={model.encoding!r}, pat_str="
                         f"{pattern!r}, mergeable_ranks=tiktoken.load.load_tiktoken_bpe({str(src)!r}), "
                         f"special_tokens={specials!r}).encode_ordinary('Hello world')"))
        else:
            raise ValueError(f"cold start: no commands for {g} ({model.kind})")
        if have["kitoken"]:
            cmds.append((g, "kitoken (.kit)", f"import kitoken; kitoken.Kitoken.from_file("
                                              f"{str(path_for(g, 'kitoken'))!r}).encode('Hello world')"))
    return cmds


def _env() -> dict:
    env = dict(os.environ)
    env.update(common.SINGLE_THREAD_ENV)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def time_hyperfine(argv: list[str], runs: int) -> list[float]:
    """Per-run wall seconds, from hyperfine (no shell, 2 warm-up runs per call)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        export = f.name
    try:
        cmd = " ".join(_shell_quote(a) for a in argv)
        subprocess.run(["hyperfine", "-N", "--style", "none", "--warmup", "2", "--runs", str(runs),
                        "--export-json", export, cmd], check=True, env=_env(), capture_output=True)
        with open(export, encoding="utf-8") as f:
            return json.load(f)["results"][0]["times"]
    finally:
        os.unlink(export)


def _shell_quote(s: str) -> str:
    # hyperfine -N splits the command like a POSIX shell would.
    import shlex
    return shlex.quote(s)


def time_subprocess(argv: list[str], runs: int) -> list[float]:
    env = _env()
    for _ in range(2):  # warm-up, as with hyperfine
        subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return times


def measure(td: Path, runs: int = 20, path_for=None, groups=("llama3", "gemma3", "o200k_base"),
            use_hyperfine: bool = True, log=None) -> dict:
    """Time every command; returns {"tool", "runs", "date", "cpu", "rows": [{group, label, median_ms,
    min_ms, n}]}. A command whose first (warm-up) run takes over SLOW_S seconds gets SLOW_RUNS runs.
    The children inherit this process's CPU affinity (run.py: pinned to one CPU)."""
    cmds = build_commands(td, path_for, groups)
    use_hf = bool(shutil.which("hyperfine")) and use_hyperfine
    tool = "hyperfine" if use_hf else "time.perf_counter around subprocess.run"
    timer = time_hyperfine if use_hf else time_subprocess
    slow, times = set(), {k: [] for k in range(len(cmds))}
    for k, (_group, _label, src) in enumerate(cmds):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", src], check=True, env=_env(), stdout=subprocess.DEVNULL)  # does it run
        if time.perf_counter() - t0 > SLOW_S:
            slow.add(k)
            times[k] = timer([sys.executable, "-c", src], SLOW_RUNS)
    # The fast commands take turns, ROUNDS times runs/ROUNDS runs each: a burst of load from elsewhere
    # on the machine then lands on every library alike instead of on whichever one was running.
    per_round = max(1, -(-runs // ROUNDS))
    for _ in range(ROUNDS):
        for k, (_group, _label, src) in enumerate(cmds):
            if k not in slow:
                times[k] += timer([sys.executable, "-c", src], per_round)
    rows = []
    for k, (group, label, _src) in enumerate(cmds):
        t = times[k]
        rows.append({"group": group, "label": label, "median_ms": 1000 * statistics.median(t),
                     "min_ms": 1000 * min(t), "n": len(t)})
        if log:
            log(f"    cold start {group:11s} {label:28s} median {rows[-1]['median_ms']:8.1f} ms  "
                f"min {rows[-1]['min_ms']:8.1f} ms  (n={len(t)})")
    info = common.machine_info()
    try:
        pinned = len(os.sched_getaffinity(0)) == 1
    except AttributeError:
        pinned = False
    return {"tool": tool, "runs": runs, "date": info["date"], "cpu": info["cpu"], "pinned": pinned, "rows": rows}


def wall_ratio(cs: dict, group: str, peer_prefix: str) -> float | None:
    """tokmap's median wall time / the peer's, in one group (the issue-4 figure: <= 0.5 against tokie)."""
    rows = [r for r in cs.get("rows", []) if r["group"] == group]
    tm = next((r for r in rows if r["label"].startswith("tokmap")), None)
    peer = next((r for r in rows if r["label"].startswith(peer_prefix)), None)
    return tm["median_ms"] / peer["median_ms"] if tm and peer else None


def render(cs: dict, made_by: str = "`python bench/cold_start.py`") -> str:
    rows = cs["rows"]
    floor = next(r["median_ms"] for r in rows if r["group"] == "floor")
    pin = (" The commands ran pinned to the bench's one CPU (inherited affinity)." if cs.get("pinned") else "")
    lines = [common.COLD_BEGIN, "## Whole-process cold start", "",
             f"A fresh `python -c \"import LIB; LOAD(file).encode('Hello world')\"`, {cs['runs']} runs each with "
             f"{cs['tool']}, in {ROUNDS} interleaved turns so that load from elsewhere falls on every command alike "
             f"(fewer, n={SLOW_RUNS} in one go, for a command slower than {SLOW_S:g} s a run; warm-up runs "
             "first, so the files are in the page cache: this is process start-up, not disk; tokmap's bytecode "
             "compiled beforehand, as a wheel install does). "
             "`tokmap/peer wall` divides the median wall times (the issue-4 figure; target ≤ 0.5× against "
             "tokie); `above floor` subtracts `python -c pass`, and `tokmap/peer above floor` compares those "
             f"(below 1× = tokmap starts faster). Made by {made_by} on {cs['date']}, {cs['cpu']}.{pin}", "",
             "| model | command | runs | median ms | min ms | above floor ms | tokmap/peer wall "
             "| tokmap/peer above floor |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    tm = {r["group"]: r["median_ms"] for r in rows if r["label"].startswith("tokmap")}
    for r in rows:
        above = r["median_ms"] - floor
        ratio = wall = ""
        if r["group"] in tm and not r["label"].startswith("tokmap"):
            wall = f"{tm[r['group']] / r['median_ms']:.2f}×"
            if above > 0:
                ratio = f"{(tm[r['group']] - floor) / above:.2f}×"
        lines.append(f"| {r['group']} | {r['label']} | {r.get('n', cs['runs'])} | {r['median_ms']:.1f} | "
                     f"{r['min_ms']:.1f} | {'—' if r['group'] == 'floor' else f'{above:.1f}'} | {wall} | {ratio} |")
    lines.append(common.COLD_END)
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--groups", default="llama3,gemma3,o200k_base")
    p.add_argument("--out", default=str(REPO / "BENCHMARKS.md"))
    p.add_argument("--no-write", action="store_true", help="print the table only")
    p.add_argument("--no-hyperfine", action="store_true")
    args = p.parse_args(argv)
    td = common.testdata_dir()
    OUT.mkdir(parents=True, exist_ok=True)
    cs = measure(td, args.runs, groups=tuple(args.groups.split(",")), use_hyperfine=not args.no_hyperfine,
                 log=lambda *a: print(*a, file=sys.stderr, flush=True))
    section = render(cs)
    print(section)
    if not args.no_write:
        out = Path(args.out)
        doc = out.read_text(encoding="utf-8") if out.exists() else "# Benchmarks\n"
        out.write_text(common.replace_section(doc, section), encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
