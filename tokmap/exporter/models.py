"""Model-specific sections and META for each kind of model in the definition.

The vocabulary itself (token bytes, offsets, ids sorted by bytes) is common and built by build.py;
here each model adds what its runtime needs, keyed by the definition's model class.
"""

from __future__ import annotations

from array import array

from .. import mtok
from ..errors import SourceError


def _u32(values) -> bytes:
    from .build import _u32 as u32

    return u32(values)


def _le(a: array) -> bytes:
    from .build import _le as le

    return le(a)


def bpe_sections(d, token_bytes, regular, sections) -> dict:
    m = d.model
    byte_ids = [mtok.NO_ID] * 256
    for i in regular:
        b = token_bytes[i]
        if len(b) == 1:
            byte_ids[b[0]] = i
    keys = {}
    for left, right, result, rank in m.merges:
        keys[(left << 32) | right] = (rank, result)
    ordered = sorted(keys)
    sections[mtok.SECTION_BYTE_IDS] = (mtok.U32, _u32(byte_ids))
    sections[mtok.SECTION_MERGE_KEYS] = (mtok.U64, _le(array("Q", ordered)))
    sections[mtok.SECTION_MERGE_RANKS] = (mtok.U32, _u32([keys[k][0] for k in ordered]))
    sections[mtok.SECTION_MERGE_RESULTS] = (mtok.U32, _u32([keys[k][1] for k in ordered]))
    return {"type": "bpe", "byte_level": m.byte_level, "ignore_merges": m.ignore_merges, "unk_id": m.unk_id}


# definition model class name -> builder(d, token_bytes, regular_ids_sorted, sections) -> META "model"
BUILDERS = {
    "BPEModel": bpe_sections,
}


def model_sections(d, token_bytes, regular, sections) -> dict:
    builder = BUILDERS.get(type(d.model).__name__)
    if builder is None:
        raise SourceError(d.source_path, f"internal: no exporter for model {type(d.model).__name__}")
    return builder(d, token_bytes, regular, sections)
