"""Decoder steps of SentencePiece-style and CTC tokenizers (tokenizers' decode_chain rules).

Each factory takes the META step (and the mapped file when marked `wants_file`: a Replace with a
compiled Regex reads its class tables) and returns a function list[str] -> list[str]; decoders.py
registers them by type. Behaviour, including the odd corners, follows tokenizers 0.23
(CONFORMANCE.md section 9).
"""

from __future__ import annotations

_HEX = frozenset("0123456789abcdefABCDEF")


def replace(step, f=None):
    if "literal" not in step:  # a compiled Regex pattern: the Replace normalizer's matcher
        from .sp_normalizers import Replace

        rx = Replace(f, step)
        return lambda tokens: [rx.normalize(t, False)[0] for t in tokens]
    pat, content = step["literal"], step["content"]
    # tokenizers runs the escaped string as a regex: an empty one matches at every char boundary
    # (as str.replace does), except that an empty token is left alone.
    return lambda tokens: [t.replace(pat, content) if t else t for t in tokens]


def _byte_of(t: str):
    """The byte of a `<0xHH>` token (6 UTF-8 bytes), as Rust's u8::from_str_radix parses HH:
    two hex digits, or '+' and one."""
    if not (t.startswith("<0x") and t.endswith(">")) or len(t.encode("utf-8", "surrogatepass")) != 6:
        return None
    hh = t[3:-1]
    if len(hh) == 2 and (hh[0] in _HEX or hh[0] == "+") and hh[1] in _HEX:
        return int(hh[1] if hh[0] == "+" else hh, 16)
    return None


def _flush(run: bytearray, out: list):
    try:
        out.append(run.decode("utf-8"))
    except UnicodeDecodeError:
        # tokenizers: an invalid run becomes one U+FFFD per byte, valid chars in it included.
        out.extend(["\ufffd"] * len(run))
    run.clear()


def byte_fallback(step):
    def run_(tokens):
        out, run = [], bytearray()
        for t in tokens:
            b = _byte_of(t)
            if b is not None:
                run.append(b)
                continue
            if run:
                _flush(run, out)
            out.append(t)
        if run:
            _flush(run, out)
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
