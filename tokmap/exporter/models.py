"""Model-specific sections and META for each kind of model in the definition.

The vocabulary itself (token bytes, offsets, ids sorted by bytes) is common and built by build.py;
here each model adds what its runtime needs, keyed by the definition's model class.
"""

from __future__ import annotations

from array import array

from .. import mtok
from ..errors import SourceError
from .merges import live_merges, ranks_follow_results, ranks_permute


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
    n_source = len(keys)
    if m.byte_level:  # drop the merges that can never fire (proof and conditions: merges.py)
        live = live_merges(keys, token_bytes, byte_ids, mtok.NO_ID)
        if live is not None:
            keys = live
    ranks_from_results = ranks_follow_results(keys)
    ordered = sorted(keys)
    sections[mtok.SECTION_BYTE_IDS] = (mtok.U32, _u32(byte_ids))
    sections[mtok.SECTION_MERGE_KEYS] = (mtok.U64, _le(array("Q", ordered)))
    if not ranks_from_results:
        sections[mtok.SECTION_MERGE_RANKS] = (mtok.U32, _u32([keys[k][0] for k in ordered]))
    sections[mtok.SECTION_MERGE_RESULTS] = (mtok.U32, _u32([keys[k][1] for k in ordered]))
    meta = {"type": "bpe", "byte_level": m.byte_level, "ignore_merges": m.ignore_merges, "unk_id": m.unk_id,
            "ranks_from_results": ranks_from_results, "source_merges": n_source}
    if not ranks_from_results:  # (the batch merge then builds its codes without checking the ranks)
        meta["ranks_permutation"] = ranks_permute(keys)
    if ordered:  # the batch merge's bitmap, for byte- and char-level alike (Gemma 3: ~20 ms at first use)
        import numpy as np

        from ..runtime.models.bpe_batch import nonmono_bitmap

        table = (np.array(ordered, dtype=np.uint64), np.array([keys[x][0] for x in ordered], dtype=np.uint32),
                 np.array([keys[x][1] for x in ordered], dtype=np.uint32))
        bitmap = nonmono_bitmap(*table)
        sections[mtok.SECTION_MERGE_NONMONO] = (mtok.U8, bitmap)
        if m.byte_level:
            _bpe_aux(sections, token_bytes, regular, byte_ids, table, bitmap, keys, m.ignore_merges)
    if not m.byte_level:  # character-level symbols (SentencePiece-style BPE): see sp_steps
        from .sp_steps import char_bpe_meta

        meta.update(char_bpe_meta(d))
        if not m.continuing_subword_prefix and not m.end_of_word_suffix:
            _char_cut_sections(sections, token_bytes, regular, [keys[k][1] for k in ordered])
        if m.byte_fallback:
            meta.update(_byte_token_meta(token_bytes, regular, ordered))
    return meta


def _byte_token_meta(token_bytes, regular, ordered) -> dict:
    """Facts about the <0xHH> fallback tokens the runtime would otherwise derive on first use:
    the id of <0x00> when all 256 are findable at consecutive ids, and whether any is an operand
    of some merge (models/charcut.py)."""
    names = [f"<0x{b:02X}>".encode() for b in range(256)]
    where = {token_bytes[i]: i for i in regular if len(token_bytes[i]) == 6}
    ids = [where.get(n) for n in names]
    if None in ids:
        return {}
    byte_ids = set(ids)
    out = {"byte_tokens_merge": any((k >> 32) in byte_ids or (k & 0xFFFFFFFF) in byte_ids for k in ordered)}
    if ids == list(range(ids[0], ids[0] + 256)):
        out["byte_tokens_first"] = ids[0]
    return out


def _char_cut_sections(sections, token_bytes, regular, results) -> None:
    """The char-level BPE cut table (runtime/models/charcut.py), computed by the runtime's own
    function so the two cannot differ; nothing when the tokens are not whole UTF-8 chars."""
    import numpy as np

    from ..runtime.models.charcut import char_tables

    off = np.concatenate(([0], np.cumsum([len(b) for b in token_bytes]))).astype(np.int64)
    tb = np.frombuffer(b"".join(token_bytes), np.uint8)
    try:
        cps, ids, bigrams = char_tables(tb, off, np.array(regular, np.int64), np.array(results, np.int64))
    except (ValueError, UnicodeError):
        return
    order = np.argsort(cps, kind="stable")
    entries = (cps[order].astype(np.uint64) << np.uint64(32)) | ids[order].astype(np.uint64)
    sections[mtok.SECTION_CHAR_TOKENS] = (mtok.U64, entries.astype("<u8").tobytes())
    sections[mtok.SECTION_CHAR_BIGRAMS] = (mtok.U64, bigrams.astype("<u8").tobytes())


