"""The parts of long pieces, at once (numpy; imported by the model modules that use it).

The models that cut long pieces where no merge crosses (charcut.py, and bpe_segmented.py) make
tens of thousands of parts, most of them repeats. Each step here is a few C-level passes where a
slice, a lookup or a tuple per part costs Python: the parts as strings (part_strings), the
distinct ones (dedupe; distinct_parts, which makes a string only for each distinct short part),
each then encoded once, every occurrence's ids (spread, ranges), and the ids of each as a tuple
for a cache (tuples).
"""

from __future__ import annotations

from itertools import count

import numpy as np

SENTINELS = "\x00\uffff\U0010ffff\x01"  # chars to join parts with, the first one the text lacks


def sentinel(text: str) -> str | None:
    """The first SENTINELS char text lacks, or None (each test is a scan of the text: ~0.3 ms
    for wagahai.txt's 375K chars, so a caller making strings twice from one text asks once)."""
    return next((c for c in SENTINELS if c not in text), None)


def part_strings(text: str, cps: np.ndarray, starts: np.ndarray, ends: np.ndarray, sep: str | None = "") -> list[str]:
    """text[starts[k]:ends[k]] for every k (cps: text's code points, uint32). The parts are
    gathered back to back with a sentinel char after each, decoded once and split: C-level,
    where a slice each costs ~230 ns of Python (Gemma 3 over wagahai.txt: 77K parts, 18 -> 7
    ms). Slices when the text holds every sentinel. sep: sentinel(text), when the caller has it."""
    if sep == "":
        sep = sentinel(text)
    if sep is None or not len(starts):
        return list(map(text.__getitem__, map(slice, starts.tolist(), ends.tolist())))
    lens = ends - starts
    lens += 1  # each part and its sentinel
    at = np.cumsum(lens)  # where each part's sentinel goes, + 1
    src = np.repeat(starts - (at - lens), lens)
    src += np.arange(len(src))
    buf = np.take(cps, src, mode="clip")  # (a sentinel slot's source is the next char: overwritten)
    buf[at - 1] = ord(sep)
    out = buf.tobytes().decode("utf-32-le", "surrogatepass").split(sep)
    out.pop()  # (after the last sentinel)
    return out


def dedupe(parts: list[str]):
    """(the distinct parts, in first-occurrence order; each part's index among them, int64).
    One pass of dict work: each part's first occurrence by setdefault, then numbered in numpy (a
    first occurrence is its own; a dict of indices and a lookup per part cost a second pass:
    Gemma 3 over wagahai.txt, 77K parts, 9.4 -> ~8 ms)."""
    seen: dict[str, int] = {}
    first = np.fromiter(map(seen.setdefault, parts, count()), np.int64, len(parts))
    number = np.cumsum(first == np.arange(len(parts)))
    number -= 1
    return list(seen), number[first]


SHORT_PART = 6  # chars; a part up to this long is its own key: KEY_CHARS code points in each word
KEY_CHARS = 3
HASH_MIXES = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F)  # odd multipliers: one per key word (SHORT_PART / KEY_CHARS)
SLOT_BITS = 20  # at most 2^20 slots (4 MiB of int32) in distinct_parts' table, whatever the parts


