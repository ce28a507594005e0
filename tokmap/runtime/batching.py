"""encode_batch in one process: the model's misses of many documents merged in one batch.

A first encode of a document pays the batch merge's fixed costs (a few dozen numpy calls a round,
~1 ms a call) once per document; a batch of 83 new documents of ~22 KB each (bench/parallel.py's
fresh slices, Llama 3) spent ~400 ms doc by doc where one merge for all of them took ~290 ms.

So encode_each runs every document's pipeline as encode() does, up to the model: a copy of the
pipeline (Pipeline.deferring) records each stretch's pieces instead of encoding them and puts one
DEFERRED marker in the ids in their place. The recorded pieces of a group of documents then go to
the model at once (`encode_piece_groups`, one dict pass and one batch merge for all of their
misses), and each marker is replaced by its pieces' ids. A piece's ids do not depend on its
neighbours or on the cache's state, so the ids are encode()'s, document by document; what the
documents share is only the work.

Only where that holds simply: a model with encode_piece_groups (byte-level BPE), a pipeline with
the one-regex fast path, no truncation or padding in between (they count ids the markers stand
in for). Anything else runs encode() per document. Groups are cut at GROUP_CHARS so that a corpus
passed as one list never holds all of its pieces at once.
"""

from __future__ import annotations

import copy
from gc import disable as gc_disable, enable as gc_enable, isenabled as gc_isenabled

GROUP_CHARS = 1 << 20  # chars of documents whose pieces are merged together (Llama 3: 64K chars
# saved 17% of the doc-by-doc time, 256K 23%, 1M 27%, all at once 28%)


class _Deferred:
    __slots__ = ()

    def __repr__(self):
        return "DEFERRED"


DEFERRED = _Deferred()  # stands in a document's ids for one stretch's pieces, until encode_each fills it


def batchable(tok) -> bool:
    """Whether tok's encode() can defer its model calls (see the module docstring)."""
    if tok.api not in ("hf", "tiktoken", "tekken"):
        return False
    if tok.api == "hf" and (tok.meta.get("truncation") or tok.meta.get("padding")):
        return False
    return tok.pipeline.fast_split is not None and hasattr(tok.model, "encode_piece_groups")


def encode_each(tok, texts: list, add_special_tokens: bool, kwargs: dict) -> list[list[int]]:
    """[tok.encode(t, add_special_tokens, **kwargs) for t in texts], each group's misses merged
    together. Errors are encode()'s, raised for the first document in order that has one."""
    if len(texts) < 2 or not batchable(tok):
        return [tok.encode(t, add_special_tokens, **kwargs) for t in texts]
    out: list = []
    start = 0
    while start < len(texts):
        end, size = start, 0
        while end < len(texts) and (end == start or size < GROUP_CHARS):
            t = texts[end]
            size += len(t) if type(t) is str else 0  # (not a str: encode() says so, in order)
            end += 1
        out += _encode_group(tok, texts[start:end], add_special_tokens, kwargs)
        start = end
    return out


def _encode_group(tok, texts: list, add_special_tokens: bool, kwargs: dict) -> list[list[int]]:
    groups: list = []
    twin = copy.copy(tok)  # (shallow: the same file, model and caches; only its pipeline differs)
    twin._pipeline = tok.pipeline.deferring(groups)
    plans = [twin.encode(t, add_special_tokens, **kwargs) for t in texts]
    if not groups:
        return plans
    filled = iter(_fill(tok, groups))
    return [_resolve(ids, filled) for ids in plans]


def _fill(tok, groups: list) -> list[list[int]]:
    """The recorded groups' ids, the collector paused as encode() pauses it for a long text."""
    paused = gc_isenabled()
    if paused:
        gc_disable()
    try:
        return tok._guarded_groups(groups)
    finally:
        if paused:
            gc_enable()


def _resolve(ids: list, filled) -> list[int]:
    """A planned document's ids with each DEFERRED replaced by its group's ids."""
    n = ids.count(DEFERRED)
    if not n:
        return ids
    if n == 1 and ids[-1] is DEFERRED:  # (the usual: [marker] or [BOS, marker])
        got = next(filled)
        if len(ids) > 1:
            got[:0] = ids[:-1]
        return got
    out: list = []
    for x in ids:
        if x is DEFERRED:
            out += next(filled)
        else:
            out.append(x)
    return out
