"""Read a Hugging Face tokenizer.json into a TokenizerDef.

Only parses and validates: every component is mapped to tokmap's own tagged steps, and any
component or option this version cannot reproduce exactly is refused with UnsupportedError naming
the JSON field, never skipped. The rules followed are tokenizers 0.23's (see CONFORMANCE.md).
"""

from __future__ import annotations

import hashlib
import os

from .. import bytelevel
from ..definition import AddedToken, BPEModel, TokenizerDef
from ..errors import SourceError, UnsupportedError
from . import jsondoc

BEHAVIORS = {
    "Removed": "removed",
    "Isolated": "isolated",
    "MergedWithPrevious": "merged_with_previous",
    "MergedWithNext": "merged_with_next",
    "Contiguous": "contiguous",
}


class _Ctx:
    def __init__(self, path):
        self.path = path

    def fail(self, field, msg):
        raise SourceError(self.path, msg, field=field)

    def unsupported(self, field, msg):
        raise UnsupportedError(self.path, msg + " (tokmap refuses what it cannot reproduce exactly)", field=field)

    def req(self, obj, key, field, types):
        path = f"{field}.{key}" if field else key
        if not isinstance(obj, dict) or key not in obj:
            self.fail(path, "required field is missing")
        val = obj[key]
        if not isinstance(val, types) or (isinstance(val, bool) and bool not in _as_tuple(types)):
            self.fail(path, f"expected {_names(types)}, got {type(val).__name__}")
        return val

    def count(self, obj, key, field, default=None, required=False):
        """A non-negative integer (tokenizers' usize/u32 fields)."""
        val = self.req(obj, key, field, int) if required else self.opt(obj, key, field, int, default)
        if val is not None and val < 0:
            self.fail(f"{field}.{key}", f"expected a non-negative integer, got {val}")
        return val

    def opt(self, obj, key, field, types, default):
        if key not in obj or obj[key] is None:
            return default
        return self.req(obj, key, field, types)


def _as_tuple(t):
    return t if isinstance(t, tuple) else (t,)


def _names(t):
    return " or ".join(x.__name__ for x in _as_tuple(t))


def read(path, data: bytes | None = None, chat_template: str | None = None) -> TokenizerDef:
    path = os.fspath(path)
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    ctx = _Ctx(path)
    doc = jsondoc.parse(path, data)
    if not isinstance(doc, dict):
        ctx.fail("(top level)", "expected a JSON object")
    version = doc.get("version", "1.0")
    if version != "1.0":
        ctx.unsupported("version", f"tokenizer.json version {version!r}; only \"1.0\" exists")

    normalizer = _read_normalizer(ctx, doc.get("normalizer"), "normalizer")
    pre = _read_pre_tokenizer(ctx, doc.get("pre_tokenizer"), "pre_tokenizer")
    # Without a ByteLevel pre-tokenizer the BPE symbols are characters (SentencePiece-style BPE).
    byte_level = any(s["type"] == "byte_level" for s in pre)
    model = _read_model(ctx, ctx.req(doc, "model", "", dict), byte_level)
    added = _read_added(ctx, [] if doc.get("added_tokens") is None else doc["added_tokens"], model)
    post = _read_post(ctx, doc.get("post_processor"), "post_processor")
    decoder = _read_decoder(ctx, doc.get("decoder"), "decoder")
    if isinstance(model, BPEModel) and not byte_level and any(s["type"] == "byte_level" for s in decoder):
        ctx.unsupported("decoder", "a ByteLevel decoder over a character-level BPE (no ByteLevel pre-tokenizer)")
    padding = _read_padding(ctx, doc.get("padding"))
    truncation = _read_truncation(ctx, doc.get("truncation"))
    return TokenizerDef(
        source_format="hf_json",
        source_path=path,
        source_sha256=hashlib.sha256(data).hexdigest(),
        api="hf",
        model=model,
        added_tokens=added,
        normalizer=normalizer,
        pre_tokenizer=pre,
        post_processor=post,
        decoder=decoder,
        padding=padding,
        truncation=truncation,
        chat_template=chat_template,
    )


