"""Pick the reader for a source file from its content (overridable), and run it."""

from __future__ import annotations

import os

from ..errors import SourceError

FORMATS = ("hf_json", "tiktoken", "tekken")


def detect_format(path, data: bytes) -> str:
    head = data[:4096].lstrip()
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
    raise SourceError(path, "unrecognised tokenizer file (expected tokenizer.json, .tiktoken or Tekken json)", line=1)


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
    tpl = doc.get("chat_template") if isinstance(doc, dict) else None
    if isinstance(tpl, list):  # named templates: keep them all, as JSON
        return json.dumps(tpl, ensure_ascii=False)
    return tpl if isinstance(tpl, str) else None
