"""Pick the reader for a source file from its content (overridable), and run it."""

from __future__ import annotations

import os

from ..errors import SourceError

FORMATS = ("hf_json", "tiktoken", "tekken", "sentencepiece")


def _looks_like_spm(data: bytes) -> bool:
    """A SentencePiece ModelProto opens with field 1 (pieces, length-delimited: 0x0a), a varint
    length, then the first piece's own field 1 (0x0a) holding a non-empty UTF-8 string that fits."""

    def varint(pos):
        val = shift = 0
        while pos < len(data) and shift < 35:
            b = data[pos]
            val |= (b & 0x7F) << shift
            pos += 1
            if not b & 0x80:
                return val, pos
            shift += 7
        return None, pos

    if len(data) < 4 or data[0] != 0x0A:
        return False
    length, pos = varint(1)
    if length is None or pos + length > len(data) or length < 3 or data[pos] != 0x0A:
        return False
    plen, ppos = varint(pos + 1)
    if plen is None or plen < 1 or ppos + plen > pos + length:
        return False
    try:
        data[ppos : ppos + plen].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def detect_format(path, data: bytes) -> str:
    head = data[:4096].lstrip()
    if not head.startswith(b"{") and _looks_like_spm(data):
        return "sentencepiece"
    if head.startswith(b"{"):
        # Tekken files open with "config" and carry "vocab" as a list; tokenizer.json has "model".
        probe = data[:65536]
        if b'"model"' in data and b'"added_tokens"' in probe or b'"model"' in probe:
            return "hf_json"
        if b'"config"' in probe and b'"vocab"' in data:
            return "tekken"
        if b'"model"' in data:
            return "hf_json"
        raise SourceError(path, "JSON file is neither a tokenizer.json (no \"model\") nor a Tekken file "
                          "(no \"config\"/\"vocab\"); pass the format explicitly")
    first = head.split(b"\n", 1)[0].split()
    if len(first) == 2 and first[1].isdigit():
        return "tiktoken"
    raise SourceError(path, "unrecognised tokenizer file (expected tokenizer.json, .tiktoken, Tekken json "
                      "or SentencePiece .model)", line=1)


def read_source(src, fmt: str | None = None, encoding: str | None = None):
    path = os.fspath(src)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SourceError(path, f"cannot read: {e.strerror or e}") from None
    fmt = fmt or detect_format(path, data)
    if fmt == "hf_json":
        from ..formats import hf_json

        chat = _chat_template_beside(path)
        return hf_json.read(path, data, chat_template=chat)
    if fmt == "tiktoken":
        from ..formats import tiktoken

        return tiktoken.read(path, data, encoding=encoding)
    if fmt == "tekken":
        from ..formats import tekken

        return tekken.read(path, data)
    if fmt == "sentencepiece":
        from ..formats import sentencepiece

        return sentencepiece.read(path, data)
    raise SourceError(path, f"unknown format {fmt!r}; expected one of {FORMATS}")


def _chat_template_beside(path):
    """tokenizer_config.json next to tokenizer.json carries the chat template."""
    import json

    cfg = os.path.join(os.path.dirname(os.path.abspath(path)), "tokenizer_config.json")
    if not os.path.exists(cfg):
        return None
    try:
        with open(cfg, "rb") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise SourceError(cfg, f"cannot read chat template: {e}") from None
    from ..formats.jsondoc import utf8_text

    tpl = doc.get("chat_template") if isinstance(doc, dict) else None
    if isinstance(tpl, list):  # named templates: keep them all, as JSON
        return utf8_text(cfg, json.dumps(tpl, ensure_ascii=False), "chat_template")
    return utf8_text(cfg, tpl, "chat_template") if isinstance(tpl, str) else None
