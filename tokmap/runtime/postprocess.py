"""Post-processing as tokenizers does it: truncation, ByteLevel offset trimming, templates, padding."""

from __future__ import annotations

WS = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
               "\u2028\u2029\u202f\u205f\u3000")


def _template(post):
    for s in post:
        if s["type"] == "template":
            return s
    return None


def added_count(post, is_pair: bool) -> int:
    t = _template(post)
    if t is None:
        return 0
    return sum(len(t["special_tokens"][p["special"]]["ids"]) for p in t["pair" if is_pair else "single"]
               if "special" in p)


def specials_around(post) -> tuple[list[int], list[int]] | None:
    """(ids before, ids after) the sequence in the template for one sequence, when it holds the
    sequence exactly once (the usual case; worked out once per pipeline), else None."""
    t = _template(post)
    if t is None:
        return [], []
    seq = [k for k, p in enumerate(t["single"]) if "special" not in p]
    if len(seq) != 1:
        return None
    ids_of = [t["special_tokens"][p["special"]]["ids"] if "special" in p else [] for p in t["single"]]
    return [i for x in ids_of[:seq[0]] for i in x], [i for x in ids_of[seq[0] + 1:] for i in x]


def add_specials_ids(post, ids: list[int], add_special_tokens: bool) -> list[int]:
    """Fast path for encode(): the template's ids around one sequence."""
    t = _template(post)
    if t is None or not add_special_tokens:
        return ids
    out: list[int] = []
    for p in t["single"]:
        if "special" in p:
            out.extend(t["special_tokens"][p["special"]]["ids"])
        else:
            out.extend(ids)
    return out


def make_encoding(ids, offsets, type_id=0):
    from .tokenizer import Encoding

    n = len(ids)
    return Encoding(list(ids), [type_id] * n, list(offsets), [0] * n, [1] * n)


def _slice(enc, a, b):
    from .tokenizer import Encoding

    return Encoding(enc.ids[a:b], enc.type_ids[a:b], enc.offsets[a:b], enc.special_tokens_mask[a:b],
                    enc.attention_mask[a:b])


def truncate(enc, max_len: int, stride: int, direction: str):
    """tokenizers' Encoding::truncate: the kept window plus overflowing windows stepping by max-stride."""
    n = len(enc.ids)
    if max_len >= n:
        return enc
    if max_len == 0:
        empty = make_encoding([], [])
        empty.overflowing = [enc]
        return empty
    step = max_len - stride
    ranges = []
    if direction == "right":
        for start in range(0, n, step):
            stop = min(start + max_len, n)
            ranges.append((start, stop))
            if stop == n:
                break
    else:
        for stop1 in range(n - 1, -1, -step):
            stop = stop1 + 1
            start = max(stop - max_len, 0)
            ranges.append((start, stop))
            if start == 0:
                break
    main = _slice(enc, *ranges[0])
    main.overflowing = [_slice(enc, a, b) for a, b in ranges[1:]]
    return main


def truncate_pair(a, b, trunc, budget):
    """Returns (a, b) truncated per strategy, each with its overflowing windows (truncate_encodings)."""
    from ..errors import EncodeError

    na, nb = len(a.ids), len(b.ids) if b is not None else 0
    if budget == 0:
        return truncate(a, 0, trunc["stride"], trunc["direction"]), \
            (truncate(b, 0, trunc["stride"], trunc["direction"]) if b is not None else None)
    if na + nb <= budget:
        return a, b
    to_remove = na + nb - budget
    stride, direction, strategy = trunc["stride"], trunc["direction"], trunc["strategy"]
    if strategy == "LongestFirst":
        if b is None:
            return truncate(a, budget, stride, direction), None
        n1, n2 = sorted((na, nb))
        n2 = n1 if n1 > budget else max(n1, budget - n1)
        if n1 + n2 > budget:
            n1 = budget // 2
            n2 = n1 + budget % 2
        la, lb = (n2, n1) if na > nb else (n1, n2)
        return truncate(a, la, stride, direction), truncate(b, lb, stride, direction)
    if strategy == "OnlySecond" and b is None:
        raise EncodeError("truncation OnlySecond: a second sequence is needed to truncate")
    target = a if strategy == "OnlyFirst" else b
    n = len(target.ids)
    if n <= to_remove or n - to_remove <= stride:
        raise EncodeError(f"truncation {strategy}: the sequence to truncate is too short for max_length")
    cut = truncate(target, n - to_remove, stride, direction)
    return (cut, b) if strategy == "OnlyFirst" else (a, cut)


