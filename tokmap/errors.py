"""The errors tokmap raises. Every one names the file and where in it the problem is."""

from __future__ import annotations


class TokmapError(Exception):
    """Base class of every error tokmap raises on purpose."""


class FormatError(TokmapError):
    """A .mtok file is truncated, corrupted or from an unsupported version."""

    def __init__(self, path, message: str, section: str | None = None, offset: int | None = None):
        self.path = str(path)
        self.section = section
        self.offset = offset
        where = []
        if section is not None:
            where.append(f"section {section}")
        if offset is not None:
            where.append(f"offset {offset}")
        loc = f" ({', '.join(where)})" if where else ""
        super().__init__(f"{self.path}{loc}: {message}")


class SourceError(TokmapError):
    """A source tokenizer file (tokenizer.json, .tiktoken, Tekken json) is malformed."""

    def __init__(self, path, message: str, field: str | None = None, line: int | None = None):
        self.path = str(path)
        self.field = field
        self.line = line
        where = []
        if field is not None:
            where.append(f"field {field}")
        if line is not None:
            where.append(f"line {line}")
        loc = f" ({', '.join(where)})" if where else ""
        super().__init__(f"{self.path}{loc}: {message}")


class UnsupportedError(SourceError):
    """The source uses a component the exporter does not support: refused, never skipped."""


class EncodeError(TokmapError, ValueError):
    """Input the tokenizer refuses (e.g. a disallowed special token in tiktoken mode)."""


class ArgumentError(TokmapError, TypeError):
    """A call with arguments of the wrong kind (a user error, never reported as file corruption)."""