def distinct_parts(text: str, cps: np.ndarray, starts: np.ndarray, ends: np.ndarray, strings: bool = True):
    """dedupe(part_strings(text, cps, starts, ends)), with a string made only for each distinct
    part of up to SHORT_PART chars rather than for every occurrence (Gemma 3's parts of
    wagahai.txt: 74K, 17K distinct; multi.txt: 939K). Such a part is exactly a few words of
    KEY_CHARS code points + 1 each (21 bits; 0 past its end), hashed into one. The hash's top
    bits pick a slot of a table, which takes the first part of each slot by one scatter (the
    last write wins, written in reverse); each part whose words equal its slot's first part's is
    grouped with it. The few parts that share a slot with a different part are grouped by one
    argsort of their whole hashes, each checked against its group's first; a group holding two
    different parts (a hash collision) sends all of them to dedupe. An argsort of every part's
    hash had done the grouping: Gemma 3 over wagahai.txt 7.3 -> 6.4 ms, multi.txt 250 -> 222 ms
    (min of 5). Longer parts take dedupe. The distinct parts come in no particular order
    (callers use each part's index among them).
    With strings=False the first item is instead, for each distinct part, the index of one of
    its occurrences (a caller with nothing to look up then makes strings for none)."""
    n = len(starts)
    lens = ends - starts
    short = np.flatnonzero(lens <= SHORT_PART)
    if len(short) * 2 < n or len(short) < 64:  # (few short parts: the sort does not pay)
        return _as_asked(dedupe(part_strings(text, cps, starts, ends)), strings)
    at, ln = starts[short], lens[short]
    low, high = int(ln.min()), int(ln.max())
    keys = []
    for word in range((high + KEY_CHARS - 1) // KEY_CHARS):
        key = np.zeros(len(short), dtype=np.uint64)
        for j in range(min(KEY_CHARS, high - word * KEY_CHARS)):
            k = word * KEY_CHARS + j
            c = np.take(cps, at + k, mode="clip").astype(np.uint64)
            c += np.uint64(1)
            if k >= low:  # (a char past some part's end: 0 there)
                c *= ln > k
            c <<= np.uint64(21 * j)
            key |= c
        keys.append(key)
    h = keys[0] * np.uint64(HASH_MIXES[0])
    for key, mix in zip(keys[1:], HASH_MIXES[1:]):
        h ^= key * np.uint64(mix)
    m = len(short)
    bits = min(max(10, m.bit_length() + 1), SLOT_BITS)
    slot = (h >> np.uint64(64 - bits)).astype(np.intp)
    idx = np.arange(m, dtype=np.int32)
    table = np.empty(1 << bits, dtype=np.int32)  # (only the slots written are read)
    table[slot[::-1]] = idx[::-1]  # each slot's first part
    first = table[slot]
    same = keys[0] == keys[0][first]
    for key in keys[1:]:
        same &= key == key[first]
    is_first = first == idx
    number = np.cumsum(is_first, dtype=np.int64)
    number -= 1
    group = number[first]
    rep = np.flatnonzero(is_first)  # an occurrence of each group's part
    if not same.all():  # parts whose slot's first part is another part: grouped by sorting
        odd = np.flatnonzero(~same)
        ho = h[odd]
        order = np.argsort(ho)
        hs = ho[order]
        head = np.empty(len(hs), dtype=bool)
        head[:1] = True
        np.not_equal(hs[1:], hs[:-1], out=head[1:])
        sub = np.empty(len(hs), dtype=np.int64)
        sub[order] = np.cumsum(head) - 1
        odd_rep = odd[order[np.flatnonzero(head)]]
        if any((key[odd] != key[odd_rep][sub]).any() for key in keys):
            return _as_asked(dedupe(part_strings(text, cps, starts, ends)), strings)
        group[odd] = sub + len(rep)
        rep = np.concatenate((rep, odd_rep))
    sep = sentinel(text) if strings or len(short) < n else None
    distinct = part_strings(text, cps, at[rep], at[rep] + ln[rep], sep) if strings else short[rep]
    inv = np.empty(n, dtype=np.int64)
    inv[short] = group
    if len(short) < n:
        long = np.flatnonzero(lens > SHORT_PART)
        more, long_inv = _as_asked(dedupe(part_strings(text, cps, starts[long], ends[long], sep)), strings)
        inv[long] = long_inv + len(distinct)
        distinct = distinct + more if strings else np.concatenate((distinct, long[more]))
    return distinct, inv


def _as_asked(got, strings: bool):
    """dedupe's (distinct strings, inv), or with strings=False (an occurrence of each, inv)."""
    return got if strings else (first_occurrences(got[1], len(got[0])), got[1])


def first_occurrences(inv: np.ndarray, n: int) -> np.ndarray:
    """For each of n distinct parts, the index of its first occurrence (inv: each occurrence's
    distinct part, every one of the n present)."""
    first = np.empty(n, dtype=np.int64)
    first[inv[::-1]] = np.arange(len(inv) - 1, -1, -1)  # (the last write wins: the first occurrence)
    return first


def spread(flat: np.ndarray, begin: np.ndarray, length: np.ndarray, inv: np.ndarray):
    """(every occurrence's ids back to back, how many each): occurrence k of distinct part
    d = inv[k] takes flat[begin[d]:begin[d] + length[d]]. Gathers, where a lookup, a tuple and
    a chain per occurrence cost ~300 ns of Python (tens of thousands of parts in a long text)."""
    olen = length[inv]
    return flat[ranges(begin[inv], olen)], olen


def ranges(begin: np.ndarray, length: np.ndarray) -> np.ndarray:
    """begin[k], begin[k] + 1, ..., begin[k] + length[k] - 1 for every k, back to back (int64):
    where each part's ids go, or come from, in a flat array."""
    first = np.cumsum(length, dtype=np.int64)
    first -= length  # where range k starts in the result
    out = np.repeat(begin - first, length)
    out += np.arange(len(out))
    return out


TUPLE_COLUMNS = 8  # ids per part up to which tuples() zips columns (longer parts: slices of one list)


def tuples(flat: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> list[tuple]:
    """tuple(flat[starts[k]:starts[k] + counts[k]]) for every k, made by C-level calls: the parts
    of one count c take their ids as c gathered columns, zipped into tuples, and parts of more ids
    than TUPLE_COLUMNS (a Japanese piece: Llama 3's 30K distinct pieces of wagahai.txt, 11K of
    them longer) take slices of one list made of all their ids. A slice of a list and a tuple of
    it per part cost ~3x as much as the columns (o200k over 10^5 random letters: 24K parts, 8.4 ->
    5.9 ms); a numpy slice and a tolist per long part had cost 13.4-13.9 ms of tuples() in a cold
    call over wagahai.txt, the one list 11.4-11.6. Each group's tuples go to their places by one
    scatter into an object array (np.fromiter of them), where a Python loop had put them there one
    by one (`any(map(out.__setitem__, ...))` is no C-level loop: list.__setitem__ is a slot
    wrapper, called with an argument tuple each time): the same parts, min of 5, o200k's 18.9K
    distinct pieces of 10^5 random letters 6.2 -> 5.2 ms, cl100k's 6.9K of code.txt 1.2 -> 0.9,
    Llama 3's wagahai.txt 14.4 -> 12.9. A part of no ids gets ()."""
    n = len(counts)
    out = np.empty(n, dtype=object)
    out.fill(())
    top = int(counts.max()) if n else 0
    for c in range(1, min(top, TUPLE_COLUMNS) + 1):
        which = np.flatnonzero(counts == c)
        if len(which):
            at = starts[which]
            cols = [flat.take(at + k).tolist() for k in range(c)]
            out[which] = np.fromiter(zip(*cols), dtype=object, count=len(which))
    if top > TUPLE_COLUMNS:
        which = np.flatnonzero(counts > TUPLE_COLUMNS)
        long_counts = counts[which]
        ids = flat[ranges(starts[which], long_counts)].tolist()
        ends = np.cumsum(long_counts)
        begins = (ends - long_counts).tolist()
        parts = map(tuple, map(ids.__getitem__, map(slice, begins, ends.tolist())))
        out[which] = np.fromiter(parts, dtype=object, count=len(which))
    return out.tolist()


def byte_lengths(raw: np.ndarray, texts: list[str], n_chars: list[int] | None = None) -> np.ndarray:
    """Each text's UTF-8 length (numpy int64); raw: the texts joined, as UTF-8 bytes (uint8);
    n_chars: each text's length in chars, when the caller has them (else a pass over the texts). From
    where each char starts in raw: where a text ends, in chars, says where it ends in bytes. (Each
    char's width from its code point took 4 arrays of 8 bytes a char, whose fresh pages a first
    call pays: llama3 over multi.txt's distinct pieces, 1.9M chars, ~140 -> ~20 ms.)"""
    lengths = np.fromiter(map(len, texts) if n_chars is None else n_chars, dtype=np.int64, count=len(texts))
    if len(texts) and len(raw) != int(lengths.sum()):
        ends = np.cumsum(lengths)
        byte_end = np.flatnonzero((raw & 0xC0) != 0x80).take(ends, mode="clip")  # (clip: ends at the last char)
        byte_end[ends == ends[-1]] = len(raw)
        lengths[0] = byte_end[0]
        np.subtract(byte_end[1:], byte_end[:-1], out=lengths[1:])
    return lengths
