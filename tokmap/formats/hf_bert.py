"""tokenizer.json reader for the BERT family: WordPiece / WordLevel models and the normalizers,
pre-tokenizers and decoder that come with them (BertNormalizer, Lowercase, Strip, StripAccents,
BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation, the WordPiece decoder).

Called from hf_json.py; it only validates and maps fields to tokmap's tagged steps. Field rules
follow tokenizers 0.23 (CONFORMANCE.md sections 3, 4, 6 and 9).
"""

from __future__ import annotations

from ..definition import WordLevelModel, WordPieceModel, sparse_id_limit

_BEHAVIORS = {
    "Removed": "removed",
    "Isolated": "isolated",
    "MergedWithPrevious": "merged_with_previous",
    "MergedWithNext": "merged_with_next",
    "Contiguous": "contiguous",
}


def _vocab(ctx, m) -> tuple[dict, list]:
    """The vocab object and token UTF-8 bytes by id (holes are None)."""
    vocab_obj = ctx.req(m, "vocab", "model", dict)
    n = 0
    for tok, tid in vocab_obj.items():
        if not isinstance(tid, int) or isinstance(tid, bool) or tid < 0 or tid >= 1 << 31:
            ctx.fail(f"model.vocab[{tok!r}]", f"id must be a non-negative integer, got {tid!r}")
        n = max(n, tid + 1)
    if n > sparse_id_limit(len(vocab_obj)):
        worst = max(vocab_obj, key=vocab_obj.get)
        ctx.fail(f"model.vocab[{worst!r}]", f"id {n - 1} is far beyond the {len(vocab_obj)}-token vocabulary "
                 "(a sparse vocabulary is refused)")
    vocab: list = [None] * n
    seen: dict[int, str] = {}
    for tok, tid in vocab_obj.items():
        if tid in seen:
            # Two strings on one id make tokenizers' reverse map ambiguous; a valid file has none.
            ctx.fail(f"model.vocab[{tok!r}]", f"id {tid} is also used by {seen[tid]!r}")
        seen[tid] = tok
        vocab[tid] = tok.encode("utf-8", "surrogatepass")
    return vocab_obj, vocab


def _unk(ctx, vocab_obj, unk):
    # tokenizers only fails at encode time (MissingUnkToken) when the unk token is absent and
    # needed; tokmap refuses such a file up front rather than failing on some inputs.
    if unk not in vocab_obj:
        ctx.unsupported("model.unk_token", f"unk token {unk!r} is not in model.vocab")
    return vocab_obj[unk]


def read_model(ctx, m, mtype):
    if mtype == "WordPiece":
        vocab_obj, vocab = _vocab(ctx, m)
        unk = ctx.req(m, "unk_token", "model", str)
        prefix = ctx.req(m, "continuing_subword_prefix", "model", str)
        max_chars = ctx.count(m, "max_input_chars_per_word", "model", required=True)
        return WordPieceModel(vocab=vocab, unk_id=_unk(ctx, vocab_obj, unk), continuing_subword_prefix=prefix,
                              max_input_chars_per_word=max_chars)
    if mtype == "WordLevel":
        vocab_obj, vocab = _vocab(ctx, m)
        unk = ctx.opt(m, "unk_token", "model", str, "<unk>")
        return WordLevelModel(vocab=vocab, unk_id=_unk(ctx, vocab_obj, unk))
    return None


def read_normalizer(ctx, n, field, t):
    """Steps for one normalizer of this family, or None when `t` is not one of them."""
    if t == "BertNormalizer":
        clean = ctx.opt(n, "clean_text", field, bool, True)
        cjk = ctx.opt(n, "handle_chinese_chars", field, bool, True)
        lower = ctx.opt(n, "lowercase", field, bool, True)
        strip = ctx.opt(n, "strip_accents", field, bool, None)
        # strip_accents null means "as lowercase" (BertNormalizer::normalize).
        return [{"type": "bert", "clean_text": clean, "handle_chinese_chars": cjk,
                 "strip_accents": lower if strip is None else strip, "lowercase": lower}]
    if t == "Lowercase":
        return [{"type": "lowercase"}]
    if t == "StripAccents":
        return [{"type": "strip_accents"}]
    if t == "Strip":
        return [{"type": "strip", "left": ctx.req(n, "strip_left", field, bool),
                 "right": ctx.req(n, "strip_right", field, bool)}]
    return None


