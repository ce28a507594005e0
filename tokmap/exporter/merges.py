"""Shrink a byte-level BPE merge table without changing a single encoding.

Two reductions, each proved at export for the file at hand and skipped when its proof fails:

1. Merges that can never fire are dropped. The BPE loop (lowest rank first, ties leftmost; the
   same in tokenizers, tiktoken and models/bpe.py) treats a span of bytes the same way wherever it
   sits: until the span becomes one symbol, no merge crosses its edges, and the pairs inside it are
   ordered by (rank, position) among themselves whatever happens outside. So a symbol covering the
   span is formed, in any text, by exactly the merge that forms it when the span's bytes are
   encoded alone. Encoding every merge result's bytes alone therefore finds the one merge per
   result that can ever fire; the others (tiktoken-derived tables list every split of a token:
   llama3 has 280,147 merges for 127,744 results) never reach the top of the queue, so leaving
   them out changes no step of any run. The argument needs the initial symbols to be the bytes'
   own single-byte tokens and every result to be its parts' bytes joined; without that nothing is
   dropped.

2. The rank section is left out when the ranks are a strictly increasing function of the results
   (equal ranks exactly for equal results). Comparing results then orders and ties every pair of
   merges exactly as comparing ranks does, so the results array serves as the ranks.
"""

from __future__ import annotations


def live_merges(merges: dict[int, tuple[int, int]], token_bytes: list[bytes], byte_ids: list[int],
                missing: int) -> dict[int, tuple[int, int]] | None:
    """The merges (key -> (rank, result)) that can fire, or None when the proof does not apply.

    `byte_ids` maps each byte to its single-byte token; `missing` is the "no token" marker.
    """
    if missing in byte_ids:
        return None  # a byte without a token becomes unk or vanishes: spans are not their bytes
    for key, (_rank, res) in merges.items():
        if token_bytes[res] != token_bytes[key >> 32] + token_bytes[key & 0xFFFFFFFF]:
            return None
    fired: dict[bytes, int | None] = {}  # a result's bytes -> the key that forms them alone
    for _rank, res in merges.values():
        data = token_bytes[res]
        if data not in fired:
            fired[data] = _last_merge(merges, [byte_ids[b] for b in data])
    return {key: v for key, v in merges.items() if fired[token_bytes[v[1]]] == key}


def _last_merge(merges: dict[int, tuple[int, int]], ids: list[int]) -> int | None:
    """Run the BPE loop on `ids`; the key of the merge that left one symbol, or None if none did."""
    if len(ids) < 2:
        return None
    pending = [merges.get((a << 32) | b) for a, b in zip(ids, ids[1:])]
    while True:
        best, k = None, -1
        for j, p in enumerate(pending):
            if p is not None and (best is None or p[0] < best[0]):  # strict: ties stay leftmost
                best, k = p, j
        if best is None:
            return None
        key = (ids[k] << 32) | ids[k + 1]
        ids[k : k + 2] = [best[1]]
        del pending[k]
        if len(ids) == 1:
            return key
        if k > 0:
            pending[k - 1] = merges.get((ids[k - 1] << 32) | ids[k])
        if k < len(ids) - 1:
            pending[k] = merges.get((ids[k] << 32) | ids[k + 1])


def ranks_permute(merges: dict[int, tuple[int, int]]) -> bool:
    """True when the m merges' ranks are 0 .. m - 1, each once (SentencePiece-style BPE: Gemma 3,
    Llama 2): no two merges share a rank and none is skipped."""
    ranks = {rank for rank, _res in merges.values()}
    return len(ranks) == len(merges) and (not ranks or (min(ranks) == 0 and max(ranks) == len(ranks) - 1))


def ranks_follow_results(merges: dict[int, tuple[int, int]]) -> bool:
    """True when rank = f(result) for a strictly increasing f, so results can stand in for ranks."""
    by_result = sorted((res, rank) for rank, res in merges.values())
    for (r0, k0), (r1, k1) in zip(by_result, by_result[1:]):
        if (k1 != k0) if r1 == r0 else (k1 <= k0):
            return False
    return True