def trim_byte_level_offsets(enc, tokens, add_prefix_space: bool):
    for k, tok in enumerate(tokens):
        lead = 0
        for c in tok:
            if c == "\u0120" or c in WS:
                lead += 1
            else:
                break
        trail = 0
        for c in reversed(tok):
            if c == "\u0120" or c in WS:
                trail += 1
            else:
                break
        s, e = enc.offsets[k]
        if lead:
            if (k == 0 or s == 0) and add_prefix_space and lead == 1:
                lead = 0
            s = min(s + lead, e)
        if trail and e >= trail:
            e = max(e - trail, s)
        enc.offsets[k] = (s, e)


def _clone(e):
    from .tokenizer import Encoding

    return Encoding(list(e.ids), list(e.type_ids), list(e.offsets), list(e.special_tokens_mask),
                    list(e.attention_mask), [_clone(o) for o in e.overflowing])


def merge_with(x, y):
    """tokenizers' Encoding::merge_with: concatenate, and combine the overflowing parts of both
    (each of x's with y and with each of y's, then x with each of y's), recursively."""
    over = []
    for xo in x.overflowing:
        n = _clone(xo)
        merge_with(n, _clone(y))
        over.append(n)
        for yo in y.overflowing:
            n = _clone(xo)
            merge_with(n, _clone(yo))
            over.append(n)
    for yo in y.overflowing:
        n = _clone(x)
        merge_with(n, _clone(yo))
        over.append(n)
    x.ids += y.ids
    x.type_ids += y.type_ids
    x.offsets += y.offsets
    x.special_tokens_mask += y.special_tokens_mask
    x.attention_mask += y.attention_mask
    x.overflowing = over


def apply_template(post, a, b, add_special_tokens):
    """The template's pieces as encodings (specials carry no overflowing), merged left to right."""
    from .tokenizer import Encoding

    t = _template(post)
    if t is None:
        parts = [a] if b is None else [a, b]
        if b is not None:
            b.type_ids = [1] * len(b.ids)
    else:
        parts = []
        for p in t["pair" if b is not None else "single"]:
            if "special" in p:
                if add_special_tokens:
                    ids = list(t["special_tokens"][p["special"]]["ids"])
                    n = len(ids)
                    parts.append(Encoding(ids, [p["type_id"]] * n, [(0, 0)] * n, [1] * n, [1] * n))
            else:
                seq = _clone(a if p["sequence"] == "A" else b)
                seq.type_ids = [p["type_id"]] * len(seq.ids)
                parts.append(seq)
    out = Encoding([], [], [], [], [])
    for part in parts:
        merge_with(out, part)
    return out


def finish(meta, post, a, b, add_special_tokens, tokens_of=None):
    trunc = meta.get("truncation")
    if trunc:
        budget = trunc["max_length"] - (added_count(post, b is not None) if add_special_tokens else 0)
        a, b = truncate_pair(a, b, trunc, max(budget, 0))
    for s in post:
        if s["type"] == "byte_level" and s["trim_offsets"] and tokens_of is not None:
            for e in [a, b] if b is not None else [a]:
                for x in [e] + e.overflowing:
                    trim_byte_level_offsets(x, tokens_of(x.ids), s["add_prefix_space"])
    enc = apply_template(post, a, b, add_special_tokens)
    pad = meta.get("padding")
    if pad and pad["length"] is not None:
        enc = pad_to(enc, pad, pad["length"])
    return enc


def pad_to(enc, pad, length):
    m = pad.get("pad_to_multiple_of")
    if m:
        length = (length + m - 1) // m * m
    n = length - len(enc.ids)
    if n <= 0:
        return enc
    ids, tt, off, sm, am = ([pad["pad_id"]] * n, [pad["pad_type_id"]] * n, [(0, 0)] * n, [1] * n, [0] * n)
    if pad["direction"] == "right":
        enc.ids += ids; enc.type_ids += tt; enc.offsets += off; enc.special_tokens_mask += sm
        enc.attention_mask += am
    else:
        enc.ids[:0] = ids; enc.type_ids[:0] = tt; enc.offsets[:0] = off; enc.special_tokens_mask[:0] = sm
        enc.attention_mask[:0] = am
    enc.overflowing = [pad_to(o, pad, length) for o in enc.overflowing]
    return enc


def pad_batch(encs, pad):
    length = pad["length"] if pad["length"] is not None else max((len(e.ids) for e in encs), default=0)
    return [pad_to(e, pad, length) for e in encs]
