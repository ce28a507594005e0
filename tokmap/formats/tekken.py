"""Read a Mistral Tekken tokenizer json into a TokenizerDef.

Tekken is tiktoken inside one json: base64 token bytes by rank, the split pattern, and special
tokens that take the first `default_num_special_tokens` ids (ordinary tokens are shifted up by that
many). As in mistral-common, text is encoded with no special-token matching at all, the vocabulary
is cut to `default_vocab_size - num_special`, and files up to v7 without a special-token list get
the historical one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os

from ..definition import AddedToken, TokenizerDef
from ..errors import SourceError, UnsupportedError
from . import jsondoc
from .tiktoken import model_from_ranks

# The special-token list mistral-common assumes for files (<= v7) that carry none.
LEGACY_SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                   "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]",
                   "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
                   "[TOOL_CONTENT]"]
VERSIONS = ["v1", "v2", "v3", "v7", "v11", "v13", "v15"]


def read(path, data: bytes | None = None) -> TokenizerDef:
    path = os.fspath(path)
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    doc = jsondoc.parse(path, data, lone_surrogates=True)  # (mistral-common reads it with Python's json)
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict) or not isinstance(doc.get("vocab"), list):
        raise SourceError(path, "not a Tekken file: expected an object with 'config' and 'vocab'", field="(top level)")
    cfg = doc["config"]
    for key, typ in (("pattern", str), ("default_vocab_size", int), ("default_num_special_tokens", int)):
        if not isinstance(cfg.get(key), typ):
            raise SourceError(path, f"missing or not {typ.__name__}", field=f"config.{key}")
    jsondoc.utf8_text(path, cfg["pattern"], "config.pattern")
    version = cfg.get("version")
    if version not in VERSIONS:
        raise UnsupportedError(path, f"unknown Tekken version {version!r}; known: {VERSIONS}", field="config.version")
    n_special = cfg["default_num_special_tokens"]
    inner = cfg["default_vocab_size"] - n_special
    vocab = doc["vocab"]
    if inner < 256 or inner > len(vocab):
        raise SourceError(path, f"default_vocab_size - num_special = {inner} does not fit the {len(vocab)}-token vocab",
                          field="config.default_vocab_size")
    ranks: dict[bytes, int] = {}
    for i, entry in enumerate(vocab[:inner]):
        if not isinstance(entry, dict) or entry.get("rank") != i or not isinstance(entry.get("token_bytes"), str):
            raise SourceError(path, f"entry must be {{rank: {i}, token_bytes: base64}}", field=f"vocab[{i}]")
        try:
            tok = base64.b64decode(entry["token_bytes"], validate=True)
        except (binascii.Error, ValueError):
            raise SourceError(path, "bad base64", field=f"vocab[{i}].token_bytes") from None
        if tok in ranks:
            raise SourceError(path, f"token {tok!r} repeats vocab[{ranks[tok]}]", field=f"vocab[{i}]")
        ranks[tok] = i
    specials = doc.get("special_tokens")
    if specials is None:
        if VERSIONS.index(version) > VERSIONS.index("v7"):
            raise SourceError(path, f"a {version} file must list its special tokens", field="special_tokens")
        names = list(LEGACY_SPECIALS)
    else:
        if not isinstance(specials, list):
            raise SourceError(path, "expected a list", field="special_tokens")
        names = []
        for i, s in enumerate(specials):
            if not isinstance(s, dict) or s.get("rank") != i or not isinstance(s.get("token_str"), str):
                raise SourceError(path, f"entry must be {{rank: {i}, token_str: ...}}", field=f"special_tokens[{i}]")
            names.append(jsondoc.utf8_text(path, s["token_str"], f"special_tokens[{i}].token_str"))
    if len(names) > n_special:
        raise SourceError(path, f"{len(names)} special tokens but only {n_special} ids", field="special_tokens")
    names += [f"<SPECIAL_{i}>" for i in range(len(names), n_special)]
    if len(set(names)) != len(names):
        raise SourceError(path, "special token strings repeat", field="special_tokens")
    base = model_from_ranks(path, ranks)
    # Shift ordinary tokens above the specials: id = rank + n_special.
    base.vocab = [None] * n_special + base.vocab
    base.merges = [(a + n_special, b + n_special, r + n_special, rank) for a, b, r, rank in base.merges]
    added = [AddedToken(id=i, content=s, special=True) for i, s in enumerate(names)]
    return TokenizerDef(
        source_format="tekken", source_path=path, source_sha256=hashlib.sha256(data).hexdigest(), api="tekken",
        model=base, added_tokens=added,
        pre_tokenizer=[{"type": "split", "pattern": cfg["pattern"], "literal": False, "flavor": "fancy",
                        "behavior": "isolated", "invert": False}],
        decoder=[{"type": "bytes"}],
        extra={"version": version, "num_special": n_special, "bos_id": names.index("<s>") if "<s>" in names else None,
               "eos_id": names.index("</s>") if "</s>" in names else None},
    )