def _read_model(ctx, m, byte_level=True) -> BPEModel:
    mtype = m.get("type", "BPE" if "merges" in m else None)
    if mtype in ("WordPiece", "WordLevel"):
        from .hf_bert import read_model

        return read_model(ctx, m, mtype)
    if mtype == "Unigram" or (mtype is None and "vocab" in m and isinstance(m.get("vocab"), list)):
        from .hf_unigram import read_model as read_unigram

        return read_unigram(ctx, m)
    if mtype != "BPE":
        ctx.unsupported("model.type", f"model {mtype!r} is not supported yet (BPE only)")
    if m.get("dropout") not in (None, 0, 0.0):
        ctx.unsupported("model.dropout", "BPE dropout is random at encode time")
    affixes = {}
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        affixes[key] = ctx.opt(m, key, "model", str, None)
        if affixes[key] and byte_level:
            ctx.unsupported(f"model.{key}", f"{key} {m[key]!r} with a ByteLevel pre-tokenizer is not supported yet")
    byte_fallback = ctx.opt(m, "byte_fallback", "model", bool, False)
    fuse_unk = ctx.opt(m, "fuse_unk", "model", bool, False)
    if byte_fallback and byte_level:
        ctx.unsupported("model.byte_fallback", "byte_fallback with a ByteLevel pre-tokenizer is not supported yet")
    from .hf_bert import _vocab

    # Ids are validated (and refused when sparse or shared) once, in the common vocab reader.
    vocab_obj, utf8 = _vocab(ctx, m)
    vocab: list[bytes | None] = [None] * len(utf8)
    irregular: dict[str, int] = {}
    for tok, tid in vocab_obj.items():
        b = bytelevel.to_bytes(tok) if byte_level else utf8[tid]
        if b is None:
            irregular[tok] = tid
            b = utf8[tid]
        vocab[tid] = b
    merges_raw = ctx.req(m, "merges", "model", list)
    pair_rank: dict[tuple[int, int], tuple[int, int]] = {}
    for rank, item in enumerate(merges_raw):
        field = f"model.merges[{rank}]"
        if isinstance(item, str):
            if item.startswith("#version"):
                continue
            parts = item.split(" ")
            if len(parts) != 2:
                ctx.fail(field, f"merge {item!r} must be two tokens separated by one space")
        elif isinstance(item, list) and len(item) == 2 and all(isinstance(p, str) for p in item):
            parts = item
        else:
            ctx.fail(field, f"merge must be \"a b\" or [\"a\", \"b\"], got {item!r}")
        a, b = parts
        for side in (a, b):
            if side not in vocab_obj:
                ctx.fail(field, f"merge {a!r} + {b!r}: token {side!r} is not in model.vocab")
        # tokenizers strips len(prefix) bytes from the right side blindly, whatever they are.
        joined = a + _strip_bytes(b, len((affixes["continuing_subword_prefix"] or "").encode("utf-8")))
        if joined is None or joined not in vocab_obj:
            ctx.fail(field, f"merge {a!r} + {b!r}: result {joined!r} is not in model.vocab")
        # A repeated pair takes the rank of its last occurrence, as tokenizers' HashMap insert does.
        pair_rank[(vocab_obj[a], vocab_obj[b])] = (rank, vocab_obj[joined])
    by_rank = sorted((r, pair, res) for pair, (r, res) in pair_rank.items())
    merges = [(pair[0], pair[1], res, r) for r, pair, res in by_rank]
    unk = ctx.opt(m, "unk_token", "model", str, None)
    unk_id = None
    if unk is not None:
        if unk not in vocab_obj:
            ctx.fail("model.unk_token", f"unk token {unk!r} is not in model.vocab")
        unk_id = vocab_obj[unk]
    return BPEModel(vocab=vocab, merges=merges, byte_level=byte_level,
                    ignore_merges=bool(m.get("ignore_merges", False)), unk_id=unk_id, irregular=irregular,
                    byte_fallback=byte_fallback, fuse_unk=fuse_unk, **affixes)


def _strip_bytes(s: str, n: int):
    """s without its first n UTF-8 bytes, or None when that cuts a char (tokenizers would fail)."""
    try:
        return s.encode("utf-8", "surrogatepass")[n:].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


def _read_added(ctx, items, model: BPEModel) -> list[AddedToken]:
    if not isinstance(items, list):
        ctx.fail("added_tokens", "expected a list")
    model_ids = {}
    for i, b in enumerate(model.vocab):
        if b is not None:
            model_ids[bytelevel.to_str(b) if model.byte_level else b.decode("utf-8", "surrogatepass")] = i
    model_ids.update(model.irregular)
    model_count = sum(1 for b in model.vocab if b is not None)
    out: list[AddedToken] = []
    by_content: dict[str, AddedToken] = {}
    max_added = -1
    for i, t in enumerate(items):
        field = f"added_tokens[{i}]"
        if not isinstance(t, dict):
            ctx.fail(field, "expected an object")
        content = ctx.req(t, "content", field, str)
        flags = {k: ctx.req(t, k, field, bool) for k in ("single_word", "lstrip", "rstrip", "normalized", "special")}
        ctx.req(t, "id", field, int)
        if content == "":
            continue
        if content in by_content:  # a repeated entry updates the flags of the first
            tok = by_content[content]
            for k, v in flags.items():
                setattr(tok, k, v)
            continue
        # The JSON id is not authoritative: tokenizers reuses the model id of known content and
        # otherwise takes max(model vocab size, largest added id + 1).
        tid = model_ids.get(content)
        if tid is None:
            tid = max(model_count, max_added + 1)
        max_added = max(max_added, tid)
        tok = AddedToken(id=tid, content=content, **flags)
        by_content[content] = tok
        out.append(tok)
    return out


