"""Hostile input: five seeded inputs of 10^5 and 10^6 characters with no (or only trivial) split points.

    python bench/hostile.py [--models llama3,cl100k_base] [--cap 20] [--timeout 90]   # standalone, prints JSON

Cases: 'a' * n, n random ASCII letters (no spaces), n random CJK ideographs (U+4E00..U+9FFF), n spaces,
n random digits. The random ones come from `random.Random(SEED)`; the 10^5 input is the first 10^5
characters of the 10^6 one. Each (model, library) pair runs in its own worker process
(`python bench/hostile.py --worker`), fed one request per line on stdin, so a call that runs away can be
killed: the parent waits at most `timeout` seconds for any request. Every timed call uses a freshly loaded
tokenizer (after one encode('Hello world') so the pipeline is built) — piece caches start empty, as a
repeated input would otherwise hit them. The worker inherits the parent's CPU pin and single-thread
environment.

Rules that keep the run bounded: 10^6 is skipped for a library whose 10^5 call took more than `cap`
seconds; a call still running after `timeout` seconds is killed and reported as "> timeout s"; the worker
is restarted for the next case. Every call is repeated, best of 3, while the repeats fit in
REPEAT_BUDGET_S (so both sizes of a case are measured alike, and noise does not inflate only the
long one).
Ids are compared by a SHA-1 of the id sequence against the reference library's.
"""

from __future__ import annotations

import hashlib
import json
import random
import select
import subprocess
import sys
import time
from array import array
from pathlib import Path

SEED = 20261122
SIZES = (100_000, 1_000_000)
CASES = ["a", "letters", "cjk", "spaces", "digits"]
CASE_LABEL = {"a": "'a' × n", "letters": "random letters, no spaces", "cjk": "random CJK ideographs",
              "spaces": "spaces", "digits": "random digits"}
# (model, peer) pairs measured by default: the peer is the reference library of that file.
DEFAULT_PAIRS = [("llama3", "tokenizers"), ("cl100k_base", "tiktoken"), ("o200k_base", "tiktoken")]
REPEAT_BUDGET_S = 12.0  # seconds: a call is repeated (best of 3) while the repeats fit in this


