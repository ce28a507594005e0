"""Fuzz tokmap with real files: damaged .mtok files, damaged sources, and random text against the
reference libraries. A finding is printed (and its input saved under --out) when

  mtok FILE     a .mtok with some section bytes changed (header and section table kept valid, so
                the damage reaches the runtime) makes load / encode / decode / encode_batch raise
                anything but a tokmap error, or take over 10 s;
  source FILE   a tokenizer.json / Tekken json changed field by field (types, values, deletions,
                lone surrogate escapes), or a .model / .tiktoken changed byte by byte or cut short,
                makes export / load / encode raise anything but a tokmap error, or take over 20 s;
  diff MODEL    tokmap's ids or decoded text differ from the reference's on random text (the
                conformance generator with new seeds, splices of the real corpora cut anywhere,
                random code points of every plane, long runs of one char), encoded one by one
                and by encode_batch on freshly loaded tokenizers. MODEL as in tests/conftest.py, or a SentencePiece
                model name (mistral-v3, botchan_en_bpe_1000, botchan_en_unigram_1000).

    python tools/fuzz.py mtok bench/out/minilm.mtok --iterations 400 --seed 2
    python tools/fuzz.py source ../shared/testdata/models/minilm/tokenizer.json
    python tools/fuzz.py diff llama3 --iterations 25

Exit status 1 when something was found. Not part of `make test`: the tests keep what a run found
(tests/test_malformed_sources.py, test_conformance.py::test_surrogates, ...).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import random
import signal
import struct
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import tokmap  # noqa: E402
from tokmap import mtok  # noqa: E402

TEXTS = ["Hello world, this is a test.", "中文分词和英文分词有很大的区别", "def f(x):\n    return x ** 2  # ok",
         "a" * 30, "  \t\n  spaces  ", "Ünïcödé naïve café 😀 🇯🇵", "1234567890 3.14159", "x" + "a" * 3000,
         " " * 2000]
JSON_VALUES = [None, True, False, 0, -1, 1, 2 ** 31, 2 ** 40, 1.5, "", "x", "\ud800", [], {}, [1, 2],
               {"type": "Sequence"}, "Sequence", -2 ** 63]
SPM_MODELS = {"mistral-v3", "botchan_en_bpe_1000", "botchan_en_unigram_1000"}


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


class Findings:
    def __init__(self, out: pathlib.Path):
        self.out, self.n = out, 0

    def add(self, what: str, data: bytes | None = None, ext: str = ".bin") -> None:
        self.n += 1
        print(what, flush=True)
        if data is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / f"finding{self.n}{ext}").write_bytes(data)


def _guarded(found: Findings, data: bytes, ext: str, seconds: int, steps) -> None:
    """Run steps (a list of (stage, callable)); report anything but a TokmapError, or a hang."""
    stage = "start"
    signal.alarm(seconds)
    try:
        for stage, fn in steps:
            fn()
    except tokmap.TokmapError:
        pass
    except _Timeout:
        found.add(f"HANG at {stage}", data, ext)
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)[-1]
        found.add(f"{type(e).__name__} at {stage}: {str(e)[:160]} ({os.path.basename(tb.filename)}:{tb.lineno})",
                  data, ext)
    finally:
        signal.alarm(0)


def _use(path: str) -> list:
    """The steps that load a .mtok and use it."""
    state = {}

    def load():
        state["tok"] = tokmap.load(path)

    def encode_decode():
        for t in TEXTS:
            state["tok"].decode(state["tok"].encode(t))

    return [("load", load), ("encode/decode", encode_decode),
            ("encode_batch", lambda: state["tok"].encode_batch(TEXTS * 3)),
            ("long encode", lambda: state["tok"].encode(" ".join(TEXTS) * 50))]


def fuzz_mtok(path: str, iterations: int, rng: random.Random, found: Findings, tmp: pathlib.Path) -> None:
    data = pathlib.Path(path).read_bytes()
    with tokmap.load(path) as tok:
        sections = [(sid, off, length) for sid, (_dt, off, length, _crc) in tok._f.sections.items() if length]
    target = str(tmp / "fuzz.mtok")
    for _ in range(iterations):
        buf = bytearray(data)
        sid, off, length = rng.choice(sections)
        kind = rng.random()
        for _ in range(rng.choice([1, 1, 2, 4, 16])):
            at = off + rng.randrange(length)
            if kind < 0.4:
                buf[at] ^= 1 << rng.randrange(8)
            elif kind < 0.7:
                buf[at] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
            else:  # an aligned 32-bit word set to an extreme
                at = off + (rng.randrange(length) & ~3)
                if at + 4 <= off + length:
                    buf[at:at + 4] = struct.pack("<I", rng.choice([0, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, length,
                                                                     rng.randrange(1 << 32)]))
        pathlib.Path(target).write_bytes(buf)
        before = found.n
        _guarded(found, bytes(buf), ".mtok", 10, _use(target))
        if found.n > before:
            print(f"  (section {mtok.section_name(sid)})", flush=True)


def _json_paths(doc, rng, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        items = list(doc.items())
        for k, v in (rng.sample(items, 50) if len(items) > 50 else items):
            yield from _json_paths(v, rng, prefix + (k,))
    elif isinstance(doc, list):
        for i in (rng.sample(range(len(doc)), 20) if len(doc) > 20 else range(len(doc))):
            yield from _json_paths(doc[i], rng, prefix + (i,))


def _mutate_json(doc, paths, rng) -> bytes:
    d = copy.deepcopy(doc)
    for _ in range(rng.choice([1, 1, 2, 3])):
        path = rng.choice(paths)
        parent = d
        try:
            for k in path[:-1]:
                parent = parent[k]
            k, r = path[-1], rng.random()
            if r < 0.6:
                parent[k] = copy.deepcopy(rng.choice(JSON_VALUES))
            elif r < 0.8:
                del parent[k]
            elif isinstance(parent[k], str) and parent[k]:
                parent[k] = parent[k][:-1] + chr(rng.randrange(0x110000) if rng.random() < 0.5 else rng.randrange(128))
            elif isinstance(parent[k], int) and not isinstance(parent[k], bool):
                parent[k] += rng.choice([-1, 1, 1000000])
        except (KeyError, IndexError, TypeError):
            pass
    # ensure_ascii writes a lone surrogate as its escape; without, surrogatepass writes its bytes
    return json.dumps(d, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


def fuzz_source(path: str, iterations: int, rng: random.Random, found: Findings, tmp: pathlib.Path) -> None:
    raw = pathlib.Path(path).read_bytes()
    ext = pathlib.Path(path).suffix
    doc = json.loads(raw) if ext == ".json" else None
    paths = list(_json_paths(doc, rng))[1:] if doc is not None else None
    src, dst = tmp / f"fuzz{ext}", str(tmp / "fuzz.mtok")
    for _ in range(iterations):
        if doc is not None:
            data = _mutate_json(doc, paths, rng)
        elif rng.random() < 0.2:
            data = raw[:rng.randrange(len(raw))]
        else:
            buf = bytearray(raw)
            for _ in range(rng.choice([1, 2, 8])):
                at = rng.randrange(len(buf))
                buf[at] = rng.randrange(256) if rng.random() < 0.7 else buf[at] ^ (1 << rng.randrange(8))
            data = bytes(buf)
        src.write_bytes(data)
        _guarded(found, data, ext, 20, [("export", lambda: tokmap.export(src, dst))] + _use(dst))


def _reference(name: str):
    """(cases as test_conformance.Ref.cases gives them, decode, special-token strings, source path)."""
    from conftest import model_source, require, testdata_file

    if name in SPM_MODELS:
        import sentencepiece

        src = require(testdata_file("models/sentencepiece") / f"{name}.model")
        sp = sentencepiece.SentencePieceProcessor(model_file=str(src))
        cases = [("plain", sp.encode, lambda m, t: m.encode(t, add_special_tokens=False))]
        return cases, sp.decode, ["<s>", "</s>", "<unk>"], src
    from test_conformance import Ref

    src = model_source(testdata_file(""), name)
    ref = Ref(name, src)
    return ref.cases(), ref.decode, ref.specials, src


def fuzz_diff(name: str, iterations: int, rng: random.Random, found: Findings, tmp: pathlib.Path) -> None:
    from conftest import CORPORA, testdata_file
    from gen_strings import random_string

    cases, decode, specials, src = _reference(name)
    path = tokmap.export(src, tmp / f"{name}.mtok")
    corpora = [testdata_file(f"corpus/{c}.txt").read_text(encoding="utf-8") for c in CORPORA]

    def splice() -> str:  # pieces of real text cut anywhere
        parts = []
        for _ in range(rng.randint(1, 6)):
            c = rng.choice(corpora)
            a = rng.randrange(len(c))
            parts.append(c[a:a + rng.randint(1, 400)])
        return rng.choice(["", " ", "\n"]).join(parts)

    def code_points() -> str:
        spans = [(0x20, 0x7E), (0xA0, 0xD7FF), (0xE000, 0xFFFF), (0x10000, 0x10FFFF)]
        return "".join(chr(rng.randint(*rng.choices(spans, [3, 3, 2, 2])[0])) for _ in range(rng.randint(1, 60)))

    def run() -> str:  # a long run of one char, a few others at either end (the run paths)
        c = rng.choice(["a", "Z", " ", "1", ".", "-", "=", "\n", "\t", "中", "é", "\U0001F600", "\u2581", "'"])
        edge = "".join(rng.choice(["a", "b", " ", "x", "中", "!"]) for _ in range(rng.choice([0, 0, 1, 2, 5, 17])))
        return rng.choice(["", edge]) + c * rng.randint(400, 6000) + rng.choice(["", edge])

    def text() -> str:
        k = rng.random()
        if k < 0.4:
            return random_string(rng, specials)
        if k < 0.65:
            return splice()
        if k < 0.8:
            return code_points()
        if k < 0.9:
            return run()
        return random_string(rng, specials) * rng.randint(2, 30)

    compared = 0
    for _ in range(iterations):
        texts = [text() for _ in range(600)]
        tok = tokmap.load(path)
        for label, ref_fn, tok_fn in cases:
            for t in texts:
                want, got = ref_fn(t), tok_fn(tok, t)
                compared += 1
                if want != got:
                    found.add(f"{name} {label}: {t[:80]!r}: reference {want[:12]}, tokmap {got[:12]}",
                              t.encode("utf-8"), ".txt")
            if name not in SPM_MODELS and label in ("plain", "nobos", "all"):
                kw = {"allowed_special": "all"} if label == "all" else {"add_special_tokens": False}
                for t, got in zip(texts, tokmap.load(path).encode_batch(texts, **kw)):  # fresh caches
                    if got != ref_fn(t):
                        found.add(f"{name} encode_batch {label}: {t[:80]!r}", t.encode("utf-8"), ".txt")
        for t in texts[:100]:
            ids = cases[0][1](t)
            if decode(ids) != tok.decode(ids):
                found.add(f"{name} decode: {t[:80]!r}", t.encode("utf-8"), ".txt")
    print(f"{name}: {compared} encodes compared", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", choices=["mtok", "source", "diff"])
    ap.add_argument("target", help="a .mtok file, a source file, or a model name")
    ap.add_argument("--iterations", type=int, default=300, help="inputs tried (diff: rounds of 600 texts)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="fuzz-findings", help="where inputs that found something are saved")
    a = ap.parse_args(argv)
    import tempfile

    signal.signal(signal.SIGALRM, _alarm)
    found = Findings(pathlib.Path(a.out))
    fuzz = {"mtok": fuzz_mtok, "source": fuzz_source, "diff": fuzz_diff}[a.kind]
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        fuzz(a.target, a.iterations, random.Random(a.seed), found, pathlib.Path(tmp))
    print(f"{a.kind} {a.target}: {found.n} found in {time.time() - t0:.0f} s")
    return 1 if found.n else 0


if __name__ == "__main__":
    sys.exit(main())
