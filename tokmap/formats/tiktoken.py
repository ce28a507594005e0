"""Read an OpenAI .tiktoken rank file (plus a named encoding's pattern and specials) into a TokenizerDef.

A .tiktoken file holds only `base64(token) rank` lines; the split pattern and special tokens live in
tiktoken's code. They are chosen by an explicit encoding name or by the file's published sha256 —
never guessed from the vocabulary size. Merges are rebuilt from the ranks: tiktoken merges any
adjacent pair whose concatenation is a token, ranked as that token, so every split of a token into
two tokens becomes a merge with the token's rank.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os

from ..definition import AddedToken, BPEModel, TokenizerDef, sparse_id_limit
from ..errors import SourceError

_ENDOFTEXT = "<|endoftext|>"
_FIM = {"<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260}
_R50K = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
_CL100K = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|"""
           r"""\s*[\r\n]|\s+(?!\S)|\s""")
_O200K = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

# name -> (published sha256 of the rank file, split pattern, special tokens)
ENCODINGS = {
    "r50k_base": ("306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930", _R50K, {_ENDOFTEXT: 50256}),
    "p50k_base": ("94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069", _R50K, {_ENDOFTEXT: 50256}),
    "cl100k_base": ("223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7", _CL100K,
                    {_ENDOFTEXT: 100257, **_FIM, "<|endofprompt|>": 100276}),
    "o200k_base": ("446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d", _O200K,
                   {_ENDOFTEXT: 199999, "<|endofprompt|>": 200018}),
}
ALIASES = {"gpt2": "r50k_base"}
BY_SHA256 = {sha: name for name, (sha, _p, _s) in ENCODINGS.items()}


def parse_ranks(path, data: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    line_of_rank: dict[int, int] = {}
    for lineno, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise SourceError(path, f"expected 'base64 rank', got {line[:60]!r}", line=lineno)
        try:
            token = base64.b64decode(parts[0], validate=True)
        except (binascii.Error, ValueError):
            raise SourceError(path, f"bad base64 {parts[0][:60]!r}", line=lineno) from None
        if not parts[1].isdigit():
            raise SourceError(path, f"bad rank {parts[1][:20]!r}", line=lineno)
        rank = int(parts[1])
        if rank >= 1 << 31:
            raise SourceError(path, f"rank {rank} is too large", line=lineno)
        if token in ranks:
            raise SourceError(path, f"token {token!r} appears twice", line=lineno)
        if rank in line_of_rank:
            raise SourceError(path, f"rank {rank} is also given on line {line_of_rank[rank]}", line=lineno)
        line_of_rank[rank] = lineno
        ranks[token] = rank
    if not ranks:
        raise SourceError(path, "no ranks in file", line=1)
    return ranks


def model_from_ranks(path, ranks: dict[bytes, int]) -> BPEModel:
    n = max(ranks.values()) + 1
    if n > sparse_id_limit(len(ranks)):
        raise SourceError(path, f"rank {n - 1} is far beyond the {len(ranks)}-token vocabulary "
                          "(a sparse vocabulary is refused)")
    vocab: list[bytes | None] = [None] * n
    for tok, r in ranks.items():
        if vocab[r] is not None:
            raise SourceError(path, f"rank {r} is given to both {vocab[r]!r} and {tok!r}")
        vocab[r] = tok
    for b in range(256):
        if bytes([b]) not in ranks:
            raise SourceError(path, f"byte 0x{b:02x} has no rank: tiktoken could not encode it")
    merges = []
    for tok, r in ranks.items():
        for k in range(1, len(tok)):
            left, right = ranks.get(tok[:k]), ranks.get(tok[k:])
            if left is not None and right is not None:
                merges.append((left, right, r, r))
    merges.sort(key=lambda m: (m[3], m[0], m[1]))
    return BPEModel(vocab=vocab, merges=merges, byte_level=True, ignore_merges=True)


def resolve_encoding(path, sha256: str, encoding: str | None) -> str:
    if encoding is not None:
        name = ALIASES.get(encoding, encoding)
        if name not in ENCODINGS:
            raise SourceError(path, f"unknown tiktoken encoding {encoding!r}; known: {sorted(ENCODINGS)}")
        return name
    if sha256 in BY_SHA256:
        return BY_SHA256[sha256]
    raise SourceError(path, "this .tiktoken file is not a published encoding (sha256 "
                      f"{sha256[:12]}…), so its split pattern and special tokens are unknown: "
                      f"pass the encoding name (tok-export --encoding NAME; one of {sorted(ENCODINGS)})")


def read(path, data: bytes | None = None, encoding: str | None = None) -> TokenizerDef:
    path = os.fspath(path)
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    sha = hashlib.sha256(data).hexdigest()
    name = resolve_encoding(path, sha, encoding)
    _sha, pattern, specials = ENCODINGS[name]
    model = model_from_ranks(path, parse_ranks(path, data))
    added = [AddedToken(id=i, content=s, special=True) for s, i in sorted(specials.items(), key=lambda kv: kv[1])]
    return TokenizerDef(
        source_format="tiktoken", source_path=path, source_sha256=sha, api="tiktoken", model=model,
        added_tokens=added,
        pre_tokenizer=[{"type": "split", "pattern": pattern, "literal": False, "flavor": "fancy",
                        "behavior": "isolated", "invert": False}],
        decoder=[{"type": "bytes"}],
        extra={"encoding": name},
    )
