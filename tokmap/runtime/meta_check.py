"""Type-check the META keys the runtime reads, so a crafted or mis-built META is refused at load
naming the field, instead of failing (or returning ids of the wrong type) inside an encode."""

from __future__ import annotations

MODEL_TYPES = ("bpe", "spm", "wordpiece", "wordlevel", "unigram")
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
            for k in ("regex_bmp", "regex_full"):
                need(isinstance(s.get(k, ""), str), f"{field}.{k}", "a string")
            for k in ("regex_bmp_code", "regex_full_code"):
                if k in s:
                    need(isinstance(s[k], dict), f"{field}.{k}", "an object")
            for k in ("class_index", "class_blocks"):
                need(is_int(s.get(k)), f"{field}.{k}", "a blob number")
            if "runs" in s:  # runtime/pretokenizers.SplitStep.runs
                r = obj(s["runs"], f"{field}.runs")
                need(isinstance(r.get("regex"), str), f"{field}.runs.regex", "a string")
                need(isinstance(r.get("set"), str), f"{field}.runs.set", "a string")
                need(is_int(r.get("k"), 1, 1 << 16), f"{field}.runs.k", "an integer in [1, 2^16)")

    def metaspace_step(s, field):
        need(isinstance(s.get("replacement"), str) and len(s["replacement"]) == 1, f"{field}.replacement",
             "one character")
        need(s.get("prepend_scheme") in ("first", "never", "always"), f"{field}.prepend_scheme",
             '"first", "never" or "always"')
        need(isinstance(s.get("split"), bool), f"{field}.split", "a boolean")

    need(m.get("api") in ("hf", "tiktoken", "tekken", "sentencepiece"), "api",
         '"hf", "tiktoken", "tekken" or "sentencepiece"')
    n = m.get("vocab_size")
    need(is_int(n), "vocab_size", "an integer in [0, 2^32)")
    need(is_int(m.get("n_added")), "n_added", "a non-negative integer")
    need(is_int(m.get("model_vocab_size"), 0, n + 1), "model_vocab_size", "an integer up to vocab_size")
    model = obj(m.get("model"), "model")
    need(model.get("type") in MODEL_TYPES, "model.type", f"one of {MODEL_TYPES}")
    if model["type"] == "bpe":
        need(isinstance(model.get("ignore_merges"), bool), "model.ignore_merges", "a boolean")
        # Absent in files written before the flag existed: they all carry a rank section.
        need(isinstance(model.get("ranks_from_results", False), bool), "model.ranks_from_results", "a boolean")
        need(isinstance(model.get("ranks_permutation", False), bool)
             and not (model.get("ranks_permutation") and model.get("ranks_from_results")),
             "model.ranks_permutation", "a boolean, false when model.ranks_from_results is true")
        if model.get("byte_level", True) is False:  # character-level BPE (runtime/models/charbpe.py)
            for k in ("byte_fallback", "fuse_unk"):
                need(isinstance(model.get(k, False), bool), f"model.{k}", "a boolean")
            for k in ("continuing_subword_prefix", "end_of_word_suffix"):
                need(model.get(k) is None or isinstance(model[k], str), f"model.{k}", "null or a string")
            need(isinstance(model.get("boundaries", ""), str), "model.boundaries", "a string")
            # Absent in files written before they were stored (models/charcut.py, charbpe.py).
            need(isinstance(model.get("byte_tokens_merge", False), bool), "model.byte_tokens_merge", "a boolean")
            need(model.get("byte_tokens_first") is None or is_int(model["byte_tokens_first"], 0, max(n - 255, 0)),
                 "model.byte_tokens_first", "null or the first of 256 token ids")
    # SentencePiece's API and model come together: one without the other is a mis-built META.
    need((m["api"] == "sentencepiece") == (model["type"] == "spm"), "api",
         '"sentencepiece" exactly when model.type is "spm"')
    if model["type"] == "spm":
        need(model.get("kind") in ("bpe", "unigram"), "model.kind", '"bpe" or "unigram"')
        need(is_int(model.get("unk_id"), 0, n), "model.unk_id", "a token id")
        need(model.get("bos_id") is None or is_int(model["bos_id"], 0, n), "model.bos_id", "null or a token id")
        need(isinstance(model.get("unk_surface"), str), "model.unk_surface", "a string")
        for k in ("byte_fallback", "add_dummy_prefix", "remove_extra_whitespaces"):
            need(isinstance(model.get(k), bool), f"model.{k}", "a boolean")
    if model["type"] in ("wordpiece", "wordlevel"):
        need(is_int(model.get("unk_id"), 0, n), "model.unk_id", "a token id")
    if model["type"] == "wordpiece":
        need(isinstance(model.get("prefix"), str), "model.prefix", "a string")
        need(is_int(model.get("max_input_chars_per_word")), "model.max_input_chars_per_word", "a non-negative integer")
    need("unk_id" in model and (model["unk_id"] is None or is_int(model["unk_id"], 0, n)), "model.unk_id",
         "null or a token id")
    if model["type"] == "unigram":
        need(isinstance(model.get("byte_fallback"), bool), "model.byte_fallback", "a boolean")
        need(is_int(model.get("n_pieces"), 1, m["model_vocab_size"] + 1), "model.n_pieces",
             "a piece count up to model_vocab_size")
        need(isinstance(model.get("min_score"), float) and model["min_score"] == model["min_score"],
             "model.min_score", "a number")
        need(model["unk_id"] is None or model["unk_id"] < model["n_pieces"], "model.unk_id", "null or a piece id")
    for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        need(isinstance(m.get(key), list), key, "a list of steps")
        for i, s in enumerate(m[key]):
            need(isinstance(s, dict) and isinstance(s.get("type"), str), f"{key}[{i}]", "an object with a string type")
    for i, s in enumerate(m["pre_tokenizer"]):
        if s["type"] == "split":
            split_step(s, f"pre_tokenizer[{i}]")
        elif s["type"] == "char_split":  # runtime/bert.py
            need(s.get("behavior") in _BEHAVIORS, f"pre_tokenizer[{i}].behavior", f"one of {_BEHAVIORS}")
            need(is_int(s.get("table")), f"pre_tokenizer[{i}].table", "a blob number")
        elif s["type"] == "metaspace":
            metaspace_step(s, f"pre_tokenizer[{i}]")
        elif s["type"] == "scripts":  # UnicodeScripts (runtime/sp_pretokenizers.py)
            for k in ("class_index", "class_blocks"):
                need(is_int(s.get(k)), f"pre_tokenizer[{i}].{k}", "a blob number")
    for i, s in enumerate(m["decoder"]):
        if s["type"] == "metaspace":
            metaspace_step(s, f"decoder[{i}]")
    if m.get("word_class") is not None:
        split_step(obj(m["word_class"], "word_class"), "word_class")
    for i, s in enumerate(m["normalizer"]):
        if s["type"] in ("char_map", "strip"):  # runtime/bert.py
            need(is_int(s.get("table")), f"normalizer[{i}].table", "a blob number")
        if s["type"] == "strip":
            for k in ("left", "right"):
                need(isinstance(s.get(k), bool), f"normalizer[{i}].{k}", "a boolean")
        if s["type"] in ("prepend", "replace"):  # runtime/sp_normalizers.py
            for k in ("prepend",) if s["type"] == "prepend" else ("content",):
                need(isinstance(s.get(k), str), f"normalizer[{i}].{k}", "a string")
            if s["type"] == "replace" and "literal" in s:
                need(isinstance(s["literal"], str), f"normalizer[{i}].literal", "a string")
            elif s["type"] == "replace":
                need(isinstance(s.get("regex"), str), f"normalizer[{i}].regex", "a string")
                for k in ("class_index", "class_blocks"):
                    need(is_int(s.get(k)), f"normalizer[{i}].{k}", "a blob number")
        if s["type"] == "unicode":
            need(s.get("form") in ("NFC", "NFD", "NFKC", "NFKD"), f"normalizer[{i}].form", "a Unicode form")
            need(is_int(s.get("tables")), f"normalizer[{i}].tables", "a blob number")
            if "patterns" in s:  # runtime/normalizers._stored_patterns
                pt = obj(s["patterns"], f"normalizer[{i}].patterns")
                for k in ("scan", "exact"):
                    need(is_int(pt.get(k)), f"normalizer[{i}].patterns.{k}", "a blob number")
                    if k + "_code" in pt:
                        need(isinstance(pt[k + "_code"], dict), f"normalizer[{i}].patterns.{k}_code", "an object")
        elif s["type"] == "precompiled":
            for k in ("charsmap", "graphemes"):
                need(is_int(s.get(k)), f"normalizer[{i}].{k}", "a blob number")
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
