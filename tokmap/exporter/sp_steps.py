"""Exporter side of the character-level BPE vertical: Prepend/Replace normalizer steps and the
extra META of a BPE whose symbols are characters (SentencePiece-style, with byte fallback).

Replace regex patterns are compiled like split patterns (stdlib `re` over class-translated text,
Oniguruma semantics, pinned Unicode tables in blobs).
"""

from __future__ import annotations

from .. import mtok
from ..errors import UnsupportedError

# Characters tried as safe split points of a long piece (see char_bpe_meta).
_BOUNDARY_CANDIDATES = "\u2581 \n\t\r"


def compile_normalizer_step(d, s: dict, blobs, field: str = "normalizer.pattern") -> dict:
    """A Prepend / Replace normalizer step (or, with field="decoder.pattern", a Replace decoder's
    Regex, which tokenizers matches the same way)."""
    if s["type"] == "prepend":
        return {"type": "prepend", "prepend": s["prepend"]}
    if s["literal"]:
        return {"type": "replace", "literal": s["pattern"], "content": s["content"]}
    from .regex_compile import PatternError, compile_pattern

    try:
        cp = compile_pattern(s["pattern"], "onig", allow_empty=True)  # own iterator: sp_normalizers
    except PatternError as e:
        raise UnsupportedError(d.source_path, f"Replace pattern cannot be compiled exactly: {e}",
                               field=field) from None
    return {"type": "replace", "regex": cp.py_pattern, "content": s["content"],
            "class_index": blobs.add(mtok.U16, cp.class_index), "class_blocks": blobs.add(mtok.U8, cp.class_blocks),
            "unicode_version": cp.unicode_version}


def char_bpe_meta(d) -> dict:
    """META fields of a character-level BPE.

    `boundaries`: characters b such that no merge result contains b right after a different
    character. A piece can then be cut before every run of b (with no prefix/suffix, each char's
    initial symbols do not depend on its neighbours, and no merge can join across such a cut), so a
    whole document with no pre-tokenizer (Llama 2) merges word by word, with a per-word cache,
    instead of as one heap over millions of symbols. Same ids, same offsets.
    """
    m = d.model
    boundaries = ""
    tok_of = {}
    for i, b in enumerate(m.vocab):
        if b is not None:
            tok_of[i] = b
    # A char with no symbol at all (no unk token, no complete byte fallback) is dropped, which
    # makes its neighbours adjacent: then no cut is safe.
    have = set(tok_of.values())
    never_dropped = m.unk_id is not None or (m.byte_fallback and all(f"<0x{b:02X}>".encode() in have
                                                                      for b in range(256)))
    if not m.continuing_subword_prefix and not m.end_of_word_suffix and never_dropped:
        single = {b.decode("utf-8", "surrogatepass") for b in tok_of.values() if len(b) <= 4}
        cands = {c for c in _BOUNDARY_CANDIDATES if c in single}
        for _l, _r, res, _rank in m.merges:
            if not cands:
                break
            r = tok_of[res].decode("utf-8", "surrogatepass")
            for c in list(cands):
                k = r.find(c, 1)
                while k > 0:
                    if r[k - 1] != c:
                        cands.discard(c)
                        break
                    k = r.find(c, k + 1)
        boundaries = "".join(sorted(cands))
    return {"byte_fallback": m.byte_fallback, "fuse_unk": m.fuse_unk,
            "continuing_subword_prefix": m.continuing_subword_prefix, "end_of_word_suffix": m.end_of_word_suffix,
            "boundaries": boundaries}


def _data(name: str) -> str:
    import os

    with open(os.path.join(os.path.dirname(__file__), "data", name), encoding="utf-8") as f:
        return f.read()


def _block_tables(values: bytearray) -> tuple[bytes, bytes]:
    """Per-code-point byte values -> (class_index u16[0x1100], class_blocks), the two-level table
    runtime/charclass.py reads (identical blocks shared)."""
    from array import array

    from .build import _le

    index, blocks, seen = array("H"), [], {}
    for b in range(0x1100):
        blk = bytes(values[b << 8 : (b + 1) << 8])
        k = seen.get(blk)
        if k is None:
            k = seen[blk] = len(blocks)
            blocks.append(blk)
        index.append(k)
    return _le(index), b"".join(blocks)


def _digits_step(d, s, blobs) -> dict:
    """Digits as a split over translated text: ASCII stays itself, a non-ASCII code point becomes
    chr(0x81) when Rust's char::is_numeric holds (as measured from tokenizers by tools/gen_numeric_hf.py),
    else 0x80."""
    text = _data("numeric_hf.txt")
    version = text.split("\n", 1)[0].split()[1]
    values = bytearray([0x80]) * 0x110000
    values[:128] = bytes(range(128))
    for line in text.splitlines()[1:]:
        a, b = (int(x, 16) for x in line.split())
        for cp in range(max(a, 128), b + 1):
            values[cp] = 0x81
    index, blocks = _block_tables(values)
    return {"type": "split", "behavior": "isolated" if s["individual_digits"] else "contiguous", "invert": False,
            "regex": "[0-9\x81]", "class_index": blobs.add(mtok.U16, index), "class_blocks": blobs.add(mtok.U8, blocks),
            "unicode_version": version}


def _scripts_step(d, s, blobs) -> dict:
    """UnicodeScripts: a per-code-point script number (0 = Any) from tokenizers' own table
    (tools/gen_scripts9.py), with the pre-tokenizer's fixes baked in: U+30FC, Hiragana and
    Katakana count as Han, and ' ' is Any."""
    names = {"Any": 0}
    values = bytearray(0x110000)
    lines = _data("scripts_hf.txt").splitlines()
    runs = [(int(a, 16), n) for a, n in (ln.split() for ln in lines[1:])]
    for k, (start, name) in enumerate(runs):
        end = runs[k + 1][0] if k + 1 < len(runs) else 0x110000
        if name in ("Hiragana", "Katakana"):
            name = "Han"
        v = names.setdefault(name, len(names))
        values[start:end] = bytes([v]) * (end - start)
    values[0x30FC] = names.setdefault("Han", len(names))
    values[0x20] = 0
    assert len(names) < 256
    index, blocks = _block_tables(values)
    return {"type": "scripts", "class_index": blobs.add(mtok.U16, index), "class_blocks": blobs.add(mtok.U8, blocks),
            "unicode_version": "tokenizers-scripts-9"}


def compile_pre_tokenizer_step(d, s: dict, blobs) -> dict:
    if s["type"] == "digits":
        return _digits_step(d, s, blobs)
    return _scripts_step(d, s, blobs)
