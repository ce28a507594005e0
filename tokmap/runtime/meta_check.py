"""Type-check the META keys the runtime reads, so a crafted or mis-built META is refused at load
naming the field, instead of failing (or returning ids of the wrong type) inside an encode."""

from __future__ import annotations

MODEL_TYPES = ("bpe",)
_BEHAVIORS = ("isolated", "removed", "merged_with_previous", "merged_with_next", "contiguous")


def check_meta(m: dict) -> None:
    """Type-check the META keys the runtime reads, so a crafted or mis-built META is refused at load
    naming the field, instead of failing (or returning ids of the wrong type) inside an encode.
    Unknown keys and unknown step types are left to the runtime's own dispatch."""

    def need(ok, field, what):
        if not ok:
            raise ValueError(f"field {field} must be {what}")

    def is_int(v, lo=0, hi=1 << 32):
        return isinstance(v, int) and not isinstance(v, bool) and lo <= v < hi

    def obj(v, field):
        need(isinstance(v, dict), field, "an object")
        return v

    def split_step(s, field):
        need(s.get("behavior") in _BEHAVIORS, f"{field}.behavior", f"one of {_BEHAVIORS}")
        need(isinstance(s.get("invert"), bool), f"{field}.invert", "a boolean")
        if "literal" in s:
            need(isinstance(s["literal"], str), f"{field}.literal", "a string")
        else:
            need(isinstance(s.get("regex"), str), f"{field}.regex", "a string")
            for k in ("class_index", "class_blocks"):
                need(is_int(s.get(k)), f"{field}.{k}", "a blob number")

    need(m.get("api") in ("hf", "tiktoken", "tekken"), "api", '"hf", "tiktoken" or "tekken"')
    n = m.get("vocab_size")
    need(is_int(n), "vocab_size", "an integer in [0, 2^32)")
    need(is_int(m.get("n_added")), "n_added", "a non-negative integer")
    need(is_int(m.get("model_vocab_size"), 0, n + 1), "model_vocab_size", "an integer up to vocab_size")
    model = obj(m.get("model"), "model")
    need(model.get("type") in MODEL_TYPES, "model.type", f"one of {MODEL_TYPES}")
    if model["type"] == "bpe":
        need(isinstance(model.get("ignore_merges"), bool), "model.ignore_merges", "a boolean")
    need("unk_id" in model and (model["unk_id"] is None or is_int(model["unk_id"], 0, n)), "model.unk_id",
         "null or a token id")
    for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        need(isinstance(m.get(key), list), key, "a list of steps")
        for i, s in enumerate(m[key]):
            need(isinstance(s, dict) and isinstance(s.get("type"), str), f"{key}[{i}]", "an object with a string type")
    for i, s in enumerate(m["pre_tokenizer"]):
        if s["type"] == "split":
            split_step(s, f"pre_tokenizer[{i}]")
    if m.get("word_class") is not None:
        split_step(obj(m["word_class"], "word_class"), "word_class")
    for i, s in enumerate(m["normalizer"]):
        if s["type"] == "unicode":
            need(s.get("form") in ("NFC", "NFD", "NFKC", "NFKD"), f"normalizer[{i}].form", "a Unicode form")
            need(is_int(s.get("tables")), f"normalizer[{i}].tables", "a blob number")
    for i, s in enumerate(m["post_processor"]):
        f = f"post_processor[{i}]"
        if s["type"] == "byte_level":
            for k in ("trim_offsets", "add_prefix_space"):
                need(isinstance(s.get(k), bool), f"{f}.{k}", "a boolean")
        elif s["type"] == "template":
            specials = obj(s.get("special_tokens"), f"{f}.special_tokens")
            for name, sp in specials.items():
                ids = obj(sp, f"{f}.special_tokens[{name!r}]").get("ids")
                need(isinstance(ids, list) and all(is_int(i) for i in ids), f"{f}.special_tokens[{name!r}].ids",
                     "a list of token ids")
            for key in ("single", "pair"):
                need(isinstance(s.get(key), list), f"{f}.{key}", "a list")
                for j, p in enumerate(s[key]):
                    if not isinstance(p, dict):
                        ok = False
                    elif "special" in p:
                        ok = isinstance(p["special"], str) and p["special"] in specials
                    else:
                        ok = p.get("sequence") in ("A", "B")
                    ok = ok and is_int(p.get("type_id"))
                    need(ok, f"{f}.{key}[{j}]", "{special: name, type_id} or {sequence: A|B, type_id}")
    holes = m.get("holes", [])
    need(isinstance(holes, list) and all(isinstance(h, list) and len(h) == 2 and is_int(h[0]) and is_int(h[1])
                                         for h in holes), "holes", "a list of [start, end] id ranges")
    irregular = m.get("irregular", {})
    need(isinstance(irregular, dict) and all(is_int(v, 0, n) for v in irregular.values()), "irregular",
         "an object of token -> id")
    extra = obj(m.get("extra", {}), "extra")
    if m["api"] == "tekken":
        need(is_int(extra.get("num_special"), 0, n + 1), "extra.num_special", "a non-negative integer")
        need(extra.get("bos_id") is None or is_int(extra["bos_id"], 0, n), "extra.bos_id", "null or a token id")
    need(isinstance(m.get("provenance", {}), dict), "provenance", "an object")
    pad = m.get("padding")
    if pad is not None:
        obj(pad, "padding")
        need(pad.get("length") is None or is_int(pad["length"]), "padding.length", "null or an integer")
        need(pad.get("pad_to_multiple_of") is None or is_int(pad["pad_to_multiple_of"]), "padding.pad_to_multiple_of",
             "null or an integer")
        need(pad.get("direction") in ("left", "right"), "padding.direction", '"left" or "right"')
        for k in ("pad_id", "pad_type_id"):
            need(is_int(pad.get(k)), f"padding.{k}", "a non-negative integer")
        need(isinstance(pad.get("pad_token"), str), "padding.pad_token", "a string")
    trunc = m.get("truncation")
    if trunc is not None:
        obj(trunc, "truncation")
        need(is_int(trunc.get("max_length")), "truncation.max_length", "a non-negative integer")
        need(is_int(trunc.get("stride"), 0, max(trunc["max_length"], 1)), "truncation.stride",
             "a non-negative integer below max_length")
        need(trunc.get("strategy") in ("LongestFirst", "OnlyFirst", "OnlySecond"), "truncation.strategy",
             "LongestFirst, OnlyFirst or OnlySecond")
        need(trunc.get("direction") in ("left", "right"), "truncation.direction", '"left" or "right"')
