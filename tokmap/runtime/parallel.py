"""encode_batch over worker processes that map the same .mtok file.

Imported only when a caller asks for `num_workers >= 2`, so it costs nothing on the
import -> load -> encode path. Decisions, with the reasons measured for issue 4:

- Opt-in, never by default. tokenizers' Rust threads and tiktoken's `num_threads=8` are invisible;
  processes are not (they show in `ps`, hold their own caches, outlive a fork of the caller), so
  `encode_batch(texts)` stays in-process and `num_workers=N` starts N workers.
- Workers are fresh interpreters (`sys.executable -c ...`), not fork and not multiprocessing.
  fork copies whatever other threads hold locked (numpy's BLAS starts a thread on import, so the
  caller is multi-threaded after its first long encode), and multiprocessing's spawn/forkserver
  re-import the caller's `__main__`, which breaks scripts without a main guard. A fresh interpreter
  costs ~50 ms once per Tokenizer (paid by both workers at the same time) and nothing afterwards.
- Each worker loads the tokenizer from its path, so the page cache shares the mapped file; nothing of
  the tokenizer is pickled. The worker checks that the file's header and section table (which hold
  every section's crc32) equal the caller's, so a file replaced since `load` is refused, not used.
- Results come back as uint32 bytes (lengths, then every document's ids), never pickled lists:
  for 10^6 ids pickling costs 12 ms to dump and 31 ms to load, array('I') 3 ms to fill in the worker
  and 21 ms for frombytes + tolist in the caller (the floor for handing back Python ints), and with
  `as_array=True` the caller only wraps the bytes. A pipe copies 4 MB in about a millisecond, so
  shared memory would win nothing worth its clean-up hazards. The caller's lists take their ints
  from a table made once per pool (id -> int object) instead of making each anew: the caller's
  work runs on the workers' cores, so each of its milliseconds is one a worker loses.
- Up to six chunks in flight per worker (IN_FLIGHT), sent as one burst, and the worker encodes
  the jobs waiting in its pipe as one group (batching.py: the documents' misses merge in one
  batch, whose fixed costs come per call). Grouping matters since the in-process encode_batch
  merges ~1M chars at once: with each chunk merged alone, the workers spent 12-18% more CPU than
  one process on bench/parallel.py's fresh slices (Llama 3), and the ratio fell to ~1.6.
  - A burst's frames carry _MORE but the last, and the worker reads a burst whole before it
    groups: the caller writes one worker's burst, then the next's, and a worker that read as soon
    as its first job arrived had grouped that job alone, then the rest (two or three groups where
    one would do).
  - The worker keeps the last job waiting back, to encode while the caller reads its results and
    writes more, so it never idles for a round trip through the caller (with one job in flight,
    those round trips left each worker idle about 10% of a batch's wall time: the caller has to
    be scheduled while both cores run workers). When the caller has nothing more for anyone it
    marks the burst's last job _LAST, and the worker keeps nothing back: that last job, encoded
    alone after the group, had ended most batches, its own merge's fixed costs on the wall time.
  - A worker only takes another share's chunks when it is about to run dry (one job left). The
    first bursts, six jobs, took the other share's smallest chunks up front, so the first worker
    carried them while the second had nothing left to hand over at the end.
  On bench/parallel.py --models llama3 (fresh slices), runs of 5 alternated with the code before
  these three: median ratio 1.78 against 1.715 over 50 slices each; the two workers' CPU 3% above
  the one process's, where it was 5%, and the busier worker's 6% above the mean, where it was 9%.
  So a worker's whole share usually goes out in its first burst and is encoded as one group, and
  nothing is left to steal. Holding a share's last third back until its first group is answered
  (so that a faster worker could steal it) was slower: medians 1.45 / 1.64 / 1.39 against
  1.74 / 1.61 / 1.64, alternated runs of 5. The extra groups cost more than the balance won. The
  imbalance that is left comes from the machine: each share alone took 0.14-0.23 s of CPU, but
  run at the same time as the other, one of them sometimes took 40-70% longer. Two more tries,
  bench/parallel.py --models llama3 (fresh slices), alternated in one process:
  - A held-back tail: each share's first burst its first 85% as one group, the last 15% in three
    chunks handed out one at a time (a worker's own first, then the other share's): median ratio
    1.74 against 1.83 (60 runs each). The extra groups' fixed costs outweighed the balance, and
    a slice's documents (20-100 KB each) are too coarse for a fine tail.
  - Shares balanced exactly in bytes by treating the batch as a ring (the best start of the
    first share; the share that wraps gets two ranges). The fresh slices' byte imbalance of
    1.01-1.05 became 1.00, and the slower share's instructions under cachegrind summed 2.6% lower
    over the five slices; but the workers' measured CPU imbalance did not follow (median
    1.069 against 1.078, mean 1.097 against 1.099, 80 runs each), nor the ratio (medians of three
    alternations, 60-80 runs each: 1.71 / 1.78 / 1.80 against 1.83 / 1.81 / 1.81). Bytes are too
    rough a measure of a share's time for the last few percent.
  The caller's writes are non-blocking (what a full pipe does not take waits in the worker's outbox
  until the selector says the pipe has room), so the caller never blocks on a worker that is itself
  blocked writing a result the caller has not read yet. Its pipes are enlarged to 1 MiB where
  Linux allows, so most jobs go in one write and a worker writes most results whole and goes on to
  its next job while the caller reads.
- Each worker owns a contiguous share of the batch (a document goes to the share its middle falls
  in: plan_chunks), cut into chunks that halve towards its end and run largest first (a worker's
  first group is then most of its share, and the last small chunks stay with the caller to be
  stolen), and a worker that runs dry takes the smallest chunk of the share with most left.
  Shares and chunks are weighed in UTF-8 bytes, not characters: a CJK character costs about
  three times an ASCII one, and on bench/parallel.py's lines set (llama3, five fresh slices) the
  character-weighed shares took 0.91 s and 1.17 s of CPU, the byte-weighed ones 0.96 s and 1.08 s.
  Handing chunks out first-come (as a plain pool would) cost the workers 15-40% more CPU than
  the single process on a repeated batch, because each worker's piece caches then see text the
  other one cached; with shares (a repeated batch lands on the caches that saw it, neighbouring and
  so similar documents stay together) it is 0-7% on a repeated batch and 4-9% on new documents. Results
  are placed by document index, so the order is the input's.
- A batch below PARALLEL_MIN_CHARS (64K) characters, or of one document, runs in-process. A round
  trip to the pool costs ~90 us (4 short sentences: 25 us in-process, 90 us through the pool), and
  64K characters take 3 ms or more even at 20 MiB/s, so the halved time clearly outweighs it there;
  smaller batches keep their latency. The chunks are at least 16 KiB of UTF-8 for the same reason.
- An exception in a worker is rebuilt in the caller with the same type, args and attributes (no
  __init__ call, so FormatError and friends survive); when several documents fail, the one raised is
  the first in input order, as the sequential loop would raise.
- A worker that dies raises TokmapError naming it and closes the pool (the next call starts a new
  one); the wait polls the processes, so a pipe kept open by some fork of the caller cannot hang it.
  Workers exit by themselves when their stdin closes, so a killed caller leaves none behind.
"""

