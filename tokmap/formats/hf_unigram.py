"""tokenizer.json readers for the Unigram model, the Precompiled and Nmt normalizers and the Metaspace
pre-tokenizer and decoder (called from hf_json.py; tokenizers 0.23's field rules, CONFORMANCE §0–6).
"""

from __future__ import annotations

import base64
import binascii
import math

from ..definition import UnigramModel

PREPEND_SCHEMES = ("first", "never", "always")


def read_model(ctx, m) -> UnigramModel:
    items = ctx.req(m, "vocab", "model", list)
    if not items:
        ctx.unsupported("model.vocab", "an empty Unigram vocabulary")
    vocab: list[bytes] = []
    scores: list[float] = []
    last: dict[str, int] = {}
    shadowed: list[int] = []
    for i, item in enumerate(items):
        field = f"model.vocab[{i}]"
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], (int, float)) and not isinstance(item[1], bool)):
            ctx.fail(field, f"expected [piece, score], got {item!r}"[:200])
        score = float(item[1])
        if not math.isfinite(score):
            ctx.fail(field, f"score {item[1]!r} is not a finite number")
        piece = item[0]
        if piece in last:  # tokenizers' token_to_ids keeps the last id of a repeated piece
            shadowed.append(last[piece])
        last[piece] = i
        vocab.append(piece.encode("utf-8", "surrogatepass"))
        scores.append(score)
    unk_id = ctx.count(m, "unk_id", "model")
    if unk_id is not None and unk_id >= len(vocab):
        ctx.fail("model.unk_id", f"unk_id {unk_id} is not in the {len(vocab)}-piece vocabulary")
    byte_fallback = ctx.opt(m, "byte_fallback", "model", bool, False)
    return UnigramModel(vocab=vocab, scores=scores, unk_id=unk_id, byte_fallback=byte_fallback, shadowed=shadowed)


def read_normalizer(ctx, n, field, t):
    if t == "Precompiled":
        raw = n.get("precompiled_charsmap")
        if raw is None or raw == "":
            ctx.unsupported(f"{field}.precompiled_charsmap", "a Precompiled normalizer without a charsmap")
        if not isinstance(raw, str):
            ctx.fail(f"{field}.precompiled_charsmap", "expected a base64 string")
        try:
            data = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            ctx.fail(f"{field}.precompiled_charsmap", "not valid base64")
        _check_charsmap(ctx, data, f"{field}.precompiled_charsmap")
        return [{"type": "precompiled", "charsmap": data}]
    if t == "Nmt":
        return [{"type": "nmt"}]
    return None


def _check_charsmap(ctx, data: bytes, field: str) -> None:
    if len(data) < 4:
        ctx.fail(field, "the charsmap is shorter than its 4-byte header")
    size = int.from_bytes(data[:4], "little")
    if size == 0 or size % 4 or 4 + size > len(data):
        ctx.fail(field, f"the charsmap's trie size {size} does not fit its {len(data)} bytes")


def read_metaspace(ctx, p, field) -> dict:
    rep = ctx.req(p, "replacement", field, str)
    if len(rep) != 1:
        ctx.fail(f"{field}.replacement", f"expected one character, got {rep!r}")
    scheme = ctx.opt(p, "prepend_scheme", field, str, "always")
    if scheme not in PREPEND_SCHEMES:
        ctx.fail(f"{field}.prepend_scheme", f"expected one of {PREPEND_SCHEMES}, got {scheme!r}")
    aps = ctx.opt(p, "add_prefix_space", field, bool, None)
    if aps is False:
        # tokenizers: legacy add_prefix_space=false must come with an explicit prepend_scheme "never".
        if scheme != "never":
            ctx.fail(f"{field}.add_prefix_space", "add_prefix_space does not match declared prepend_scheme")
    split = ctx.opt(p, "split", field, bool, True)
    return {"type": "metaspace", "replacement": rep, "prepend_scheme": scheme, "split": split}
