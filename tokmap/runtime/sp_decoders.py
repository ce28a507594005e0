"""Decoder steps of SentencePiece-style and CTC tokenizers (tokenizers' decode_chain rules).

Each factory takes the META step (and the mapped file when marked `wants_file`: a Replace with a
compiled Regex reads its class tables) and returns a function list[str] -> list[str]; decoders.py
registers them by type. Behaviour, including the odd corners, follows tokenizers 0.23
(CONFORMANCE.md section 9).
"""

from __future__ import annotations

from itertools import compress, islice, repeat
from operator import is_not, ne

_HEX = frozenset("0123456789abcdefABCDEF")


def replace(step, f=None):
    if "literal" not in step:  # a compiled Regex pattern: the Replace normalizer's matcher
        from .sp_normalizers import Replace

        rx = Replace(f, step)
        return lambda tokens: [rx.normalize(t, False)[0] for t in tokens]
    pat, content = step["literal"], step["content"]
    # tokenizers runs the escaped string as a regex: an empty one matches at every char boundary
    # (as str.replace does), except that an empty token is left alone.
    if not pat:
        return lambda tokens: [t.replace(pat, content) if t else t for t in tokens]
    # (a pattern that is not empty leaves an empty token empty: str.replace over all, in C)
    return lambda tokens: list(map(str.replace, tokens, repeat(pat), repeat(content)))


# Every `<0xHH>` token ByteFallback takes (6 UTF-8 bytes) and its byte, as Rust's u8::from_str_radix
# parses HH: two hex digits, or '+' and one; 506 strings. One dict lookup a token, where testing
# each token's shape cost ~4 us (Gemma 3 over utf8seq.txt's 847K ids: 3.5 of a 6 s decode).
_BYTE_TOKENS = {f"<0x{a}{b}>": int(b if a == "+" else a + b, 16) for a in sorted(_HEX) + ["+"] for b in sorted(_HEX)}


def _flush(run: bytearray, out: list):
    try:
        out.append(run.decode("utf-8"))
    except UnicodeDecodeError:
        # tokenizers: an invalid run becomes one U+FFFD per byte, valid chars in it included.
        out.extend(["\ufffd"] * len(run))
    run.clear()


def byte_fallback(step):
    def run_(tokens):
        # The byte tokens' places in one C-level pass; the tokens between runs of them are
        # copied by slices, and only the runs are visited one by one (Llama 2 over 1M ids of
        # multi.txt: a loop over every token took 0.7 s).
        byte = list(map(_BYTE_TOKENS.get, tokens))
        at = list(compress(range(len(byte)), map(is_not, byte, repeat(None))))
        if not at:
            return list(tokens)
        # Runs of adjacent byte tokens: where a place is not the one before plus one.
        firsts = [0, *compress(range(1, len(at)), map(ne, islice(at, 1, None), map((1).__add__, at)))]
        out, prev = [], 0
        for a, b in zip(firsts, [*islice(firsts, 1, None), len(at)]):
            start, end = at[a], at[b - 1] + 1
            out += tokens[prev:start]
            _flush(bytearray(byte[start:end]), out)
            prev = end
        out += tokens[prev:]
        return out

    return run_


def fuse(step):
    return lambda tokens: ["".join(tokens)]


def strip(step):
    c, start, stop = step["content"], step["start"], step["stop"]

    def run_(tokens):
        out = []
        for t in tokens:
            s = 0
            for i in range(min(start, len(t))):
                if t[i] != c:
                    break
                s = i + 1
            e = len(t)
            for i in range(stop):
                k = len(t) - i - 1
                if k < 0 or t[k] != c:
                    break
                e = k
            out.append(t[s:e] if e >= s else "")
        return out

    return run_


def bpe_suffix(step):
    suffix = step["suffix"]

    def run_(tokens):
        n = len(tokens) - 1
        return [t.replace(suffix, "" if i == n else " ") for i, t in enumerate(tokens)]

    return run_


def _cleanup(s: str) -> str:
    # WordPiece's cleanup list, in tokenizers' order.
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                 (" 'm", "'m"), (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        s = s.replace(a, b)
    return s


def ctc(step):
    pad, delim, cleanup = step["pad_token"], step["word_delimiter_token"], step["cleanup"]

    def run_(tokens):
        out, prev = [], None
        for t in tokens:
            if t == prev:  # consecutive duplicates collapse before anything else
                continue
            prev = t
            r = t.replace(pad, "")
            if cleanup:
                r = _cleanup(r).replace(delim, " ")
            if r:
                out.append(r)
        return out

    return run_


replace.wants_file = True

STEPS = {
    "replace": replace,
    "byte_fallback": byte_fallback,
    "fuse": fuse,
    "strip": strip,
    "bpe_suffix": bpe_suffix,
    "ctc": ctc,
}
