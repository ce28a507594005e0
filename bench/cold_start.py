"""Whole-process cold start: a new Python that imports a library, loads a tokenizer and encodes one word.

    python bench/cold_start.py [--runs 20] [--out BENCHMARKS.md] [--no-write]

Each command is `python -c "import LIB; LOAD(P).encode('Hello world')"`, timed over N runs with
hyperfine when it is installed (else time.perf_counter around subprocess.run), next to
`python -c pass` as the floor. Two groups: llama3 (tokmap .mtok, tokenizers tokenizer.json, tokie .tkz,
kitoken .kit) and o200k_base (tokmap .mtok, tiktoken from the .tiktoken file, kitoken .kit).
Missing converted files are made first (same places as bench/run.py: bench/out/). The table is
printed and written into BENCHMARKS.md between cold-start markers (replacing an older one).

tokmap's bytecode is compiled first (compileall, as pip does when it installs a wheel; the peers'
Python parts have theirs in site-packages already). Without it, an environment that sets
PYTHONDONTWRITEBYTECODE=1 recompiles tokmap's sources in every run, and the table times the compiler.
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
    """Write tokmap's .pyc files into its __pycache__ folders, as a wheel install does."""
    import compileall

    if not compileall.compile_dir(str(REPO / "tokmap"), quiet=1):
        raise SystemExit("compileall failed on tokmap/")


def _ensure(path: Path, make) -> Path:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        make()
    return path


def build_commands(td: Path) -> list[tuple[str, str, str]]:
    """(group, label, python source) for each measured command."""
    byte_compile()  # here, so that every caller times tokmap from bytecode
    import tokmap
    from tokmap.formats.tiktoken import ENCODINGS
    llama = MODELS_BY_NAME["llama3"].source(td)
    o200k = MODELS_BY_NAME["o200k_base"].source(td)
    l_mtok = _ensure(OUT / "llama3.mtok", lambda: tokmap.export(llama, OUT / "llama3.mtok"))
    o_mtok = _ensure(OUT / "o200k_base.mtok",
                     lambda: tokmap.export(o200k, OUT / "o200k_base.mtok", encoding="o200k_base"))
    cmds = [("floor", "python -c pass", "pass"),
            ("llama3", "tokmap (.mtok)", f"import tokmap; tokmap.load({str(l_mtok)!r}).encode('Hello world')"),
            ("llama3", "tokenizers (tokenizer.json)",
             f"import tokenizers; tokenizers.Tokenizer.from_file({str(llama)!r}).encode('Hello world')")]
    try:
        import tokie
        l_tkz = _ensure(OUT / "llama3.tkz", lambda: tokie.Tokenizer.from_json(str(llama)).save(str(OUT / "llama3.tkz")))
        cmds.append(("llama3", "tokie (.tkz)",
                     f"import tokie; tokie.Tokenizer.from_file({str(l_tkz)!r}).encode('Hello world')"))
    except ImportError:
        pass
    try:
        import kitoken
        l_kit = _ensure(OUT / "llama3.kit",
                        lambda: kitoken.Kitoken.from_tokenizers_file(str(llama)).to_file(str(OUT / "llama3.kit")))
        o_kit = _ensure(OUT / "o200k_base.kit",
                        lambda: kitoken.Kitoken.from_tiktoken_file(str(o200k)).to_file(str(OUT / "o200k_base.kit")))
        cmds.append(("llama3", "kitoken (.kit)",
                     f"import kitoken; kitoken.Kitoken.from_file({str(l_kit)!r}).encode('Hello world')"))
    except ImportError:
        o_kit = None
    cmds.append(("o200k_base", "tokmap (.mtok)",
                 f"import tokmap; tokmap.load({str(o_mtok)!r}).encode_ordinary('Hello world')"))
    _sha, pattern, specials = ENCODINGS["o200k_base"]
    cmds.append(("o200k_base", "tiktoken (.tiktoken)",
                 "import tiktoken, tiktoken.load; tiktoken.Encoding(name='o200k_base', pat_str="
                 f"{pattern!r}, mergeable_ranks=tiktoken.load.load_tiktoken_bpe({str(o200k)!r}), "
                 f"special_tokens={specials!r}).encode_ordinary('Hello world')"))
    if o_kit:
        cmds.append(("o200k_base", "kitoken (.kit)",
                     f"import kitoken; kitoken.Kitoken.from_file({str(o_kit)!r}).encode('Hello world')"))
    return cmds