def _read_normalizer(ctx, n, field) -> list[dict]:
    if n is None:
        return []
    if not isinstance(n, dict):
        ctx.fail(field, "expected an object or null")
    t = n.get("type")
    if t == "Sequence":
        steps = []
        for i, sub in enumerate(ctx.req(n, "normalizers", field, list)):
            steps += _read_normalizer(ctx, sub, f"{field}.normalizers[{i}]")
        return steps
    if t in ("NFC", "NFD", "NFKC", "NFKD"):
        return [{"type": "unicode", "form": t}]
    from .hf_bert import read_normalizer

    bert_steps = read_normalizer(ctx, n, field, t)
    if bert_steps is not None:
        return bert_steps
    if t in ("Precompiled", "Nmt"):
        from .hf_unigram import read_normalizer as read_spm_normalizer

        return read_spm_normalizer(ctx, n, field, t)
    if t == "Prepend":
        return [{"type": "prepend", "prepend": ctx.req(n, "prepend", field, str)}]
    if t == "Replace":
        pattern, literal = _read_pattern(ctx, n, field)
        return [{"type": "replace", "pattern": pattern, "literal": literal,
                 "content": ctx.req(n, "content", field, str)}]
    ctx.unsupported(f"{field}.type", f"normalizer {t!r} is not supported yet")


def _read_pattern(ctx, obj, field):
    pat = ctx.req(obj, "pattern", field, dict)
    if "Regex" in pat and isinstance(pat["Regex"], str):
        return pat["Regex"], False
    if "String" in pat and isinstance(pat["String"], str):
        return pat["String"], True
    ctx.fail(f"{field}.pattern", "expected {\"Regex\": ...} or {\"String\": ...}")


def _read_pre_tokenizer(ctx, p, field) -> list[dict]:
    if p is None:
        return []
    if not isinstance(p, dict):
        ctx.fail(field, "expected an object or null")
    t = p.get("type")
    if t == "Sequence":
        steps = []
        for i, sub in enumerate(ctx.req(p, "pretokenizers", field, list)):
            steps += _read_pre_tokenizer(ctx, sub, f"{field}.pretokenizers[{i}]")
        return steps
    if t == "Split":
        pattern, literal = _read_pattern(ctx, p, field)
        behavior = ctx.req(p, "behavior", field, str)
        if behavior not in BEHAVIORS:
            ctx.fail(f"{field}.behavior", f"unknown behavior {behavior!r}; expected one of {sorted(BEHAVIORS)}")
        invert = ctx.req(p, "invert", field, bool)
        return [{"type": "split", "pattern": pattern, "literal": literal, "flavor": "onig",
                 "behavior": BEHAVIORS[behavior], "invert": invert}]
    if t == "ByteLevel":
        aps = ctx.req(p, "add_prefix_space", field, bool)
        ctx.req(p, "trim_offsets", field, bool)
        use_regex = ctx.opt(p, "use_regex", field, bool, True)
        return [{"type": "byte_level", "add_prefix_space": aps, "use_regex": use_regex}]
    if t == "Metaspace":
        from .hf_unigram import read_metaspace

        return [read_metaspace(ctx, p, field)]
    from .hf_bert import read_pre_tokenizer

    bert_steps = read_pre_tokenizer(ctx, p, field, t)
    if bert_steps is not None:
        return bert_steps
    from .hf_sp_steps import read_pre_tokenizer_step

    sp_steps = read_pre_tokenizer_step(ctx, p, field, t)
    if sp_steps is not None:
        return sp_steps
    ctx.unsupported(f"{field}.type", f"pre-tokenizer {t!r} is not supported yet")


