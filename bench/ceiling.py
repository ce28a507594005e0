"""What N cores give this machine for work that shares nothing: the ceiling of encode_batch's ratio.

    python bench/ceiling.py [--model llama3] [--workers 2] [--rounds 3]

encode_batch's ratio (bench/parallel.py) compares N worker processes with one process. Whatever the
pool does, it cannot beat N processes that share nothing at all: here N independent interpreters each
load the tokenizer and encode the same fresh slices in-process (`tok.encode_batch(slice)`, no pool,
no pipes, no caller), all started at once, against one such process alone. The ratio is N times the
lone process's seconds over the slowest of the N's: 2.0 on two free, equal cores. On a VM whose two
vCPUs are hyperthreads of one core, or run at different speeds, it is lower, and so is every pool's.
It bounds a pool in expectation, not run by run: three rounds on a noisy VM move as much as the pool's
own figure (the 03:02 UTC bench of 2026-11-27: pool 1.81x, this 1.76x, its rounds 1.93 / 1.76 / 1.72).

Each process: load, one untimed slice (as parallel.measure's warm-up), then "ready" on stdout; on a
line from stdin it encodes the run slices one after another and prints its seconds. Rounds alternate
one process and N, so load from elsewhere falls on both alike; the figure is the median over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CHILD_TIMEOUT_S = 300


def child_main(mtok: str, slices_file: str) -> None:
    sys.path.insert(0, str(REPO))
    import tokmap

    slices = pickle.loads(Path(slices_file).read_bytes())
    tok = tokmap.load(mtok)
    tok.encode_batch(slices[0])
    print("ready", flush=True)
    sys.stdin.readline()
    t0 = time.perf_counter()
    for batch in slices[1:]:
        tok.encode_batch(batch)
    print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": _last_cpu()}), flush=True)


def _last_cpu() -> int | None:
    """The CPU this process last ran on (field 39 of /proc/self/stat), None off Linux."""
    try:
        return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def _run_together(mtok: str, slices_file: str, n: int) -> list[dict]:
    """Start n children, wait until each is ready, start them all at once; their reports."""
    procs = [subprocess.Popen([sys.executable, str(HERE / "ceiling.py"), "--child", mtok, slices_file],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(n)]
    try:
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a ceiling child exited with {p.wait(CHILD_TIMEOUT_S)} before it was ready")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        out = []
        for p in procs:
            line = p.stdout.readline()
            p.wait(CHILD_TIMEOUT_S)
            out.append(json.loads(line))
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def measure(mtok_path, texts, workers: int = 2, repeat: int = 5, rounds: int = 3) -> dict:
    """The ceiling ratio for `workers` processes, texts dealt into repeat + 1 slices as
    parallel.measure deals them (slice 0 untimed)."""
    import parallel  # (bench/: batch.py and main() put it on sys.path)

    slices = parallel.fresh_slices(list(texts), repeat)
    with tempfile.NamedTemporaryFile(suffix=".pickle", delete=False) as f:
        f.write(pickle.dumps(slices, 5))
    try:
        ratios, alone_s, together_s, cpus = [], [], [], []
        for _ in range(rounds):
            a = _run_together(str(mtok_path), f.name, 1)[0]
            t = _run_together(str(mtok_path), f.name, workers)
            slowest = max(r["seconds"] for r in t)
            ratios.append(workers * a["seconds"] / slowest)
            alone_s.append(a["seconds"])
            together_s.append([r["seconds"] for r in t])
            cpus.append([a["cpu"], [r["cpu"] for r in t]])
    finally:
        os.unlink(f.name)
    return {"workers": workers, "rounds": rounds, "ratio": statistics.median(ratios), "ratio_rounds": ratios,
            "alone_s": alone_s, "together_s": together_s, "last_cpus": cpus}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", nargs=2, metavar=("MTOK", "SLICES"), help=argparse.SUPPRESS)
    ap.add_argument("--model", default="llama3", help="a .mtok in bench/out, or a path to one")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    if a.child:
        child_main(*a.child)
        return 0
    sys.path.insert(0, str(HERE))
    import common
    import parallel

    common.pin_threads(one_cpu=False)
    path = Path(a.model) if a.model.endswith(".mtok") else HERE / "out" / f"{a.model}.mtok"
    texts = parallel.documents(common.testdata_dir(), "lines")
    print(json.dumps(measure(path, texts, a.workers, a.repeat, a.rounds), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