def _bpe_aux(sections, token_bytes, regular, byte_ids, table, bitmap, keys, ignore_merges) -> None:
    """Byte-level sections derived from the merge table (keys, ranks, results as numpy) and its
    non-monotone bitmap: unreached ids, piece_hash, atomic_chars and atomic_edges, cut_windows."""
    import numpy as np

    from ..runtime.models.bpe_batch import BatchMerger
    from ..runtime.models.bpe_cuts import window_keys
    from .atomic_chars import atomic_char_table
    from .bpe_aux import piece_hash_table, unreached_ids

    k, r, res = table
    merger = BatchMerger(k.tobytes(), r.astype("<u4").tobytes(), res.astype("<u4").tobytes(), bitmap)
    unreached = unreached_ids(token_bytes, regular, byte_ids, merger)
    sections[mtok.SECTION_UNREACHED] = (mtok.U32, _u32(unreached))
    # A piece that is a token encodes to it under ignore_merges; otherwise when merging reaches it.
    skip = set() if ignore_merges else set(unreached)
    whole = [i for i in regular if len(token_bytes[i]) > 1 and i not in skip]
    sections[mtok.SECTION_PIECE_HASH] = (mtok.U64, piece_hash_table(token_bytes, whole))
    atomic, edges = atomic_char_table(keys, token_bytes, regular, byte_ids)
    sections[mtok.SECTION_ATOMIC_CHARS] = (mtok.U64, atomic)
    sections[mtok.SECTION_ATOMIC_EDGES] = (mtok.U64, edges)
    tb = np.frombuffer(b"".join(token_bytes), dtype=np.uint8)
    off = np.concatenate(([0], np.cumsum([len(t) for t in token_bytes])))
    sections[mtok.SECTION_CUT_WINDOWS] = (mtok.U32, window_keys(tb, off, res).astype("<u4").tobytes())


def spm_sections(d, token_bytes, regular, sections) -> dict:
    """SentencePiece: scores (f32) and piece types by id, and the charsmap as the source has it."""
    m = d.model
    scores = array("f", m.scores)
    sections[mtok.SECTION_SPM_SCORES] = (mtok.F32, _le(scores))
    sections[mtok.SECTION_SPM_TYPES] = (mtok.U8, bytes(m.types))
    if m.charsmap:
        sections[mtok.SECTION_SPM_CHARSMAP] = (mtok.U8, m.charsmap)
    return {"type": "spm", "kind": m.kind, "unk_id": m.unk_id, "bos_id": m.bos_id,
            "byte_fallback": m.byte_fallback, "add_dummy_prefix": m.add_dummy_prefix,
            "remove_extra_whitespaces": m.remove_extra_whitespaces, "escape_whitespaces": m.escape_whitespaces,
            "treat_whitespace_as_suffix": m.treat_whitespace_as_suffix, "unk_surface": m.unk_surface}


# definition model class name -> builder(d, token_bytes, regular_ids_sorted, sections) -> META "model"
BUILDERS = {
    "BPEModel": bpe_sections,
    "SentencePieceModel": spm_sections,
}

from .bert import wordlevel_sections, wordpiece_sections  # noqa: E402

BUILDERS.update({"WordPieceModel": wordpiece_sections, "WordLevelModel": wordlevel_sections})

from .unigram import unigram_sections  # noqa: E402

BUILDERS["UnigramModel"] = unigram_sections


def model_sections(d, token_bytes, regular, sections) -> dict:
    builder = BUILDERS.get(type(d.model).__name__)
    if builder is None:
        raise SourceError(d.source_path, f"internal: no exporter for model {type(d.model).__name__}")
    return builder(d, token_bytes, regular, sections)
