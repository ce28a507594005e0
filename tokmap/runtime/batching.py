"""encode_batch in one process: the model's misses of many documents merged in one batch.

A first encode of a document pays the batch merge's fixed costs (a few dozen numpy calls a round)
once per document; a batch of 83 new documents of ~22 KB each (bench/parallel.py's fresh slices,
Llama 3) spent ~400 ms doc by doc where one merge for all of them took ~290 ms.

So encode_each runs every document's pipeline as encode() does, up to the model: a copy of the
tokenizer whose pipeline hands the model's input to a recorder instead, which puts a DEFERRED
marker in the ids in place of what the model would have given. The recorded input of a group of
documents then goes to the model in one call, and each marker is replaced by its share of the
result. A piece's (or word's) ids do not depend on its neighbours or on the cache's state, so the
ids are encode()'s, document by document; what the documents share is only the work.

Two places to record, by the pipeline's shape (`kind`):
- "pieces": byte-level BPE over the one-regex fast split (Pipeline._piece_ids). Each stretch's
  pieces are one group and one marker; BPE.encode_piece_groups fills all groups at once.
- "words": char-level BPE over fastpath.py's whole-stretch path (Llama 2, Gemma 3). Each word
  handed to the model is one marker; CharBPE.encode_word_parts fills all of them at once.
Anything else (other models, truncation or padding in between, which count ids the markers stand
in for) runs encode() per document. Groups are cut at GROUP_CHARS so that a corpus passed as one
list never holds all of its pieces at once.
"""

from __future__ import annotations

import copy

from .models import concat

GROUP_CHARS = 1 << 20  # chars of documents whose model input is merged together (Llama 3: 64K
# chars saved 17% of the doc-by-doc time, 256K 23%, 1M 27%, all at once 28%)
MIN_CHARS = 1 << 12  # a smaller batch runs encode() per document: a group's set-up (two shallow
# copies, ~20 us) would double the time of four short sentences, whose few new pieces would not merge
# in a batch anyway (bpe.BATCH_BYTES)


class _Deferred:
    __slots__ = ()

    def __repr__(self):
        return "DEFERRED"


DEFERRED = _Deferred()  # stands in a document's ids for what the model has not given yet
_ONE = (DEFERRED,)


def batch_kind(tok) -> str | None:
    """"pieces", "words" or None (encode() per document): see the module docstring."""
    if tok.api not in ("hf", "tiktoken", "tekken"):
        return None
    if tok.api == "hf" and (tok.meta.get("truncation") or tok.meta.get("padding")):
        return None
    pipe, model = tok.pipeline, tok.model
    if pipe.fast_split is not None:
        return "pieces" if hasattr(model, "encode_piece_groups") else None
    if pipe.fast is not None and hasattr(model, "encode_word_parts"):
        return "words"
    return None


def encode_each(tok, texts: list, add_special_tokens: bool, kwargs: dict) -> list[list[int]]:
    """[tok.encode(t, add_special_tokens, **kwargs) for t in texts], each group's model input
    merged together. Errors are encode()'s, raised for the first document in order that has one."""
    big = len(texts) > 1 and sum(len(t) for t in texts if type(t) is str) >= MIN_CHARS
    kind = batch_kind(tok) if big else None
    if kind is None:
        return [tok.encode(t, add_special_tokens, **kwargs) for t in texts]
    out: list = []
    start = 0
    while start < len(texts):
        end, size = start, 0
        while end < len(texts) and (end == start or size < GROUP_CHARS):
            t = texts[end]
            size += len(t) if type(t) is str else 0  # (not a str: encode() says so, in order)
            end += 1
        out += _encode_group(tok, kind, texts[start:end], add_special_tokens, kwargs)
        start = end
    return out


def _encode_group(tok, kind: str, texts: list, add_special_tokens: bool, kwargs: dict) -> list[list[int]]:
    recorded: list = []
    twin = _recording(tok, kind, recorded)
    plans = [twin.encode(t, add_special_tokens, **kwargs) for t in texts]
    if not recorded:
        return plans
    filled = iter(tok._fill_deferred(recorded, kind))
    owned = kind == "pieces"  # (encode_piece_groups makes a new list a group; word parts may be cached tuples)
    return [_resolve(ids, filled, owned) for ids in plans]


def _recording(tok, kind: str, recorded: list):
    """A shallow copy of tok (the same file, model and caches) whose pipeline records the model's
    input in `recorded` and gives markers in its place."""
    from . import fastpath

    pipe = copy.copy(tok.pipeline)
    if kind == "pieces":
        # A stretch whose pieces are all cached takes its ids at once, as encode() would: deferred,
        # its pieces would be looked up again after the whole group was split, out of the CPU's
        # caches by then (Llama 3 on a cached 1.8 MB batch: 77 -> 87 ms).
        split, runs, cached = pipe._split_runs, pipe.runs, tok.model.cached_ids

        def piece_ids(text: str) -> list:
            pieces, long = split(text, runs)
            if long is None:
                ids = cached(pieces)
                if ids is not None:
                    return ids
            recorded.append((pieces, long))
            return [DEFERRED]

        pipe._piece_ids = piece_ids
    else:
        pipe.model = _WordRecorder(tok.model, recorded)
        pipe.fast = fastpath.build(pipe)
    twin = copy.copy(tok)
    twin._pipeline = pipe
    twin._plain = False  # (encode's short path is bound to tok's own pipeline: it would go around the recorder)
    return twin


class _WordRecorder:
    """The model as fastpath.py sees it, recording the words it is given unless all of them are
    cached (CharBPE's encode_words is encode_word_parts joined, so one marker a word serves both)."""

    def __init__(self, model, recorded: list):
        self._model, self._recorded = model, recorded

    def __getattr__(self, name):
        return getattr(self._model, name)

    def encode_words(self, words: list[str]) -> list:
        parts = self._model.cached_parts(words)
        if parts is not None:  # (all cached: at once, as for "pieces" above)
            return parts[0] if len(parts) == 1 else concat(parts)
        self._recorded.extend(words)
        return [DEFERRED] * len(words)

    def encode_word_parts(self, words: list[str]) -> list:
        parts = self._model.cached_parts(words)
        if parts is not None:
            return parts
        self._recorded.extend(words)
        return [_ONE] * len(words)


def _resolve(ids: list, filled, owned: bool) -> list[int]:
    """A planned document's ids with each DEFERRED replaced by the next filled ids. owned: those
    are new lists, which this document may take and change."""
    n = ids.count(DEFERRED)
    if not n:
        return ids
    if owned and n == 1 and ids[-1] is DEFERRED:  # (the usual: [marker] or [BOS, marker])
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
