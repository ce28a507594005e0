"""Unicode 9.0 normalization tables for .mtok files (exporter side).

HF `tokenizers` runs NFC/NFD/NFKC/NFKD with the Unicode 9.0 tables of the
crate unicode-normalization-alignments 0.1.12, so tokmap ships its own pinned
tables instead of trusting the running Python's `unicodedata`.
`tools/gen_ucd9_norm.py` derives them once from unicodedata2 9.0 into
`data/ucd9_norm.bin`; `build_norm_blob` copies out of that file only the
sections a tokenizer's normalizers need, and
`tokmap.runtime.normalize_unicode.UnicodeNormalizer` reads the result in place.

Container layout (little-endian throughout; every section starts on an
8-byte boundary so the runtime can `memoryview.cast` it without copying):

    header, 32 bytes
      0   8s   magic b"TMKNORM\\0"
      8   u16  format version (1)
      10  u16  number of sections
      12  u32  total size in bytes (must equal the blob length)
      16  8s   Unicode version, ASCII, NUL padded (b"9.0.0")
      24  u32  forms the blob can serve: 1 NFD, 2 NFC, 4 NFKD, 8 NFKC
      28  u32  reserved, 0
    directory, 16 bytes per section
      tag 4s, offset u32, length u32, count u32

    CCC_  count = n; u32[n] runs `(first_code_point << 8) | ccc`, sorted,
          the first run starting at 0; a run lasts until the next one starts.
    CDEC  full (recursive) canonical decompositions, Hangul syllables
          excluded (algorithmic).  count = n;
          u32 keys[n] sorted | u16 ends[n] (then pad to 4) | UTF-8 data.
          Entry i spans data[ends[i-1]:ends[i]] (ends[-1] taken as 0).
    KDEC  same layout: full compatibility decompositions, only for the code
          points where they differ from CDEC (including those CDEC lacks).
    COMP  canonical composition pairs (primary composites only).
          u32 m, u32 n | u32 seconds[m] sorted | u32 keys[n] sorted, each
          `(first << 8) | index of the second in seconds` | u32 results[n].
          Count = n.  Hangul composes algorithmically and is not listed.

The forms need: NFD = CCC_+CDEC, NFC = +COMP, NFKD = CCC_+CDEC+KDEC,
NFKC = all four.
"""

from __future__ import annotations

import os
import struct

MAGIC = b"TMKNORM\0"
FORMAT_VERSION = 1
HEADER = struct.Struct("<8sHHI8sII")
DIR_ENTRY = struct.Struct("<4sIII")
UNICODE_VERSION = "9.0.0"

FORM_BITS = {"NFD": 1, "NFC": 2, "NFKD": 4, "NFKC": 8}
# Sections each form needs, in the order they are written.
FORM_SECTIONS = {
    "NFD": (b"CCC_", b"CDEC"),
    "NFC": (b"CCC_", b"CDEC", b"COMP"),
    "NFKD": (b"CCC_", b"CDEC", b"KDEC"),
    "NFKC": (b"CCC_", b"CDEC", b"KDEC", b"COMP"),
}
SECTION_ORDER = (b"CCC_", b"CDEC", b"KDEC", b"COMP")

DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ucd9_norm.bin")


def _pad8(n: int) -> int:
    return (n + 7) & ~7


def pack_container(sections, forms_mask: int, unicode_version: str = UNICODE_VERSION) -> bytes:
    """Lay out `sections` ([(tag, payload bytes, count)]) behind a header.

    Shared with tools/gen_ucd9_norm.py so the data file and the exported
    blobs have one writer and one format.
    """
    n = len(sections)
    pos = _pad8(HEADER.size + DIR_ENTRY.size * n)
    directory = []
    for tag, payload, count in sections:
        if len(tag) != 4:
            raise ValueError(f"section tag {tag!r} is not 4 bytes")
        directory.append((tag, pos, len(payload), count))
        pos = _pad8(pos + len(payload))
    total = pos
    out = bytearray(total)
    ver = unicode_version.encode("ascii")
    if len(ver) > 8:
        raise ValueError("unicode version string longer than 8 bytes")
    HEADER.pack_into(out, 0, MAGIC, FORMAT_VERSION, n, total, ver, forms_mask, 0)
    for i, (tag, off, length, count) in enumerate(directory):
        DIR_ENTRY.pack_into(out, HEADER.size + i * DIR_ENTRY.size, tag, off, length, count)
        out[off:off + length] = sections[i][1]
    return bytes(out)


def _read_sections(data: bytes):
    """Split a container into {tag: (payload, count)} after full validation.

    Validation is delegated to the runtime reader, so exported blobs are
    checked by the very code that will load them.
    """
    from tokmap.runtime.normalize_unicode import UnicodeNormalizer

    norm = UnicodeNormalizer(memoryview(data))
    if norm.unicode_version != UNICODE_VERSION:
        raise ValueError(
            f"{DATA_FILE}: tables are Unicode {norm.unicode_version}, expected {UNICODE_VERSION}")
    return {tag: (bytes(data[off:off + length]), count)
            for tag, (off, length, count) in norm.sections.items()}


_source_cache: dict | None = None


def _source_sections():
    global _source_cache
    if _source_cache is None:
        with open(DATA_FILE, "rb") as f:
            _source_cache = _read_sections(f.read())
    return _source_cache


def build_norm_blob(forms: set[str]) -> bytes:
    """Blob holding only the tables needed by `forms` (subset of NFC/NFD/NFKC/NFKD)."""
    forms = set(forms)
    unknown = forms - FORM_BITS.keys()
    if unknown:
        raise ValueError(f"unknown normalization form(s): {sorted(unknown)}")
    if not forms:
        raise ValueError("build_norm_blob needs at least one form")
    needed = set()
    mask = 0
    for form in forms:
        needed.update(FORM_SECTIONS[form])
        mask |= FORM_BITS[form]
    src = _source_sections()
    missing = needed - src.keys()
    if missing:
        raise ValueError(f"{DATA_FILE} lacks section(s) {sorted(missing)}")
    sections = [(tag, src[tag][0], src[tag][1]) for tag in SECTION_ORDER if tag in needed]
    return pack_container(sections, mask)


def pattern_fields(blob: bytes, form: str, blobs) -> dict:
    """A unicode normalizer step's `patterns`: the runtime's (scan, exact) regex texts for `form`
    over `blob`, each as a U8 blob, with its engine code when this Python can make it
    (exporter/sre_code.py): a runtime then neither builds nor compiles them on its first
    non-ASCII text (~6-14 ms). blobs: the exporter's blob list (add(dtype, bytes) -> number)."""
    from .. import mtok
    from ..runtime.normalize_unicode import UnicodeNormalizer
    from .sre_code import compile_code

    out = {}
    for k, text in zip(("scan", "exact"), UnicodeNormalizer(blob).pattern_texts(form)):
        out[k] = blobs.add(mtok.U8, text.encode("ascii"))
        stored = compile_code(text)
        if stored is not None:
            info, words = stored
            out[k + "_code"] = dict(info, blob=blobs.add(mtok.U32, words))
    return out