def read_pre_tokenizer(ctx, p, field, t):
    """Steps for one pre-tokenizer of this family, or None when `t` is not one of them."""
    if t == "BertPreTokenizer":
        return [{"type": "char_split", "table": "bert_ws", "behavior": "removed"},
                {"type": "char_split", "table": "bert_punct", "behavior": "isolated"}]
    if t == "Punctuation":
        behavior = ctx.opt(p, "behavior", field, str, "Isolated")
        if behavior not in _BEHAVIORS:
            ctx.fail(f"{field}.behavior", f"unknown behavior {behavior!r}; expected one of {sorted(_BEHAVIORS)}")
        return [{"type": "char_split", "table": "bert_punct", "behavior": _BEHAVIORS[behavior]}]
    if t == "WhitespaceSplit":
        return [{"type": "char_split", "table": "split_ws", "behavior": "removed"}]
    if t == "Whitespace":
        # Rust regex `\w+|[^\w\s]+`, matches kept: tokenizers splits on the inverted pattern, Removed.
        return [{"type": "split", "pattern": r"\w+|[^\w\s]+", "literal": False, "flavor": "fancy",
                 "behavior": "removed", "invert": True}]
    return None


def read_decoder(ctx, d, field, t):
    if t == "WordPiece":
        return [{"type": "wordpiece", "prefix": ctx.opt(d, "prefix", field, str, "##"),
                 "cleanup": ctx.opt(d, "cleanup", field, bool, True)}]
    return None


def _pair_tok(ctx, p, key, field):
    v = ctx.req(p, key, field, list)
    if len(v) != 2 or not isinstance(v[0], str) or not isinstance(v[1], int) or isinstance(v[1], bool) \
            or not 0 <= v[1] < 1 << 32:
        ctx.fail(f"{field}.{key}", "expected [token, id]")
    return v


def read_post(ctx, p, field, t):
    """BertProcessing / RobertaProcessing as the equivalent template (plus Roberta's offset trim)."""
    if t not in ("BertProcessing", "RobertaProcessing"):
        return None
    sep, cls = _pair_tok(ctx, p, "sep", field), _pair_tok(ctx, p, "cls", field)
    specials = {"cls": {"ids": [cls[1]], "tokens": [cls[0]]}, "sep": {"ids": [sep[1]], "tokens": [sep[0]]}}

    def sp(name, type_id):
        return {"special": name, "type_id": type_id}

    def seq(name, type_id):
        return {"sequence": name, "type_id": type_id}

    if t == "BertProcessing":
        # [CLS] A [SEP] B [SEP]; B and its [SEP] get type id 1, as the sequences' own type ids.
        return [{"type": "template", "single": [sp("cls", 0), seq("A", 0), sp("sep", 0)],
                 "pair": [sp("cls", 0), seq("A", 0), sp("sep", 0), seq("B", 1), sp("sep", 1)],
                 "special_tokens": specials}]
    trim = ctx.opt(p, "trim_offsets", field, bool, True)
    aps = ctx.opt(p, "add_prefix_space", field, bool, True)
    # <s> A </s></s> B </s>, every type id 0 (even without specials); offsets trimmed as ByteLevel does,
    # before the specials are added, whether or not they are.
    return [{"type": "byte_level", "trim_offsets": trim, "add_prefix_space": aps},
            {"type": "template", "single": [sp("cls", 0), seq("A", 0), sp("sep", 0)],
             "pair": [sp("cls", 0), seq("A", 0), sp("sep", 0), sp("sep", 0), seq("B", 0), sp("sep", 0)],
             "special_tokens": specials}]