from __future__ import annotations

import atexit
import os
import pickle
import selectors
import struct
import subprocess
import sys
import threading
import weakref
from array import array
from collections import deque

from .. import mtok
from ..errors import TokmapError

# Below this many characters in the whole batch the in-process loop is faster (bench/parallel.py).
PARALLEL_MIN_CHARS = 1 << 16
_MIN_CHUNK_BYTES = 1 << 14
IN_FLIGHT = 6  # jobs queued at a worker at once (see the module docstring)
_PIPE_BYTES = 1 << 20

# Frames: kind (I), job id (I), count (I), payload length (Q), then the payload.
_FRAME = struct.Struct("<IIIQ")
_JOB, _READY, _OK, _ERR = 1, 2, 3, 4
# Flags on a job frame's kind: _MORE, more jobs of the same burst follow (the worker reads them all
# before it groups); _LAST, the caller holds no more jobs for anyone (the worker keeps none back).
_MORE, _LAST = 0x100, 0x200
_U32 = "I" if array("I").itemsize == 4 else "L"

_live: "weakref.WeakSet[WorkerPool]" = weakref.WeakSet()


def fingerprint(f) -> bytes:
    """Header + section table of a mapped file: its size and every section's offset and crc32."""
    return bytes(f._mv[: mtok.HEADER.size + len(f.sections) * mtok.ENTRY.size])


