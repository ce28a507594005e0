"""Derived byte-level BPE tables that make the runtime's batch merge cheap to start.

Both are functions of the merge and vocabulary sections, computed at export (exporter/models.py)
instead of on every process's first long encode (where they cost 10-40 ms):
  * non-monotone bitmap (runtime/models/bpe_batch.nonmono_bitmap, shared with the runtime's
    fallback for files without it): merge k is non-monotone when some merge using its result as an operand
    ranks lower -- the runtime may then merge only the leftmost occurrence per round;
  * unreached ids: tokens whose own bytes do not merge back to them. Under ignore_merges (and
    tiktoken) a piece equal to a token is that token, so the runtime checks a piece against the
    vocabulary only when merging gave several tokens and the piece is one of these;
  * piece hashes: hash32 << 32 | id, ascending, of every token of 2+ bytes that a piece of
    exactly its bytes encodes to -- all of them under ignore_merges (and tiktoken), else those
    merging reaches. The runtime then finds most distinct words of a text in one numpy lookup.
"""

from __future__ import annotations

import numpy as np

from .. import mtok


def unreached_ids(token_bytes: list[bytes], regular, byte_ids: list[int], merger) -> list[int]:
    """Regular tokens of 2+ bytes that merging their bytes does not turn into themselves."""
    ids = [i for i in regular if len(token_bytes[i]) > 1]
    if not ids:
        return []
    table = np.array(byte_ids, dtype=np.int64)
    sym = table[np.frombuffer(b"".join([token_bytes[i] for i in ids]), dtype=np.uint8)]
    ok_bytes = np.array([mtok.NO_ID not in [byte_ids[b] for b in token_bytes[i]] for i in ids])
    final, counts = merger.merge(sym, np.array([len(token_bytes[i]) for i in ids], dtype=np.int64))
    ends = np.cumsum(counts)
    reached = (counts == 1) & (final[ends - 1] == np.array(ids, dtype=np.int64))
    return [ids[k] for k in np.flatnonzero(~reached | ~ok_bytes)]


def piece_hash_table(token_bytes: list[bytes], ids: list[int]) -> bytes:
    """The piece_hash section for these token ids (each of 2+ bytes), little-endian u64."""
    from ..runtime.models.bpe_batch import piece_hashes

    if not ids:
        return b""
    raw = np.frombuffer(b"".join([token_bytes[i] for i in ids]), dtype=np.uint8)
    lengths = np.array([len(token_bytes[i]) for i in ids], dtype=np.int64)
    h = piece_hashes(raw, np.cumsum(lengths) - lengths, lengths)
    return np.sort((h << np.uint64(32)) | np.array(ids, dtype=np.uint64)).astype("<u8").tobytes()