def _env() -> dict:
    env = dict(os.environ)
    env.update(common.SINGLE_THREAD_ENV)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def time_hyperfine(argv: list[str], runs: int) -> list[float]:
    """Per-run wall seconds, from hyperfine (no shell, 2 warm-up runs)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        export = f.name
    try:
        cmd = " ".join(_shell_quote(a) for a in argv)
        subprocess.run(["hyperfine", "-N", "--style", "none", "--warmup", "2", "--runs", str(runs),
                        "--export-json", export, cmd], check=True, env=_env(), stdout=subprocess.DEVNULL)
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


def render(rows: list[dict], runs: int, tool: str, machine: dict) -> str:
    floor = next(r["median_ms"] for r in rows if r["group"] == "floor")
    lines = [common.COLD_BEGIN, "## Whole-process cold start", "",
             f"A fresh `python -c \"import LIB; LOAD(file).encode('Hello world')\"`, {runs} runs each with {tool} "
             "(2 warm-up runs first, so the files are in the page cache: this is process start-up, not disk; "
             "tokmap's bytecode compiled beforehand, as a wheel install does). "
             "`above floor` subtracts `python -c pass`; `tokmap/peer` compares those above-floor times "
             "(below 1× = tokmap starts faster). Made by `python bench/cold_start.py` "
             f"on {machine['date']}, {machine['cpu']}.", "",
             "| model | command | median ms | min ms | above floor ms | tokmap/peer |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    tm = {r["group"]: r["median_ms"] - floor for r in rows if r["label"].startswith("tokmap")}
    for r in rows:
        above = r["median_ms"] - floor
        ratio = ""
        if r["group"] in tm and not r["label"].startswith("tokmap") and above > 0:
            ratio = f"{tm[r['group']] / above:.2f}×"
        lines.append(f"| {r['group']} | {r['label']} | {r['median_ms']:.1f} | {r['min_ms']:.1f} | "
                     f"{'—' if r['group'] == 'floor' else f'{above:.1f}'} | {ratio} |")
    lines.append(common.COLD_END)
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--out", default=str(REPO / "BENCHMARKS.md"))
    p.add_argument("--no-write", action="store_true", help="print the table only")
    p.add_argument("--no-hyperfine", action="store_true")
    args = p.parse_args(argv)
    td = common.testdata_dir()
    OUT.mkdir(parents=True, exist_ok=True)
    cmds = build_commands(td)
    use_hf = shutil.which("hyperfine") and not args.no_hyperfine
    tool = "hyperfine" if use_hf else "time.perf_counter around subprocess.run"
    rows = []
    for group, label, src in cmds:
        argv = [sys.executable, "-c", src]
        times = (time_hyperfine if use_hf else time_subprocess)(argv, args.runs)
        rows.append({"group": group, "label": label, "median_ms": 1000 * statistics.median(times),
                     "min_ms": 1000 * min(times)})
        print(f"{group:11s} {label:30s} median {rows[-1]['median_ms']:8.1f} ms  min {rows[-1]['min_ms']:8.1f} ms",
              file=sys.stderr, flush=True)
    section = render(rows, args.runs, tool, common.machine_info())
    print(section)
    if not args.no_write:
        out = Path(args.out)
        doc = out.read_text(encoding="utf-8") if out.exists() else "# Benchmarks\n"
        out.write_text(common.replace_section(doc, section), encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
