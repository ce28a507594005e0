"""GPT-2's byte-level alphabet: each byte as a printable character, shared by exporter and runtime.

Bytes that are printable Latin-1 (`!`..`~`, `¡`..`¬`, `®`..`ÿ`) stand for themselves; the other
68 bytes map to U+0100 + n in ascending byte order.
"""

from __future__ import annotations


def _build() -> list[str]:
    keep = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    out, n = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(0x100 + n))
            n += 1
    return out


BYTE_TO_CHAR: list[str] = _build()
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in enumerate(BYTE_TO_CHAR)}


def to_bytes(token: str) -> bytes | None:
    """The bytes a byte-level token string stands for, or None if it has a non-alphabet char."""
    try:
        return bytes([CHAR_TO_BYTE[c] for c in token])
    except KeyError:
        return None


def to_str(data: bytes) -> str:
    return "".join([BYTE_TO_CHAR[b] for b in data])
