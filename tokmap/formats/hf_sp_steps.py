"""tokenizer.json components of the character-level BPE vertical, mapped to tokmap steps: the
decoders of SentencePiece-style and CTC tokenizers (Replace, ByteFallback, Fuse, Strip, BPEDecoder,
CTC) and the pre-tokenizers Digits, CharDelimiterSplit and UnicodeScripts.

Called by hf_json's _read_decoder / _read_pre_tokenizer for the tags they do not handle
themselves; each returns None for an unknown tag so the caller refuses it. Fields follow
tokenizers 0.23 (CONFORMANCE.md sections 4 and 9); fields without a serde default are required.
"""

from __future__ import annotations


def read_decoder_step(ctx, d: dict, field: str, t):
    if t == "Replace":
        pat = ctx.req(d, "pattern", field, dict)
        content = ctx.req(d, "content", field, str)
        if "String" in pat and isinstance(pat["String"], str):
            return {"type": "replace", "literal": pat["String"], "content": content}
        if "Regex" in pat and isinstance(pat["Regex"], str):
            return {"type": "replace", "pattern": pat["Regex"], "content": content}  # compiled at export
        ctx.fail(f"{field}.pattern", "expected {\"Regex\": ...} or {\"String\": ...}")
    if t == "ByteFallback":
        return {"type": "byte_fallback"}
    if t == "Fuse":
        return {"type": "fuse"}
    if t == "Strip":
        content = ctx.req(d, "content", field, str)
        if len(content) != 1:
            ctx.fail(f"{field}.content", f"expected one character, got {content!r}")
        return {"type": "strip", "content": content, "start": ctx.count(d, "start", field, required=True),
                "stop": ctx.count(d, "stop", field, required=True)}
    if t == "BPEDecoder":
        # Neither decoder has serde defaults: every field is required in the JSON.
        return {"type": "bpe_suffix", "suffix": ctx.req(d, "suffix", field, str)}
    if t == "CTC":
        return {"type": "ctc", "pad_token": ctx.req(d, "pad_token", field, str),
                "word_delimiter_token": ctx.req(d, "word_delimiter_token", field, str),
                "cleanup": ctx.req(d, "cleanup", field, bool)}
    return None


def read_pre_tokenizer_step(ctx, p: dict, field: str, t):
    """Digits, CharDelimiterSplit, UnicodeScripts -> tokmap steps; None for another tag."""
    if t == "CharDelimiterSplit":
        delim = ctx.req(p, "delimiter", field, str)
        if len(delim) != 1:
            ctx.fail(f"{field}.delimiter", f"expected one character, got {delim!r}")
        # Rust splits on `c == delimiter` with Removed: a literal one-char Split does the same.
        return [{"type": "split", "pattern": delim, "literal": True, "flavor": "onig", "behavior": "removed",
                 "invert": False}]
    if t == "Digits":
        return [{"type": "digits", "individual_digits": ctx.req(p, "individual_digits", field, bool)}]
    if t == "UnicodeScripts":
        return [{"type": "unicode_scripts"}]
    return None
