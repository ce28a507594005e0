"""encode_batch over worker processes: the same ids in the same order as the in-process loop, the
same kwargs and errors, and a pool that is reused, closed, and survives neither a dead worker nor
a fork of its owner unnoticed.

The size thresholds are lowered here so that a few hundred KB of real text is cut into many
chunks; what is sent and how it comes back does not depend on them.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading

import pytest

import tokmap
from tokmap.runtime import parallel

from conftest import export_variant, model_source


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(parallel, "PARALLEL_MIN_CHARS", 1000)
    monkeypatch.setattr(parallel, "_MIN_CHUNK_BYTES", 2000)


@pytest.fixture(scope="module")
def docs(corpus):
    """~300 documents from 0 characters to ~100K, shuffled so large and small ones interleave."""
    import random

    out = ["", "a", " ", "\n\n"]
    for c, step in (("en", 7), ("code", 40), ("wagahai", 3), ("multi", 25)):
        lines = [ln for ln in corpus(c).split("\n") if ln][:1000]
        out += ["\n".join(lines[i:i + step]) for i in range(0, len(lines), step)]
    out.append(corpus("en")[:100_000])
    random.Random(4).shuffle(out)
    return out


def _workers(tok):
    return [w.proc for w in tok._pool.workers]


@pytest.mark.parametrize("name", ["llama3", "cl100k_base"])
def test_same_ids_in_order(name, exported, docs):
    with tokmap.load(exported(name)) as tok:
        expected = [tok.encode(t) for t in docs]
        assert sum(map(len, parallel.plan_chunks(docs, 2))) > 10
        assert tok.encode_batch(docs, num_workers=2) == expected
        assert len(_workers(tok)) == 2
        # three workers, reversed order: still the input's order
        assert tok.encode_batch(docs[::-1], num_workers=3) == expected[::-1]


def test_jobs_through_a_small_pipe(exported, docs, monkeypatch):
    """With the job pipe at one page, jobs go in many partial writes, several queued per worker: every
    document still comes back once, in order (the outbox, the write-readiness wait, and the caller
    never blocking on a worker that is writing its result)."""
    monkeypatch.setattr(parallel, "_PIPE_BYTES", 4096)
    partial, most_queued = [], [0]
    flush, emit = parallel._Worker.flush, parallel.WorkerPool._emit

    def spy_flush(w):
        done = flush(w)
        partial.append(not done)
        return done

    def spy_emit(self, w, *args):
        emit(self, w, *args)
        most_queued[0] = max(most_queued[0], len(w.jobs))

    monkeypatch.setattr(parallel._Worker, "flush", spy_flush)
    monkeypatch.setattr(parallel.WorkerPool, "_emit", spy_emit)
    with tokmap.load(exported("llama3")) as tok:
        joined = " ".join(docs)
        big = docs + [joined[k * 100_000:(k + 3) * 100_000] for k in range(6)]  # jobs far larger than the pipe
        assert tok.encode_batch(big, num_workers=2) == [tok.encode(t) for t in big]
    assert any(partial) and 3 <= most_queued[0] <= parallel.IN_FLIGHT


def test_worker_groups_the_jobs_waiting():
    """A worker encodes the jobs waiting in its pipe as one group, all but the last (left queued
    while it works), only jobs of equal arguments, and finishes what is queued after EOF."""
    import pickle
    from collections import deque

    r, w = os.pipe()
    try:
        def job(k, args, texts):
            parallel._send(w, parallel._JOB, k, len(texts), pickle.dumps(args, 5), pickle.dumps(texts, 5))

        plain, other = (True, {"allowed_special": None}), (False, {"allowed_special": None})
        for k in range(5):
            job(k, plain if k < 2 else other, [f"doc {k}", "x"])
        queue = deque()
        group = parallel._next_jobs(queue, r)
        assert [g[0] for g in group] == [0, 1] and group[1][2:] == (plain, ["doc 1", "x"])
        assert [g[0] for g in parallel._next_jobs(queue, r)] == [2, 3]  # (4 left queued)
        os.close(w)
        w = None
        assert [g[0] for g in parallel._next_jobs(queue, r)] == [4]  # the last, at EOF
        assert parallel._next_jobs(queue, r) is None
    finally:
        os.close(r)
        if w is not None:
            os.close(w)


def test_worker_reads_a_burst_whole():
    """A burst's frames carry _MORE: the worker waits for the rest of it before it groups (here the
    caller's second write comes 0.2 s after the first), and keeps the last job back; a burst whose
    last job is _LAST (the caller has nothing more) is grouped whole."""
    import pickle
    import threading
    import time
    from collections import deque

    r, w = os.pipe()
    args = pickle.dumps((True, {}), 5)

    def job(k, flag):
        parallel._send(w, parallel._JOB | flag, k, 1, args, pickle.dumps([f"doc {k}"], 5))

    def later():
        time.sleep(0.2)
        job(2, 0)

    try:
        job(0, parallel._MORE)
        job(1, parallel._MORE)
        t = threading.Thread(target=later)
        t.start()
        queue = deque()
        assert [g[0] for g in parallel._next_jobs(queue, r)] == [0, 1]  # (2 kept back)
        t.join()
        job(3, parallel._MORE)
        job(4, parallel._LAST)
        assert [g[0] for g in parallel._next_jobs(queue, r)] == [2, 3, 4]
    finally:
        os.close(r)
        os.close(w)


def test_first_bursts_take_no_other_share():
    """A worker's bursts hold its own share's chunks; it takes another share's only when it is about
    to run dry (one job left), one at a time. And the first bursts of all workers are taken
    before any is written, so each knows whether the scheduler is left empty (_LAST)."""
    from collections import deque
    from types import SimpleNamespace

    texts = ["x" * 100_000] * 2 + ["y" * 2_500] * 80  # share 0: 2 chunks; share 1: more than IN_FLIGHT
    queues = parallel.plan_chunks(texts, 2)
    assert len(queues[0]) < parallel.IN_FLIGHT < len(queues[1])
    sched = parallel._Scheduler(queues, parallel.weights(texts))
    index = {c: k for k, c in enumerate(sorted(c for q in queues for c in q))}
    w0, w1 = SimpleNamespace(index=0, jobs=deque()), SimpleNamespace(index=1, jobs=deque())
    take = parallel.WorkerPool._take
    assert [c for _, c in take(None, w0, sched, index, {})] == queues[0]
    assert [c for _, c in take(None, w1, sched, index, {})] == queues[1][:parallel.IN_FLIGHT]
    left = queues[1][parallel.IN_FLIGHT:]
    assert left and not sched.empty()
    w0.jobs = deque([0, 1])
    assert take(None, w0, sched, index, {}) == []  # two jobs out: not dry yet
    w0.jobs = deque([1])
    assert [c for _, c in take(None, w0, sched, index, {})] == [left[-1]]  # one, the smallest


def test_first_bursts_know_they_are_last(exported, docs, monkeypatch):
    """When the first bursts hand out every chunk, each of them ends in _LAST, the first worker's
    too (its burst is written after the second's is taken)."""
    seen = []
    emit = parallel.WorkerPool._emit

    def spy_emit(self, w, burst, last, *args):
        seen.append((w.index, len(burst), last))
        emit(self, w, burst, last, *args)

    monkeypatch.setattr(parallel.WorkerPool, "_emit", spy_emit)
    batch = docs[:120]
    with tokmap.load(exported("llama3")) as tok:
        tok.encode_batch(batch[:8], num_workers=2)  # (starts the pool: both workers ready below)
        seen.clear()
        queues = parallel.plan_chunks(batch, 2)
        assert all(len(q) <= parallel.IN_FLIGHT for q in queues)
        assert tok.encode_batch(batch, num_workers=2) == [tok.encode(t) for t in batch]
    assert [(i, last) for i, _, last in seen[:2]] == [(0, True), (1, True)], seen


def test_worker_answers_with_the_collector_paused(monkeypatch):
    """A worker's group is encoded and answered with the cyclic collector off; it is back on after,
    and the collection put off runs at once only when no job waits (otherwise it comes with the
    next group's first allocations, as it would have)."""
    import gc
    from collections import deque

    states, collected = [], []
    monkeypatch.setattr(parallel, "_answer", lambda *a: states.append(gc.isenabled()))
    monkeypatch.setattr(gc, "collect", lambda gen=2: collected.append(gen))
    r, w = os.pipe()
    try:
        assert gc.isenabled()
        parallel._answer_paused(None, None, 0, [], deque(), r)
        assert states == [False] and gc.isenabled() and collected == [0]
        os.write(w, b"x")  # a job waiting in the pipe: no collection now
        parallel._answer_paused(None, None, 0, [], deque(), r)
        assert states == [False, False] and gc.isenabled() and collected == [0]
        os.read(r, 1)
        parallel._answer_paused(None, None, 0, [], deque([object()]), r)  # one queued: none either
        assert collected == [0]
        gc.disable()  # a caller that runs with the collector off keeps it off
        try:
            parallel._answer_paused(None, None, 0, [], deque(), r)
            assert not gc.isenabled() and collected == [0]
        finally:
            gc.enable()
    finally:
        os.close(r)
        os.close(w)


def test_unpack_shares_int_objects():
    """A result frame's ids come back as lists of the pool's shared int objects; an id beyond the
    table (not from a valid file) is still returned, as a new int."""
    from array import array

    from tokmap.runtime.idlist import IdLists

    lists = IdLists(1000, eager=True)
    docs = [[5, 999, 5], [], [0, 7000]]
    lens, ids = array("I", map(len, docs)), array("I", [i for d in docs for i in d])
    frame = parallel._frame(parallel._OK, 0, len(docs), lens, ids)
    payload = bytearray(b"".join(frame))[parallel._FRAME.size:]
    assert parallel._unpack(payload, len(docs), lists) == docs  # 7000 is beyond the table
    docs[2][1] = 7
    ids[-1] = 7
    payload = bytearray(b"".join(parallel._frame(parallel._OK, 0, len(docs), lens, ids)))[parallel._FRAME.size:]
    got = parallel._unpack(payload, len(docs), lists)
    assert got == docs and got[0][1] is lists._objs[999] and got[2][1] is lists._objs[7]
    assert parallel._unpack(bytearray(), 0, lists) == []


def test_plan_weighs_utf8_bytes():
    """Shares are balanced by UTF-8 length: 3-byte CJK documents weigh three times ASCII ones."""
    texts = ["a" * 30_000] * 6 + ["\u65e5" * 10_000] * 6  # equal characters, CJK 3x the bytes
    queues = parallel.plan_chunks(texts, 2)
    w = parallel.weights(texts)
    shares = [sum(w[k] for a, b in q for k in range(a, b)) for q in queues]
    assert max(shares) - min(shares) <= 30_000, shares
    assert parallel.weights(["h\u00e9", "\ud800x"]) == [3, 4]  # surrogates counted as encodable


def test_plan_puts_each_share_boundary_within_half_a_document():
    """A document goes to the share its middle falls in: each share starts within half a document
    of k * total / workers (a share closed at the document reaching its part took that whole
    document, ~9% of a share on bench/parallel.py's slices)."""
    import random

    r = random.Random(11)
    for _ in range(500):
        texts = ["x" * r.choice([0, 1, 5_000, 40_000, 75_000, 120_000]) for _ in range(r.randrange(1, 40))]
        workers = r.choice([2, 3, 4])
        w = parallel.weights(texts)
        total, queues = sum(w), parallel.plan_chunks(texts, workers)
        starts = [min((a for a, _ in q), default=None) for q in queues]
        for k in range(1, workers):
            if starts[k] is None:  # an empty share: one document holds several boundaries
                continue
            before = sum(w[:starts[k]])
            assert abs(before - k * total / workers) <= max(w) / 2, (w, workers, queues)
    # the case that was off: the document that reaches the middle mostly lies past it
    w = [100_000, 30_000, 100_000, 100_000]  # the middle: 165K; the third document spans 130K-230K
    queues = parallel.plan_chunks(["x" * n for n in w], 2)
    assert sorted(queues[1])[0][0] == 2  # shares of 130K and 200K (closing at it: 230K and 100K)


def test_texts_travel_as_utf8_once_encoded():
    """A non-ASCII document goes to a worker as the UTF-8 bytes its weight was taken from, an ASCII
    one as it is; the worker gets the very strings back (lone surrogates too)."""
    import pickle

    texts = ["plain", "h\u00e9", "\u65e5\u672c", "\ud800x", "", "\U0001f600"]
    wire = parallel.wire_texts(texts)
    assert [type(t) for t in wire] == [str, bytes, bytes, bytes, str, bytes]
    assert parallel.weights(texts) == [5, 3, 6, 4, 0, 4]
    payload = pickle.dumps((True, {}), 5) + pickle.dumps(wire, 5)
    assert parallel._load_two(payload) == ((True, {}), texts)


def test_kwargs_pass_through_hf(exported, docs):
    with tokmap.load(exported("llama3")) as tok:
        assert tok.encode_batch(docs, add_special_tokens=False, num_workers=2) == \
            [tok.encode(t, add_special_tokens=False) for t in docs]
        arrays = tok.encode_batch(docs, num_workers=2, as_array=True)
        assert [a.dtype.name for a in arrays[:3]] == ["uint32"] * 3
        assert [a.tolist() for a in arrays] == [tok.encode(t) for t in docs]
        arrays[0][:1] = 7  # writable, as the in-process arrays are
        with pytest.raises(tokmap.ArgumentError) as par:
            tok.encode_batch(docs, allowed_special="all", num_workers=2)
        with pytest.raises(tokmap.ArgumentError) as seq:
            tok.encode_batch(docs, allowed_special="all")
        assert str(par.value) == str(seq.value)


def test_kwargs_pass_through_tiktoken(exported, docs):
    docs = [d + " <|endoftext|> x<|fim_prefix|>" if i % 5 == 0 else d for i, d in enumerate(docs)]
    with tokmap.load(exported("cl100k_base")) as tok:
        for kw in ({"allowed_special": "all"}, {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()},
                   {"disallowed_special": ()}):
            assert tok.encode_batch(docs, num_workers=2, **kw) == [tok.encode(t, **kw) for t in docs], kw


def test_worker_error_is_the_sequential_one(exported, docs):
    """The first failing document in input order raises, with the same type and message."""
    docs = list(docs)
    docs[len(docs) // 2] += " <|fim_suffix|>"
    docs[-1] += " <|endoftext|>"  # fails too, in a later chunk: must not win
    with tokmap.load(exported("cl100k_base")) as tok:
        with pytest.raises(tokmap.EncodeError) as seq:
            tok.encode_batch(docs)
        with pytest.raises(tokmap.EncodeError) as par:
            tok.encode_batch(docs, num_workers=2)
        assert str(par.value) == str(seq.value) and "<|fim_suffix|>" in str(par.value)
        pool = tok._pool
        assert pool.usable  # an encode error is the document's fault, not the pool's
        assert tok.encode_batch(docs[:10] * 20, allowed_special="all", num_workers=2) == \
            [tok.encode(t, allowed_special="all") for t in docs[:10] * 20]
        assert tok._pool is pool


def test_exception_rebuilt_without_init():
    """FormatError's __init__ takes other arguments than its args: it must still come back whole."""
    e = tokmap.FormatError("/x.mtok", "bad", section="meta", offset=64)
    back = parallel._rebuild(parallel._pack_error(e, "raised in a worker"))
    assert type(back) is tokmap.FormatError and str(back) == str(e)
    assert (back.path, back.section, back.offset) == ("/x.mtok", "meta", 64)


def test_batch_padding_matches_tokenizers(testdata, tmp_path, docs):
    """tokenizer.json padding applies batch-wide: to the longest document of the whole batch."""
    doc = json.loads(model_source(testdata, "minilm").read_text(encoding="utf-8"))
    doc["truncation"] = None
    doc["padding"]["strategy"] = "BatchLongest"
    ref, tok = export_variant(doc, tmp_path, "minilm-longest")
    texts = docs[:120]
    expected = [e.ids for e in ref.encode_batch(texts)]
    with tok:
        assert tok.encode_batch(texts, num_workers=2) == expected
        assert tok.encode_batch(texts) == expected
        assert [a.tolist() for a in tok.encode_batch(texts, num_workers=2, as_array=True)] == expected


def test_pool_reused_resized_and_closed(exported, docs):
    tok = tokmap.load(exported("llama3"))
    tok.encode_batch(docs, num_workers=2)
    pool, procs = tok._pool, _workers(tok)
    tok.encode_batch(docs, num_workers=2)
    assert tok._pool is pool and [p.pid for p in _workers(tok)] == [p.pid for p in procs]
    tok.encode_batch(docs, num_workers=3)  # another size: a new pool, the old one stopped
    assert len(_workers(tok)) == 3 and all(p.poll() is not None for p in procs)
    procs = _workers(tok)
    tok.close()
    assert tok._pool is None and all(p.poll() is not None for p in procs)
    assert tok.encode_batch(docs[:50], num_workers=2) == [tok.encode(t) for t in docs[:50]]  # starts anew
    with tok:
        procs = _workers(tok)
    assert all(p.poll() is not None for p in procs)


def test_small_batches_stay_in_process(exported):
    with tokmap.load(exported("llama3")) as tok:
        assert tok.encode_batch(["Hello world", "x" * 500], num_workers=2) == \
            [tok.encode("Hello world"), tok.encode("x" * 500)]
        assert tok.encode_batch(["y" * 5000], num_workers=2) == [tok.encode("y" * 5000)]
        assert tok._pool is None


def test_bad_arguments(exported, docs):
    with tokmap.load(exported("llama3")) as tok:
        for bad in (0, -2, "2", 2.0, True):
            with pytest.raises(tokmap.ArgumentError):
                tok.encode_batch(docs, num_workers=bad)
        with pytest.raises(TypeError):
            tok.encode_batch(docs, num_workers=2, bogus=1)
        # a non-str document fails exactly as in-process (the batch does not go to the workers)
        with pytest.raises(tokmap.ArgumentError, match="expected str, got int"):
            tok.encode_batch(docs + [3], num_workers=2)
        assert tok._pool is None


def test_dead_worker_between_calls(exported, docs):
    with tokmap.load(exported("llama3")) as tok:
        tok.encode_batch(docs, num_workers=2)
        victim = _workers(tok)[1]
        victim.kill()
        victim.wait()
        with pytest.raises(tokmap.TokmapError, match=f"worker process 1 \\(pid {victim.pid}\\) exited"):
            tok.encode_batch(docs, num_workers=2)
        assert tok.encode_batch(docs, num_workers=2) == [tok.encode(t) for t in docs]  # a fresh pool


def test_dead_worker_during_a_call(exported, docs):
    """Worker 0 is stopped, so its first chunk cannot finish; killing it must end the call."""
    with tokmap.load(exported("llama3")) as tok:
        tok.encode_batch(docs, num_workers=2)
        victim = _workers(tok)[0]
        os.kill(victim.pid, signal.SIGSTOP)
        timer = threading.Timer(0.5, victim.kill)
        timer.start()
        try:
            with pytest.raises(tokmap.TokmapError, match="worker process 0 .*exited with code -9"):
                tok.encode_batch(docs[:200], num_workers=2)
        finally:
            timer.join()
        assert tok._pool is None or not tok._pool.usable


def test_replaced_file_is_refused(exported, docs, tmp_path):
    path = tmp_path / "model.mtok"
    shutil.copy(exported("llama3"), path)
    with tokmap.load(path) as tok:
        os.replace(shutil.copy(exported("cl100k_base"), tmp_path / "other.mtok"), path)
        with pytest.raises(tokmap.TokmapError, match="changed since the caller loaded it"):
            tok.encode_batch(docs, num_workers=2)
        assert tok.encode_batch(docs[:5]) == [tok.encode(t) for t in docs[:5]]


def test_forked_child_gets_its_own_pool(exported, tmp_path):
    """A fork of the owner must not talk to the owner's workers (it starts its own pool)."""
    code = f"""
import os, sys
import tokmap
from tokmap.runtime import parallel
parallel.PARALLEL_MIN_CHARS = 10
tok = tokmap.load({str(exported("llama3"))!r})
docs = ["hello world " * 50, "日本語 " * 80, "x = 1\\n" * 90] * 4
expected = [tok.encode(t) for t in docs]
assert tok.encode_batch(docs, num_workers=2) == expected
owner = [w.proc.pid for w in tok._pool.workers]
pid = os.fork()
if pid == 0:
    ok = tok.encode_batch(docs, num_workers=2) == expected
    ok = ok and not {{w.proc.pid for w in tok._pool.workers}} & set(owner)
    tok.close()
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert tok.encode_batch(docs, num_workers=2) == expected
assert [w.proc.pid for w in tok._pool.workers] == owner
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_plan_and_scheduler_cover_every_document_once():
    """Shares are contiguous, chunks tile the batch, and stealing hands out every chunk exactly once
    whatever order the workers ask in (empty documents included)."""
    import random

    r = random.Random(7)
    for _ in range(2000):
        texts = ["x" * r.choice([0, 1, 10, 1000, 20_000, 100_000]) for _ in range(r.randrange(60))]
        workers = r.choice([1, 2, 3, 4])
        queues = parallel.plan_chunks(texts, workers)
        flat = sorted(c for q in queues for c in q)
        assert [a for a, _ in flat] == ([0] + [b for _, b in flat[:-1]] if flat else [])
        assert all(b > a for a, b in flat)
        assert (flat[-1][1] if flat else 0) == len(texts)
        for q in queues:  # each share is one contiguous run of documents, largest chunks first
            sizes = [sum(map(len, texts[a:b])) for a, b in q]
            assert sizes == sorted(sizes, reverse=True)
            # no near-empty tail chunk (it would take a slot of the first burst): below the least
            # chunk weight only a share's single chunk
            assert len(sizes) <= 1 or min(sizes) >= parallel._MIN_CHUNK_BYTES, sizes
            q = sorted(q)
            assert all(q[k][1] == q[k + 1][0] for k in range(len(q) - 1))
        sched = parallel._Scheduler(queues, parallel.weights(texts))
        handed = []
        while (c := sched.next_for(r.randrange(workers))) is not None:
            handed.append(c)
        assert sorted(handed) == flat


def test_workers_import_the_callers_tokmap(exported, tmp_path):
    """A worker starts where the caller's sys.path and the worker's own would disagree: here the
    working directory holds a broken `tokmap` the caller never imported."""
    (tmp_path / "tokmap").mkdir()
    (tmp_path / "tokmap" / "__init__.py").write_text("raise ImportError('the wrong tokmap')\n")
    root = str(pathlib.Path(tokmap.__file__).resolve().parent.parent)
    code = f"""
import sys
sys.path.insert(0, {root!r})
import tokmap
from tokmap.runtime import parallel
parallel.PARALLEL_MIN_CHARS = 10
tok = tokmap.load({str(exported("llama3"))!r})
docs = ["hello world " * 50, "x = 1" * 90]
assert tok.encode_batch(docs, num_workers=2) == [tok.encode(t) for t in docs]
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