def weights(texts) -> list[int]:
    """Each document's UTF-8 length, the measure of work that plan_chunks balances."""
    return list(map(len, wire_texts(texts)))


def wire_texts(texts) -> list:
    """The documents as they go to a worker: an ASCII one as it is, another as its UTF-8 bytes
    (surrogatepass: every str round-trips), which weights() needs anyway and which pickle then
    copies rather than encoding the str a second time (a batch's start, before any worker has a
    job, was 1.6 ms of encoding for the weights and 2.0 ms of pickling, bench/parallel.py's
    slices). The worker decodes them (load_texts)."""
    return [t if t.isascii() else t.encode("utf-8", "surrogatepass") for t in texts]


def load_texts(wire: list) -> list[str]:
    """wire_texts, undone."""
    return [t if type(t) is str else t.decode("utf-8", "surrogatepass") for t in wire]


def plan_chunks(texts, workers: int, weight: list[int] | None = None) -> list[list[tuple[int, int]]]:
    """Per worker, its queue of [start, end) document ranges, largest first.

    The batch is cut into `workers` contiguous shares of about equal weight (UTF-8 bytes unless
    `weight` gives each document's): a document goes to the share its middle falls in, so each
    share starts within half a document of k * total / workers. Closing a share at the document
    that reaches its part gave the first share that whole document: on bench/parallel.py's fresh
    slices (Llama 3), where a document of multi.txt weighs ~75 KB, 905-979 KB against 815-845 KB,
    the first worker then setting the batch's time. Six alternations in one process (each
    share's CPU time, the single run's over the slower share's): 1.76-1.90 -> 1.85-2.01; eight
    alternations of the pool, 15 runs each: median ratio 1.75 -> 1.78 on average, ahead in six.
    Each share is then cut into chunks that shrink towards its end (each half of what remains
    of the share), so a worker's last chunks are small and stealing them evens out the finish.
    A remainder lighter than the least chunk (_MIN_CHUNK_BYTES) joins the chunk before it: a
    seventh, near-empty chunk split a worker's first burst (IN_FLIGHT) in two groups, and with
    it the pool's ratio was below the old plan's in three alternations of three.
    """
    weight = weights(texts) if weight is None else weight
    total = sum(weight)
    queues: list[list[tuple[int, int]]] = [[] for _ in range(workers)]
    bounds, at = [0], 0  # where each share starts
    for i, w in enumerate(weight):
        while len(bounds) < workers and 2 * workers * at + workers * w >= 2 * len(bounds) * total > 0:
            bounds.append(i)  # (integers: the middle at + w / 2 at or past share k's start, k * total / workers)
        at += w
    bounds += [len(weight)] * (workers + 1 - len(bounds))
    for share in range(workers):
        lo, hi = bounds[share], bounds[share + 1]
        left = sum(weight[lo:hi])
        start, size = lo, 0
        target = max(_MIN_CHUNK_BYTES, left // 2)
        for i in range(lo, hi):
            size += weight[i]
            if size >= target:
                queues[share].append((start, i + 1))
                left -= size
                start, size = i + 1, 0
                target = max(_MIN_CHUNK_BYTES, left // 2)
        if start < hi:
            if queues[share] and left < _MIN_CHUNK_BYTES:
                queues[share][-1] = (queues[share][-1][0], hi)
            else:
                queues[share].append((start, hi))
    # Largest first within a share: a long document at the end of a share (one chunk on its own)
    # would otherwise leave the other worker idle while it runs.
    for q in queues:
        q.sort(key=lambda c: -sum(weight[c[0]:c[1]]))
    return queues


# The worker's command: tokmap must come from the caller's copy, whatever the worker's sys.path
# finds first (an installed tokmap, the current directory); the path is only put first when
# needed, so the caller's copy never shadows the standard library for nothing.
_BOOT = ("import sys, importlib.util as u\n"
         "s = u.find_spec('tokmap')\n"
         "if s is None or s.origin != {origin!r}: sys.path.insert(0, {root!r})\n"
         "from tokmap.runtime.parallel import worker_main\n"
         "worker_main({origin!r})\n")


def _tokmap_origin() -> str:
    import tokmap

    return tokmap.__spec__.origin


class _Worker:
    def __init__(self, path: str, fp: bytes, index: int):
        self.index = index
        origin = _tokmap_origin()
        boot = _BOOT.format(origin=origin, root=os.path.dirname(os.path.dirname(origin)))
        self.proc = subprocess.Popen([sys.executable, "-c", boot], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     bufsize=0)
        self.rfd = self.proc.stdout.fileno()
        self.wfd = self.proc.stdin.fileno()
        _send(self.wfd, _JOB, 0, 0, pickle.dumps((path, fp), 5))
        # Room for a whole job in the stdin pipe (fewer partial writes) and for most of a result in
        # the stdout pipe: with the default 64 KiB a worker writing a 1 MB result stops ~16 times
        # until the caller has drained the pipe, instead of going on to its next job (Linux only).
        try:
            import fcntl

            for fd in (self.wfd, self.rfd):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        except (ImportError, AttributeError, OSError):
            pass
        os.set_blocking(self.wfd, False)
        self.ready = False
        self.jobs: deque[int] = deque()  # output indexes of the chunks sent, oldest first
        self.outbox: deque[memoryview] = deque()  # job bytes the pipe has not taken yet

    def flush(self) -> bool:
        """Write what the pipe takes now; True when the outbox is empty."""
        box = self.outbox
        try:
            while box:
                n = os.write(self.wfd, box[0])
                if n < len(box[0]):
                    box[0] = box[0][n:]
                    return False
                box.popleft()
        except BlockingIOError:
            return False
        except OSError:  # EPIPE: the worker is gone
            raise self.died() from None
        return True

    def died(self) -> TokmapError:
        try:  # its pipe closes a moment before the process can be reaped: give it that moment
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        how = "closed its pipe" if code is None else f"exited with code {code}"
        return TokmapError(f"tokmap worker process {self.index} (pid {self.proc.pid}) {how}; the pool is closed")


class WorkerPool:
    """N worker processes, each with the same .mtok mapped, for one Tokenizer."""

    def __init__(self, path, fp: bytes, workers: int, vocab_size: int):
        self.path, self.size, self.pid = os.fspath(path), workers, os.getpid()
        self.vocab_size = vocab_size
        self._lists = None  # idlist.IdLists: id -> one shared int object (see _unpack)
        self.lock = threading.Lock()
        self.closed = False
        self.workers: list[_Worker] = []
        try:
            for i in range(workers):
                self.workers.append(_Worker(self.path, fp, i))
        except OSError as e:
            self.close()
            raise TokmapError(f"cannot start tokmap worker processes: {e}") from None
        _live.add(self)

    @property
    def usable(self) -> bool:
        """False once closed, broken, or inherited by a fork of the process that started it."""
        return not self.closed and self.pid == os.getpid()

    def encode(self, texts, add_special_tokens, kwargs, as_array=False):
        """Every document's ids, in order: lists, or numpy uint32 arrays if as_array."""
        wire = wire_texts(texts)
        weight = list(map(len, wire))
        queues = plan_chunks(texts, self.size, weight)
        order = sorted(c for q in queues for c in q)
        index = {c: k for k, c in enumerate(order)}  # chunk -> its place in the output
        sched = _Scheduler(queues, weight)
        job_payload = pickle.dumps((add_special_tokens, kwargs), 5)
        results: list = [None] * len(order)
        errors: dict[int, BaseException] = {}
        sel = selectors.DefaultSelector()
        try:
            for w in self.workers:
                sel.register(w.rfd, selectors.EVENT_READ, w)
            # Every ready worker's first burst is taken before any is written, so that each knows
            # whether the scheduler is left empty (_LAST).
            bursts = [(w, self._take(w, sched, index, errors)) for w in self.workers if w.ready]
            for w, burst in bursts:
                self._emit(w, burst, sched.empty(), wire, job_payload, sel)
            while any(w.jobs or not w.ready for w in self.workers):
                events = sel.select(timeout=1.0)
                if not events:
                    for w in self.workers:
                        if w.proc.poll() is not None:
                            raise w.died()
                    continue
                for key, _ in events:
                    w = key.data
                    if key.fd == w.wfd:  # room in a pipe with job bytes waiting
                        if w.flush():
                            sel.unregister(w.wfd)
                        continue
                    frame = _recv(w.rfd)
                    if frame is None:
                        raise w.died()
                    kind, job, count, payload = frame
                    if kind == _READY:
                        w.ready = True
                    elif kind == _ERR and not w.ready:
                        raise _rebuild(payload)  # the worker could not load the file
                    else:
                        done = w.jobs.popleft()  # a worker answers its jobs in the order sent
                        if kind == _ERR:
                            errors[done] = _rebuild(payload)
                    # Feed the worker before unpacking, so it computes while the caller copies.
                    self._feed(w, sched, index, wire, job_payload, errors, sel)
                    if kind == _OK:
                        results[job] = _unpack_np(payload, count) if as_array \
                            else _unpack(payload, count, self._id_lists())
        except BaseException:
            self.close()
            raise
        finally:
            sel.close()
        if errors:
            raise errors[min(errors)]
        return [ids for chunk in results for ids in chunk]

    def _id_lists(self):
        """Every id's int object, made once per pool: the lists handed back share them (see _unpack)."""
        if self._lists is None:
            from .idlist import IdLists

            self._lists = IdLists(self.vocab_size, eager=True)
        return self._lists

    def _feed(self, w: _Worker, sched, index, wire, job_payload, errors, sel) -> None:
        """Send w its next burst of jobs (see _take); wire: the batch's wire_texts."""
        self._emit(w, self._take(w, sched, index, errors), sched.empty(), wire, job_payload, sel)

    def _take(self, w: _Worker, sched, index, errors) -> list:
        """w's next chunks, until IN_FLIGHT are out or none is left: its own share's, then, once
        it is about to run dry (one job left, the one it works on next), one of another share's.
        After an error only chunks before the failing one matter: the first failure in input
        order is the one the sequential loop would raise."""
        burst: list = []
        while len(w.jobs) < IN_FLIGHT:
            steal = len(w.jobs) <= 1
            chunk = sched.next_for(w.index, steal)
            while chunk is not None and errors and index[chunk] > min(errors):
                chunk = sched.next_for(w.index, steal)
            if chunk is None:
                break
            w.jobs.append(index[chunk])
            burst.append((index[chunk], chunk))
        return burst

    def _emit(self, w: _Worker, burst: list, last: bool, wire, job_payload, sel) -> None:
        """Queue a burst's job frames for w (_MORE on all but the last; _LAST on that one when
        `last`) and write what its pipe takes."""
        waiting = bool(w.outbox)
        for k, (job, (a, b)) in enumerate(burst):
            flag = _MORE if k < len(burst) - 1 else _LAST if last else 0
            w.outbox.extend(_frame(_JOB | flag, job, b - a, job_payload, pickle.dumps(wire[a:b], 5)))
        if w.outbox and not waiting and not w.flush():
            sel.register(w.wfd, selectors.EVENT_WRITE, w)

    def close(self) -> None:
        """Stop the workers (their stdin closes and they exit; any that lingers is killed)."""
        if self.closed:
            return
        self.closed = True
        if self.pid != os.getpid():
            return  # a forked copy: the workers belong to the parent
        for w in self.workers:
            for pipe in (w.proc.stdin, w.proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
        for w in self.workers:
            try:
                w.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()

    def __del__(self):
        self.close()


@atexit.register
def _close_all():
    for pool in list(_live):
        pool.close()


class _Scheduler:
    """Each worker takes its own share front to back (a repeated batch lands on the caches that
    saw it); one that runs dry takes the last, smallest chunk of the share with most left."""

    def __init__(self, queues, weight: list[int]):
        self.queues = [deque(q) for q in queues]
        self.left = [sum(sum(weight[a:b]) for a, b in q) for q in queues]
        self.weight = weight

    def empty(self) -> bool:
        return not any(self.queues)

    def next_for(self, w: int, steal: bool = True):
        """w's next chunk, or None; another share's only if `steal`."""
        owner = w
        if not self.queues[w]:
            if not steal:
                return None
            busy = [v for v, q in enumerate(self.queues) if q]
            if not busy:
                return None
            owner = max(busy, key=self.left.__getitem__)
        chunk = self.queues[owner].popleft() if owner == w else self.queues[owner].pop()
        self.left[owner] -= sum(self.weight[chunk[0]:chunk[1]])
        return chunk


# -- framing ----------------------------------------------------------------------------------
def _frame(kind: int, job: int, count: int, *parts) -> list[memoryview]:
    """A frame as the buffers to write: header and payload, the payload being `parts` back to back
    (one buffer when small; large parts are written as they are rather than copied into one)."""
    bodies = [memoryview(p).cast("B") for p in parts]
    size = sum(b.nbytes for b in bodies)
    head = _FRAME.pack(kind, job, count, size)
    if size < 1 << 16:
        return [memoryview(b"".join([head, *bodies]))]
    return [memoryview(head), *bodies]


def _send(fd: int, kind: int, job: int, count: int, *parts) -> None:
    for mv in _frame(kind, job, count, *parts):
        _write_all(fd, mv)


def _write_all(fd: int, mv: memoryview) -> None:
    while mv:
        mv = mv[os.write(fd, mv):]


def _recv(fd: int):
    head = _read_exact(fd, _FRAME.size)
    if head is None:
        return None
    kind, job, count, n = _FRAME.unpack(head)
    payload = _read_exact(fd, n)
    if payload is None:
        return None
    return kind, job, count, payload


def _read_exact(fd: int, n: int):
    buf = bytearray(n)
    mv, got = memoryview(buf), 0
    while got < n:
        k = os.readv(fd, [mv[got:]])
        if k == 0:
            return None
        got += k
    return buf


def _unpack(payload, count: int, lists) -> list[list[int]]:
    """A chunk's frame payload -> its documents' id lists.

    The ids are taken from `lists` (idlist.IdLists, id -> int object) rather than made anew:
    making 650K ints (array.tolist) took the caller 17-20 ms of a 0.26 s two-worker batch, taking
    them 9-11 ms, and the caller's time is what the two workers lose (it runs on their cores).
    Ids beyond the table (none from a valid file) are made anew.
    """
    import numpy as np

    arr = np.frombuffer(payload, dtype="<u4")
    # A document at a time, one list each: a flat list cut into slices copied every id twice
    # (40 documents of bench/parallel.py's lines, 254K ids: 2.4 against 3.3 ms).
    tolist = np.ndarray.tolist if len(arr) > count and int(arr[count:].max()) >= lists.size else lists.tolist
    out, pos = [], count
    for n in arr[:count].tolist():
        out.append(tolist(arr[pos:pos + n]))
        pos += n
    return out


def _unpack_np(payload, count: int) -> list:
    """As _unpack, as writable numpy uint32 arrays (views of the one received buffer)."""
    import numpy as np

    arr = np.frombuffer(payload, dtype="<u4")  # payload is a bytearray: the views are writable
    ends = np.cumsum(arr[:count], dtype=np.int64) + count
    return [arr[e - n:e] for n, e in zip(arr[:count].tolist(), ends.tolist())]


def picklable(obj) -> bool:
    try:
        pickle.dumps(obj, 5)
        return True
    except Exception:
        return False


def _rebuild(payload) -> BaseException:
    """The worker's exception with its type, args and attributes, without calling __init__."""
    try:
        cls, args, state, where = pickle.loads(payload)
        exc = cls.__new__(cls, *args)
        exc.args = args
        exc.__dict__.update(state)
    except Exception as e:  # a class the caller cannot import or build: say what it was
        return TokmapError(f"a tokmap worker raised an exception the caller cannot rebuild ({e})")
    exc.add_note(where)
    return exc


# -- the worker process -----------------------------------------------------------------------
def worker_main(origin: str) -> None:
    """Load the tokenizer by path, then answer jobs on stdin until it closes."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle; it closes the pool
    out = os.dup(1)
    os.dup2(2, 1)  # a stray print in the worker goes to stderr, never into the result stream
    frame = _recv(0)
    if frame is None:
        return
    try:
        from .tokenizer import load

        if _tokmap_origin() != origin:
            raise TokmapError(f"the worker imported tokmap from {_tokmap_origin()}, the caller from {origin}")
        path, fp = pickle.loads(frame[3])
        tok = load(path)
        if fingerprint(tok._f) != fp:
            raise TokmapError(f"{path}: the file changed since the caller loaded it; load it again")
        tok.pipeline  # build the pipeline now, while the caller is still planning the batch
    except Exception as e:
        _send(out, _ERR, 0, 0, _pack_error(e, "raised while a tokmap worker loaded the file"))
        return
    _send(out, _READY, 0, 0, b"")
    pid = os.getpid()
    queue: deque = deque()
    while (group := _next_jobs(queue)) is not None:
        _answer_paused(out, tok, pid, group, queue)


def _answer_paused(out: int, tok, pid: int, group: list, queue: deque, fd: int = 0) -> None:
    """_answer with the cyclic collector paused until the results are sent, and the collection
    it put off run while no job waits. encode()'s fill pauses it too (tokenizer._guard: nothing
    the encoder makes can be in a reference cycle), and the collection of everything the group
    made then came as soon as the fill returned, 3-5 ms before a worker could send its results
    (bench/parallel.py, Llama 3: at 136 ms of a 142 ms group). Idle, it costs the batch nothing."""
    import gc
    import select

    was_on = gc.isenabled()
    gc.disable()
    try:
        _answer(out, tok, pid, group)
    finally:
        if was_on:
            gc.enable()
    if was_on and not queue and not select.select([fd], [], [], 0)[0]:
        gc.collect(0)


def _next_jobs(queue: deque, fd: int = 0):
    """The worker's next jobs to encode as one group (see the module docstring), as (job, count,
    arguments, texts): those waiting in its pipe (a burst the caller is still writing, _MORE,
    read whole) but the last, at least one, or all of them when the last is _LAST; None once
    stdin is closed and nothing is left. Only jobs of equal arguments group (one encode_batch
    call sends all of its jobs with the same)."""
    import select

    if not queue:
        frame = _recv(fd)
        if frame is None:
            return None
        queue.append(frame)
    while queue[-1][0] & _MORE or select.select([fd], [], [], 0)[0]:
        frame = _recv(fd)
        if frame is None:  # stdin closed: what is queued is still answered
            break
        queue.append(frame)
    group = []
    for _ in range(len(queue) if queue[-1][0] & _LAST else max(1, len(queue) - 1)):
        _kind, job, count, payload = queue[0]
        args, texts = _load_two(payload)
        if group and args != group[0][2]:
            break
        queue.popleft()
        group.append((job, count, args, texts))
    return group


def _answer(out: int, tok, pid: int, group: list) -> None:
    """Encode a group of jobs as one batch and send each job's result (or, when that fails, each
    job's documents one by one, so that the error names the first failing document)."""
    from .batching import encode_each

    add_special_tokens, kwargs = group[0][2]
    try:
        got = encode_each(tok, [t for g in group for t in g[3]], add_special_tokens, kwargs)
    except Exception:
        got = None
    at = 0
    for job, count, (add_special_tokens, kwargs), texts in group:
        lens, ids = array(_U32), array(_U32)
        if got is not None:
            for r in got[at:at + count]:
                lens.append(len(r))
                ids.fromlist(r)
            at += count
            _send(out, _OK, job, count, lens, ids)  # the lengths, then every document's ids
            continue
        for i, text in enumerate(texts):
            try:
                r = tok.encode(text, add_special_tokens, **kwargs)
            except Exception as e:
                _send(out, _ERR, job, i, _pack_error(e, f"raised in tokmap worker pid {pid}"))
                break
            lens.append(len(r))
            ids.fromlist(r)
        else:
            _send(out, _OK, job, count, lens, ids)


def _load_two(payload):
    """Two pickles back to back (the batch's arguments, then the chunk's wire_texts), as the
    arguments and the texts."""
    import io

    f = io.BytesIO(payload)
    first = pickle.load(f)
    return first, load_texts(pickle.load(f))


def _pack_error(e: BaseException, where: str) -> bytes:
    state = {k: v for k, v in getattr(e, "__dict__", {}).items() if k != "__notes__"}
    try:
        return pickle.dumps((type(e), e.args, state, where), 5)
    except Exception:
        return pickle.dumps((TokmapError, (f"{type(e).__name__}: {e}",), {}, where), 5)


