"""Exporter side of the Unigram / Precompiled / Metaspace vertical (tokenizer.json sources).

- Unigram: scores go into the f64 section unigram_scores; META carries unk_id, byte_fallback, the
  piece count and min(score) (the unk node's base).
- Precompiled: the SentencePiece charsmap is embedded unchanged as a u8 blob, plus the grapheme
  cluster table (Unicode 17.0, from data/grapheme17.txt) as a u32 blob of runs, once per file.
- Nmt and Metaspace steps need no data.
"""

from __future__ import annotations

import os
from array import array

from .. import mtok

GRAPHEME_VERSION = "17.0.0"


def unigram_sections(d, token_bytes, regular, sections) -> dict:
    m = d.model
    scores = array("d", m.scores)
    from .build import _le

    sections[mtok.SECTION_UNIGRAM_SCORES] = (mtok.F64, _le(scores))
    return {"type": "unigram", "byte_level": False, "unk_id": m.unk_id, "byte_fallback": m.byte_fallback,
            "n_pieces": len(m.vocab),
            "min_score": min(m.scores) if m.scores else 0.0}


def grapheme_runs() -> bytes:
    """The u32 run table `(start << 8) | value` from the pinned data file."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "grapheme17.txt")
    runs = array("I")
    with open(path, encoding="ascii") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            if line.startswith("@unicode"):
                if line.split()[1] != GRAPHEME_VERSION:
                    raise ValueError(f"{path}: expected Unicode {GRAPHEME_VERSION}")
                continue
            start, value = line.split()
            runs.append((int(start, 16) << 8) | int(value))
    from .build import _le

    return _le(runs)


def compile_normalizer_steps(d, steps: list[dict], blobs) -> dict[int, dict]:
    """index in d.normalizer -> compiled step, for the steps of this vertical."""
    out = {}
    graphemes = None
    for k, s in enumerate(steps):
        if s["type"] == "precompiled":
            if graphemes is None:
                graphemes = blobs.add(mtok.U32, grapheme_runs())
            out[k] = {"type": "precompiled", "charsmap": blobs.add(mtok.U8, s["charsmap"]), "graphemes": graphemes,
                      "unicode_version": GRAPHEME_VERSION}
        elif s["type"] == "nmt":
            out[k] = {"type": "nmt"}
    return out