def make_input(case: str, n: int) -> str:
    """The first n characters of the case's 10^6-character input (same seed, same text every run)."""
    big = max(n, SIZES[-1])
    rnd = random.Random(f"{SEED}-{case}")
    if case == "a":
        s = "a" * big
    elif case == "spaces":
        s = " " * big
    elif case == "letters":
        s = "".join(rnd.choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", k=big))
    elif case == "digits":
        s = "".join(rnd.choices("0123456789", k=big))
    elif case == "cjk":
        s = "".join(map(chr, (rnd.randrange(0x4E00, 0xA000) for _ in range(big))))
    else:
        raise ValueError(case)
    return s[:n]


def ids_digest(ids) -> str:
    return hashlib.sha1(array("I", ids).tobytes()).hexdigest()


# -- worker side -----------------------------------------------------------------------------------

def worker_main() -> int:
    """Read {"lib", "model", "path"} then {"case", "n"} requests; answer one JSON line per request."""
    import common
    common.pin_threads(one_cpu=False)  # keep the parent's pin; set the single-thread variables
    from common import MODELS_BY_NAME
    from peers import ADAPTERS
    head = json.loads(sys.stdin.readline())
    adapter = next(a for a in ADAPTERS if a.name == head["lib"])
    model = MODELS_BY_NAME[head["model"]]
    path = Path(head["path"])
    texts: dict[tuple[str, int], str] = {}
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if "file" in req:  # a trial call on (a prefix of) a corpus file: see run.py's peer cap
            text = Path(req["file"]).read_text(encoding="utf-8")[:req["chars"]]
        else:
            key = (req["case"], req["n"])
            if key not in texts:
                texts[key] = make_input(*key)
            text = texts[key]
        times, ids = [], None
        try:
            for _ in range(req.get("repeats", 3)):
                obj = adapter.load(path, model)
                adapter.encode(obj, model, "Hello world")
                t0 = time.perf_counter()
                ids = adapter.encode(obj, model, text)
                times.append(time.perf_counter() - t0)
                del obj
                if sum(times) + times[-1] > REPEAT_BUDGET_S:
                    break
            out = {"seconds": min(times), "runs": len(times), "n_ids": len(ids), "sha1": ids_digest(ids)}
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # pyo3 panics are BaseExceptions
            out = {"error": f"{type(e).__name__}: {e}"[:200]}
        print(json.dumps(out), flush=True)
    return 0


# -- parent side -----------------------------------------------------------------------------------

class Worker:
    """One worker process for one (library, model, file); `ask` returns None on timeout (worker killed)."""

    def __init__(self, lib: str, model: str, path: Path, timeout: float):
        self.head = {"lib": lib, "model": model, "path": str(path)}
        self.timeout = timeout
        self.proc = None

    def _start(self):
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.proc.stdin.write(json.dumps(self.head) + "\n")
        self.proc.stdin.flush()
        ready = self._read(max(self.timeout, 120))
        if not ready or not ready.get("ready"):
            self.close()
            raise RuntimeError(f"hostile worker for {self.head['lib']} did not start")

    def _read(self, timeout: float):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def ask(self, case: str, n: int) -> dict | None:
        return self.request({"case": case, "n": n}, self.timeout + 30)

    def request(self, req: dict, timeout: float) -> dict | None:
        """Send one request; None (and the worker killed) when no answer comes within `timeout` s."""
        if self.proc is None:
            self._start()
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        out = self._read(timeout)
        if out is None:
            self.close()
        return out

    def close(self):
        if self.proc is not None:
            try:
                self.proc.kill()  # the worker we started, by its handle
            except OSError:
                pass
            self.proc.wait()
            self.proc = None


def run(pairs: list[tuple[str, list[tuple[str, Path]]]], cap: float, timeout: float, log=print,
        sizes: tuple[int, int] = SIZES) -> dict:
    """pairs: [(model name, [(lib, path), ...])] with tokmap first and the reference second.
    Returns {"config": ..., "models": [{"name", "libs", "cases": [{case, sizes: {lib: {n: result}}}]}]}."""
    out = {"config": {"seed": SEED, "sizes": list(sizes), "cap_s": cap, "timeout_s": timeout},
           "models": []}
    for model, libs in pairs:
        entry = {"name": model, "libs": [lib for lib, _ in libs], "cases": []}
        out["models"].append(entry)
        workers = {lib: Worker(lib, model, path, timeout) for lib, path in libs}
        try:
            for case in CASES:
                c = {"case": case, "results": {}}
                entry["cases"].append(c)
                for lib, _path in libs:
                    res = {}
                    c["results"][lib] = res
                    for n in sizes:
                        prev = res.get(str(sizes[0]))
                        if n != sizes[0] and prev is not None:
                            if "seconds" not in prev:
                                res[str(n)] = {"skipped": f"the {sizes[0]:,} call did not finish"}
                                continue
                            if prev["seconds"] > cap:
                                res[str(n)] = {"skipped": f"the {sizes[0]:,} call took {prev['seconds']:.1f} s "
                                                          f"> {cap:.0f} s"}
                                continue
                        try:
                            r = workers[lib].ask(case, n)
                        except RuntimeError as e:
                            r = {"error": str(e)}
                        res[str(n)] = r if r is not None else {"timeout": timeout}
                        shown = (f"{r['seconds']:.3f} s" if r and "seconds" in r else
                                 f"killed after {timeout:.0f} s" if r is None else r.get("error"))
                        log(f"    hostile {model:12s} {lib:11s} {case:8s} n={n:>9,}: {shown}")
        finally:
            for w in workers.values():
                w.close()
    return out


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--models", default=",".join(m for m, _ in DEFAULT_PAIRS))
    p.add_argument("--cap", type=float, default=20.0)
    p.add_argument("--timeout", type=float, default=90.0)
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="two lengths, small first")
    args = p.parse_args(argv)
    if args.worker:
        return worker_main()
    import common
    common.pin_threads()
    from common import MODELS_BY_NAME
    from peers import ADAPTERS
    td = common.testdata_dir()
    by = {a.name: a for a in ADAPTERS}
    ref = dict(DEFAULT_PAIRS)
    pairs = []
    for name in args.models.split(","):
        model = MODELS_BY_NAME[name]
        libs = []
        for lib in ("tokmap", ref.get(name, "tokenizers")):
            path, _ = by[lib].prepare(model, td)
            libs.append((lib, path))
        pairs.append((name, libs))
    sizes = tuple(int(x) for x in args.sizes.split(","))
    print(json.dumps(run(pairs, args.cap, args.timeout, log=lambda *a: print(*a, file=sys.stderr), sizes=sizes),
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
