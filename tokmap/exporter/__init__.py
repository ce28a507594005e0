"""Source file -> TokenizerDef -> .mtok. The only place that knows both sides."""

from __future__ import annotations

import os

from .build import build_sections
from .detect import detect_format, read_source
from .writer import build, write_atomic

__all__ = ["export", "detect_format", "read_source", "build_sections"]


def export(src, dst, fmt: str | None = None, encoding: str | None = None) -> str:
    """Convert a tokenizer file to .mtok at `dst` (written atomically). Returns dst."""
    definition = read_source(src, fmt=fmt, encoding=encoding)
    data = build(build_sections(definition))
    write_atomic(dst, data)
    return os.fspath(dst)
