"""Shared setup for the benchmark scripts: single-thread environment, paths, models, machine info.

`pin_threads()` must run before any tokenizer library is imported: the Rust libraries read
RAYON_NUM_THREADS when their thread pool is first built, and numpy's BLAS reads its *_NUM_THREADS
variables at import. Everything else here is plain data about where things live.
"""

from __future__ import annotations

import math

import datetime
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
OUT = BENCH / "out"

# Environment that keeps every library on one thread and every load honest.
SINGLE_THREAD_ENV = {
    "RAYON_NUM_THREADS": "1",          # tokenizers, kitoken, tokie (all Rust + rayon)
    "TOKENIZERS_PARALLELISM": "false",  # tokenizers' own switch
    "OMP_NUM_THREADS": "1",             # numpy / BLAS (tokmap uses numpy for long texts)
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TIKTOKEN_CACHE_DIR": "",           # tiktoken: read the .tiktoken file itself, no copy in /tmp
}


def pin_threads(one_cpu: bool = True) -> int | None:
    """Set the single-thread variables in this process (call before importing tokenizer libraries),
    and with one_cpu pin the process to one CPU. The pin is what keeps tokie single-threaded: for
    texts of 10 kB and more it spawns its own std threads, one per `available_parallelism()` (which
    follows the CPU affinity), whatever RAYON_NUM_THREADS says. Returns the CPU pinned to, or None."""
    os.environ.update(SINGLE_THREAD_ENV)
    cpu = None
    if one_cpu and hasattr(os, "sched_setaffinity"):
        cpu = max(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
    if str(REPO) not in sys.path:  # tokmap importable without `pip install -e`
        sys.path.insert(1, str(REPO))
    return cpu


def testdata_dir() -> Path:
    """$TOKMAP_TESTDATA, else ../shared/testdata relative to the repo root."""
    env = os.environ.get("TOKMAP_TESTDATA")
    return Path(env) if env else (REPO.parent / "shared" / "testdata").resolve()


CORPORA = ["en", "code", "multi", "pride", "wagahai", "utf8seq"]
QUICK_CORPORA = ["en", "code"]


@dataclass(frozen=True)
class Model:
    """One tokenizer source file. kind: "hf" (tokenizer.json), "tiktoken", "tekken" or "spm"
    (SentencePiece .model). no_trunc: the tokenizer.json sets truncation/padding; every library then
    reads a copy with both set to null (bench/out/<name>.notrunc.json), since tokmap has no switch to
    turn them off at run time (tokenizers/tokie would call no_truncation()/no_padding() anyway)."""
    name: str
    kind: str
    relpath: str
    encoding: str | None = None  # tiktoken encoding name (pattern + specials live in code)
    no_trunc: bool = False

    def source(self, td: Path) -> Path:
        src = td / self.relpath
        if not self.no_trunc:
            return src
        import json
        dst = OUT / f"{self.name}.notrunc.json"
        doc = json.loads(src.read_text(encoding="utf-8"))
        doc["truncation"] = None
        doc["padding"] = None
        text = json.dumps(doc, ensure_ascii=False)
        if not dst.exists() or dst.read_text(encoding="utf-8") != text:
            OUT.mkdir(parents=True, exist_ok=True)
            dst.write_text(text, encoding="utf-8")
        return dst


MODELS = [
    Model("llama3", "hf", "models/llama3/tokenizer.json"),
    Model("qwen3", "hf", "models/qwen3/tokenizer.json"),
    Model("gpt4o", "hf", "models/gpt4o/tokenizer.json"),
    Model("gpt2", "tiktoken", "models/tiktoken/gpt2.tiktoken", "r50k_base"),
    Model("cl100k_base", "tiktoken", "models/tiktoken/cl100k_base.tiktoken", "cl100k_base"),
    Model("o200k_base", "tiktoken", "models/tiktoken/o200k_base.tiktoken", "o200k_base"),
    Model("tekken", "tekken", "models/tekken/tekken_240718.json"),
    Model("gemma3", "hf", "models/gemma3/tokenizer.json"),
    Model("llama2", "hf", "models/llama2/tokenizer.json"),
    Model("minilm", "hf", "models/minilm/tokenizer.json", no_trunc=True),
    Model("botchan-unigram", "hf", "models/botchan-unigram/tokenizer.json"),
    Model("botchan-wordlevel", "hf", "models/botchan-wordlevel/tokenizer.json"),
    Model("mistral-v3", "spm", "models/sentencepiece/mistral-v3.model"),
    Model("botchan_en_bpe_1000", "spm", "models/sentencepiece/botchan_en_bpe_1000.model"),
    Model("botchan_en_unigram_1000", "spm", "models/sentencepiece/botchan_en_unigram_1000.model"),
]
MODELS_BY_NAME = {m.name: m for m in MODELS}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total() -> str:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "unknown"


def _version(dist: str) -> str:
    from importlib import metadata
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git_revision() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not rev:
        return "unknown"
    return rev + (" (with uncommitted changes)" if dirty else "")


LIBRARIES = ["tokmap", "tokenizers", "tiktoken", "sentencepiece", "kitoken", "tokie", "mistral-common", "numpy"]


def machine_info() -> dict:
    """What the numbers were measured on."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    pinned = " (benchmark pinned to 1)" if usable == 1 and (os.cpu_count() or 1) > 1 else ""
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": _cpu_model(),
        "cpus": f"{os.cpu_count()} logical CPUs{pinned}",
        "memory": _mem_total(),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "tokmap_revision": _git_revision(),
        "versions": {lib: _version(lib) for lib in LIBRARIES},
    }


def machine_markdown(info: dict) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    return "\n".join([
        f"- Date: {info['date']}",
        f"- CPU: {info['cpu']}, {info['cpus']}; memory {info['memory']}",
        f"- OS: {info['os']}; Python: {info['python']}",
        f"- tokmap revision: {info['tokmap_revision']}",
        f"- Libraries: {versions}",
    ])


# Markers for the cold-start section that bench/cold_start.py owns inside BENCHMARKS.md;
# bench/run.py keeps whatever is between them when it rewrites the file.
COLD_BEGIN = "<!-- cold-start:begin -->"
COLD_END = "<!-- cold-start:end -->"


def replace_section(doc: str, section: str) -> str:
    """Put `section` (already wrapped in the markers) in place of the old one, or at the end."""
    start, end = doc.find(COLD_BEGIN), doc.find(COLD_END)
    if start != -1 and end > start:
        return doc[:start] + section + doc[end + len(COLD_END):]
    return doc.rstrip("\n") + "\n\n" + section + "\n"


def extract_section(doc: str) -> str | None:
    start, end = doc.find(COLD_BEGIN), doc.find(COLD_END)
    if start != -1 and end > start:
        return doc[start:end + len(COLD_END)]
    return None


def fmt_ratio(x: float | None) -> str:
    """A tokmap/peer ratio for the tables: 12.3×, 0.45×, or 1/N below 0.1."""
    if x is None or not math.isfinite(x):
        return "—"
    if x >= 100:
        return f"{x:,.0f}×"
    if x >= 10:
        return f"{x:.1f}×"
    if x >= 0.1:
        return f"{x:.2f}×"
    return f"1/{1 / x:,.0f}"