def _read_post(ctx, p, field) -> list[dict]:
    if p is None:
        return []
    if not isinstance(p, dict):
        ctx.fail(field, "expected an object or null")
    t = p.get("type")
    if t == "Sequence":
        steps = []
        for i, sub in enumerate(ctx.req(p, "processors", field, list)):
            steps += _read_post(ctx, sub, f"{field}.processors[{i}]")
        return steps
    if t == "ByteLevel":
        return [{"type": "byte_level", "trim_offsets": ctx.req(p, "trim_offsets", field, bool),
                 "add_prefix_space": ctx.req(p, "add_prefix_space", field, bool)}]
    if t == "TemplateProcessing":
        specials = {}
        sp = ctx.req(p, "special_tokens", field, dict)
        for name, spec in sp.items():
            f2 = f"{field}.special_tokens[{name!r}]"
            ids = ctx.req(spec, "ids", f2, list)
            toks = ctx.req(spec, "tokens", f2, list)
            if len(ids) != len(toks) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1 << 32
                                                for i in ids):
                ctx.fail(f2, "ids must be token ids (non-negative integers), as many as tokens")
            specials[name] = {"ids": ids, "tokens": toks}

        def template(key):
            out = []
            for i, piece in enumerate(ctx.req(p, key, field, list)):
                f3 = f"{field}.{key}[{i}]"
                if isinstance(piece, dict) and "SpecialToken" in piece:
                    s = piece["SpecialToken"]
                    sid = ctx.req(s, "id", f3, str)
                    if sid not in specials:
                        ctx.fail(f3, f"special token {sid!r} is not in special_tokens")
                    out.append({"special": sid, "type_id": ctx.count(s, "type_id", f3, required=True)})
                elif isinstance(piece, dict) and "Sequence" in piece:
                    s = piece["Sequence"]
                    seq = ctx.req(s, "id", f3, str)
                    if seq not in ("A", "B"):
                        ctx.fail(f3, f"sequence id must be A or B, got {seq!r}")
                    out.append({"sequence": seq, "type_id": ctx.count(s, "type_id", f3, required=True)})
                else:
                    ctx.fail(f3, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}")
            return out

        return [{"type": "template", "single": template("single"), "pair": template("pair"),
                 "special_tokens": specials}]
    from .hf_bert import read_post

    bert_steps = read_post(ctx, p, field, t)
    if bert_steps is not None:
        return bert_steps
    ctx.unsupported(f"{field}.type", f"post-processor {t!r} is not supported yet")


def _read_decoder(ctx, d, field) -> list[dict]:
    if d is None:
        return []
    if not isinstance(d, dict):
        ctx.fail(field, "expected an object or null")
    t = d.get("type")
    if t == "Sequence":
        steps = []
        for i, sub in enumerate(ctx.req(d, "decoders", field, list)):
            steps += _read_decoder(ctx, sub, f"{field}.decoders[{i}]")
        return steps
    if t == "ByteLevel":
        return [{"type": "byte_level"}]
    if t == "Metaspace":
        from .hf_unigram import read_metaspace

        return [read_metaspace(ctx, d, field)]
    from .hf_bert import read_decoder

    bert_steps = read_decoder(ctx, d, field, t)
    if bert_steps is not None:
        return bert_steps
    from .hf_sp_steps import read_decoder_step

    step = read_decoder_step(ctx, d, field, t)
    if step is not None:
        return [step]
    ctx.unsupported(f"{field}.type", f"decoder {t!r} is not supported yet")


def _read_padding(ctx, p):
    if p is None:
        return None
    if not isinstance(p, dict):
        ctx.fail("padding", "expected an object or null")
    strategy = p.get("strategy", "BatchLongest")
    if strategy == "BatchLongest":
        length = None
    elif isinstance(strategy, dict) and "Fixed" in strategy:
        length = ctx.count(strategy, "Fixed", "padding.strategy", required=True)
    else:
        ctx.fail("padding.strategy", f"expected \"BatchLongest\" or {{\"Fixed\": n}}, got {strategy!r}")
    direction = p.get("direction", "Right")
    if direction not in ("Left", "Right"):
        ctx.fail("padding.direction", f"expected Left or Right, got {direction!r}")
    return {"length": length, "direction": direction.lower(),
            "pad_to_multiple_of": ctx.count(p, "pad_to_multiple_of", "padding"),
            "pad_id": ctx.count(p, "pad_id", "padding", 0), "pad_type_id": ctx.count(p, "pad_type_id", "padding", 0),
            "pad_token": ctx.opt(p, "pad_token", "padding", str, "[PAD]")}


def _read_truncation(ctx, t):
    if t is None:
        return None
    if not isinstance(t, dict):
        ctx.fail("truncation", "expected an object or null")
    max_length = ctx.count(t, "max_length", "truncation", required=True)
    stride = ctx.count(t, "stride", "truncation", 0)
    if stride >= max_length:
        ctx.fail("truncation.stride", f"stride {stride} must be smaller than max_length {max_length}")
    strategy = t.get("strategy", "LongestFirst")
    if strategy not in ("LongestFirst", "OnlyFirst", "OnlySecond"):
        ctx.fail("truncation.strategy", f"unknown strategy {strategy!r}")
    direction = t.get("direction", "Right")
    if direction not in ("Left", "Right"):
        ctx.fail("truncation.direction", f"expected Left or Right, got {direction!r}")
    return {"max_length": max_length, "stride": stride, "strategy": strategy, "direction": direction.lower()}
