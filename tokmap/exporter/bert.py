"""Exporter side of the BERT family: WordPiece / WordLevel model META, and the normalizer and
pre-tokenizer steps (BertNormalizer, Lowercase, Strip, StripAccents, BertPreTokenizer, Punctuation,
WhitespaceSplit) rewritten into the runtime's table-driven steps.

The per-character tables come from data/hf_chars.json (measured from tokenizers by
tools/gen_hf_chars.py); each is embedded as a blob only when the tokenizer uses it.
"""

from __future__ import annotations

import json
import os

from .. import mtok

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hf_chars.json")
_tables = None


def _load() -> dict:
    global _tables
    if _tables is None:
        with open(_DATA, encoding="utf-8") as f:
            _tables = json.load(f)
    return _tables


def _map_rows(name: str) -> list:
    """[start, end, replacement-or-None] rows, sorted, for a char_map table."""
    t = _load()
    if name == "lowercase":
        return [[cp, cp + 1, s] for cp, s in t["lowercase"]]
    if name == "bert_clean":
        rows = [[a, b, None] for a, b in t["bert_clean"]["drop"]] + [[a, b, " "] for a, b in t["bert_clean"]["space"]]
        return sorted(rows)
    if name == "bert_cjk":
        # handle_chinese_chars: the char with a space on both sides (the spaces share its range).
        return [[a, b, "pad"] for a, b in t["bert_cjk"]]
    if name in ("bert_mn", "marks"):
        return [[a, b, None] for a, b in t[name]]
    raise KeyError(name)


def _blob(blobs, kind: str, name: str) -> int:
    cache = blobs.__dict__.setdefault("hf_char_blobs", {})
    key = (kind, name)
    if key not in cache:
        rows = _map_rows(name) if kind == "map" else _load()[name]
        cache[key] = blobs.add(mtok.U8, json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    return cache[key]


def _nfd_step(blobs) -> dict:
    """The unicode NFD step (its tables and patterns blobs made once per file)."""
    cache = blobs.__dict__.setdefault("hf_char_blobs", {})
    if ("nfd", "") not in cache:
        from .norm_tables import build_norm_blob, pattern_fields

        table = build_norm_blob({"NFD"})
        cache[("nfd", "")] = {"type": "unicode", "form": "NFD", "tables": blobs.add(mtok.U8, table),
                              "patterns": pattern_fields(table, "NFD", blobs), "unicode_version": "9.0.0"}
    return cache[("nfd", "")]


NORMALIZER_TYPES = ("bert", "lowercase", "strip", "strip_accents")
PRE_TOKENIZER_TYPES = ("char_split",)


def compile_normalizer(s: dict, blobs) -> list[dict]:
    """One definition normalizer step -> runtime steps."""
    version = "tokenizers-" + _load()["tokenizers"]
    t = s["type"]
    if t == "lowercase":
        return [{"type": "char_map", "table": _blob(blobs, "map", "lowercase"), "unicode_version": version}]
    if t == "strip_accents":
        return [{"type": "char_map", "table": _blob(blobs, "map", "marks"), "unicode_version": version}]
    if t == "strip":
        return [{"type": "strip", "left": s["left"], "right": s["right"], "table": _blob(blobs, "set", "strip_ws"),
                 "unicode_version": version}]
    if t == "bert":
        # BertNormalizer's order: clean text, pad CJK, strip accents (NFD, drop Mn), lowercase.
        out = []
        if s["clean_text"]:
            out.append({"type": "char_map", "table": _blob(blobs, "map", "bert_clean"), "unicode_version": version})
        if s["handle_chinese_chars"]:
            out.append({"type": "char_map", "table": _blob(blobs, "map", "bert_cjk"), "unicode_version": version})
        if s["strip_accents"]:
            out.append(dict(_nfd_step(blobs)))
            out.append({"type": "char_map", "table": _blob(blobs, "map", "bert_mn"), "unicode_version": version})
        if s["lowercase"]:
            out.append({"type": "char_map", "table": _blob(blobs, "map", "lowercase"), "unicode_version": version})
        return out
    raise KeyError(t)


def compile_pre_tokenizer(s: dict, blobs) -> list[dict]:
    return [{"type": "char_split", "behavior": s["behavior"], "table": _blob(blobs, "set", s["table"])}]


def wordpiece_sections(d, token_bytes, regular, sections) -> dict:
    m = d.model
    text = token_text(token_bytes, regular)
    if text is not None:
        sections[mtok.SECTION_TOKEN_TEXT] = (mtok.U8, text)
    tables = wordpiece_hash_tables(token_bytes, regular, m.continuing_subword_prefix.encode("utf-8", "surrogatepass"))
    if tables is not None:
        sections[mtok.SECTION_PIECE_HASH] = (mtok.U64, tables[0])
        sections[mtok.SECTION_WORDPIECE_CONT] = (mtok.U64, tables[1])
    return {"type": "wordpiece", "byte_level": False, "unk_id": m.unk_id, "prefix": m.continuing_subword_prefix,
            "max_input_chars_per_word": m.max_input_chars_per_word}


def wordpiece_hash_tables(token_bytes: list[bytes], regular: list[int], prefix: bytes) -> tuple[bytes, bytes] | None:
    """The piece_hash and wordpiece_cont sections (runtime/models/wordpiece_batch.py): every
    model token hashed whole, and those starting with the prefix hashed over their bytes after
    it, little-endian u64 each. None (no tables: the runtime builds its dict) when more than
    MAX_BUCKET tokens of a table fall in one bucket, which the runtime refuses."""
    import numpy as np

    from ..runtime.models.bpe_batch import piece_hashes
    from ..runtime.models.wordpiece_batch import MAX_BUCKET, bucket_starts

    out = []
    for ids, skip in (([i for i in regular if token_bytes[i]], 0),
                      ([i for i in regular if len(token_bytes[i]) > len(prefix) and token_bytes[i].startswith(prefix)],
                       len(prefix))):
        raw = np.frombuffer(b"".join([token_bytes[i][skip:] for i in ids]), dtype=np.uint8)
        lengths = np.array([len(token_bytes[i]) - skip for i in ids], dtype=np.int64)
        h = piece_hashes(raw, np.cumsum(lengths) - lengths, lengths) if ids else np.zeros(0, dtype=np.uint64)
        table = np.sort((h << np.uint64(32)) | np.array(ids, dtype=np.uint64))
        if int(np.diff(bucket_starts(table)).max()) > MAX_BUCKET:
            return None
        out.append(table.astype("<u8").tobytes())
    return out[0], out[1]


def wordlevel_sections(d, token_bytes, regular, sections) -> dict:
    return {"type": "wordlevel", "byte_level": False, "unk_id": d.model.unk_id}


def token_text(token_bytes: list[bytes], regular: list[int]) -> bytes | None:
    """The token_text section (mtok.SECTION_TOKEN_TEXT): the model tokens in SORTED_IDS order
    (`regular`), or None when one does not decode alone or holds a newline (the runtime then
    builds its dict a token at a time)."""
    try:
        texts = [token_bytes[i].decode("utf-8", "surrogatepass") for i in regular]
    except UnicodeDecodeError:
        return None
    if any("\n" in t for t in texts):
        return None
    return "".join(t + "\n" for t in texts).encode("utf-8", "surrogatepass")
