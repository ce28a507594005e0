"""tokmap: tokenizers compiled ahead of time into one memory-mapped .mtok file.

    import tokmap
    tokmap.export("tokenizer.json", "llama3.mtok")   # needs the exporter extras (regex, click)
    tok = tokmap.load("llama3.mtok")                  # maps the file; builds nothing
    tok.encode("Hello, world!")                       # ids exactly as the source's reference library

Importing tokmap pulls in the standard library only; numpy is imported on first use by the paths
that pay for it (long texts, batches, `as_array=True`).
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import ArgumentError, EncodeError, FormatError, SourceError, TokmapError, UnsupportedError  # noqa: E402
from .runtime.tokenizer import Tokenizer, load  # noqa: E402


def export(src, dst, fmt: str | None = None, encoding: str | None = None) -> str:
    """Convert a tokenizer.json, .tiktoken or Tekken json file into a .mtok file."""
    from .exporter import export as _export

    return _export(src, dst, fmt=fmt, encoding=encoding)


__all__ = ["load", "export", "Tokenizer", "TokmapError", "FormatError", "SourceError", "UnsupportedError", "ArgumentError",
           "EncodeError", "__version__"]
