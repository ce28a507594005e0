"""Conformance tests for the regex compiler (tokmap.exporter.regex_compile) and the runtime
translation (tokmap.runtime.charclass): stdlib-`re` spans over translated text must equal the
reference engines' match spans.

References:
  onig  -> HF tokenizers' Split (Oniguruma, Unicode 16), offsets are code point offsets.
  fancy -> the `regex` module for structure (with `$` as end of text, and the few code points it
           classifies differently - it ships Unicode 17 - replaced by stand-ins with the same
           Unicode 16 class), plus tiktoken itself (fancy-regex, Unicode 16) for exhaustive
           per-code-point class membership and a token-level cross-check on the corpora.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import subprocess
import sys
import warnings

import pytest

# The reference engines are test dependencies (pyproject's `test` extra): a missing one is an
# error, never a skip.
import numpy as np  # noqa: E402
import regex  # noqa: E402
import tiktoken  # noqa: E402
import tokenizers  # noqa: E402
import unicodedata2 as ud  # noqa: E402

from tokenizers import Regex, pre_tokenizers  # noqa: E402

from tokmap.exporter.regex_compile import PatternError, compile_pattern  # noqa: E402
from tokmap.runtime.charclass import TranslationMemo, translate_np, translate_py  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _testdata() -> str:
    import conftest

    return str(conftest.testdata_file("."))


# ----------------------------------------------------------------------------------------------
# Patterns under test
# ----------------------------------------------------------------------------------------------

BYTELEVEL = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# DeepSeek V3's three Split patterns (CONFORMANCE.md section 5): non-ASCII literal ranges, \p{P}\p{S}\p{M}.
DEEPSEEK = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
]
# The gpt-4o regex as some HF conversions spell it, with lookahead tricks instead of \p{Lu} etc.
GPT4O_LOOKAHEAD = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
    r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Small probes for anchors, lookbehind and quantifier flavours on both engines.
PROBES = [
    r"^\s*\p{L}+|\s+$|\p{L}+$|\S",
    r"(?<=\n)\p{L}+|(?<!\p{L})\p{N}+|[\s\S]",
    r"\p{N}{1,2}+|\p{L}{2,3}?\p{M}|\p{L}{2}?\p{L}|[^\p{N}\p{L}]|\p{L}",
    r"(?>\p{L}+|\p{L}\p{M})\p{M}*|\s++$|\w+|\d+?|\D",
    r"\p{Lu}\p{Ll}*?|(?i:[a-f0-9]{2,4}|'ll)|.",
    # Optional groups, emitted as branches with an empty arm: possessive ("12x": it fails, and
    # "12" comes next), greedy ("a1x": "a1" by backtracking into the group's arms), lazy
    # ("abcd": "ab").
    r"(?:\p{N}\p{N})?+\p{N}|\p{N}\p{N}|(?:\p{L}\p{N}|\p{L})?\p{N}|(?:\p{L}\p{L})??\p{L}\p{L}|\S|\s",
]


def _split_pattern(model: str) -> str:
    with open(os.path.join(_testdata(), "models", model, "tokenizer.json"), encoding="utf-8") as f:
        pre = json.load(f)["pre_tokenizer"]
    for p in pre.get("pretokenizers", [pre]):
        if p["type"] == "Split":
            return p["pattern"]["Regex"]
    raise AssertionError(f"no Split in {model}")


@functools.lru_cache(maxsize=None)
def _tiktoken_patterns() -> dict:
    """pat_str of the OpenAI encodings exactly as tiktoken 0.14 spells them (BPE loading stubbed)."""
    import tiktoken_ext.openai_public as op

    saved = op.load_tiktoken_bpe
    op.load_tiktoken_bpe = lambda *a, **k: {}
    try:
        return {"r50k": op.r50k_pat_str, "cl100k": op.cl100k_base()["pat_str"],
                "o200k": op.o200k_base()["pat_str"]}
    finally:
        op.load_tiktoken_bpe = saved


def _tekken_pattern() -> str:
    with open(os.path.join(_testdata(), "models", "tekken", "tekken_240718.json"), encoding="utf-8") as f:
        return json.load(f)["config"]["pattern"]


REAL_PATTERNS = [  # (id, flavor, loader)
    ("llama3", "onig", lambda: _split_pattern("llama3")),
    ("qwen3", "onig", lambda: _split_pattern("qwen3")),
    ("gpt4o", "onig", lambda: _split_pattern("gpt4o")),
    ("bytelevel", "onig", lambda: BYTELEVEL),
    ("r50k", "fancy", lambda: _tiktoken_patterns()["r50k"]),
    ("cl100k", "fancy", lambda: _tiktoken_patterns()["cl100k"]),
    ("o200k", "fancy", lambda: _tiktoken_patterns()["o200k"]),
    ("tekken", "fancy", _tekken_pattern),
]
EXTRA_PATTERNS = (
    [(f"deepseek{i}", "onig", (lambda p=p: p)) for i, p in enumerate(DEEPSEEK)]
    + [("gpt4o-lookahead", "onig", lambda: GPT4O_LOOKAHEAD)]
    # tiktoken's spellings read by Oniguruma: $ is end-of-line and {1,3}+ means ({1,3})+ there.
    + [(f"{k}-as-onig", "onig", (lambda k=k: _tiktoken_patterns()[k])) for k in ("r50k", "cl100k")]
    + [(f"probe{i}-{fl}", fl, (lambda p=p: p)) for i, p in enumerate(PROBES) for fl in ("onig", "fancy")]
)


# ----------------------------------------------------------------------------------------------
# Our side
# ----------------------------------------------------------------------------------------------


class Mine:
    def __init__(self, pattern: str, flavor: str):
        self.pattern, self.flavor = pattern, flavor
        self.cp = compile_pattern(pattern, flavor)
        self.rx = re.compile(self.cp.py_pattern)
        self.index = np.frombuffer(self.cp.class_index, "<u2")
        self.blocks = np.frombuffer(self.cp.class_blocks, np.uint8)
        self.memo = TranslationMemo(memoryview(self.cp.class_index).cast("H"), self.cp.class_blocks)

    def translate(self, text: str) -> str:
        return translate_np(text, self.index, self.blocks)

    def spans(self, text: str, translated: str | None = None, base: int = 0) -> list:
        if translated is None:
            translated = translate_py(text, None, None, self.memo)
        return [(m.start() + base, m.end() + base) for m in self.rx.finditer(translated)]

    def spans_per_piece(self, text: str, pieces) -> list:
        """Spans of each [a, b) piece of text searched as its own haystack, in text coordinates."""
        translated = self.translate(text)
        out = []
        for a, b in pieces:
            out += self.spans(None, translated[a:b], a)
        return out


@functools.lru_cache(maxsize=None)
def mine(pattern: str, flavor: str) -> Mine:
    return Mine(pattern, flavor)


def _pieces(text: str, sep: str) -> list:
    out, pos = [], 0
    for part in text.split(sep):
        if part:
            out.append((pos, pos + len(part)))
        pos += len(part) + len(sep)
    return out


# ----------------------------------------------------------------------------------------------
# References
# ----------------------------------------------------------------------------------------------


def onig_spans(pattern: str, text: str, sep: str | None = None) -> list:
    """Oniguruma match spans in code points.  Removed+invert keeps exactly the matches (each its
    own piece); with sep, text is first cut at sep so every piece is a separate haystack, as in a
    Sequence.  Byte offsets are fetched and converted here: HF's own char conversion is several
    times slower on megabyte texts."""
    split = pre_tokenizers.Split(Regex(pattern), "removed", invert=True)
    if sep is not None:
        split = pre_tokenizers.Sequence([pre_tokenizers.Split(sep, "removed"), split])
    pts = tokenizers.PreTokenizedString(text)
    split.pre_tokenize(pts)
    offs = [off for _, off, _ in pts.get_splits(offset_referential="original", offset_type="byte")]
    if text.isascii() or not offs:
        return offs
    cps = np.frombuffer(text.encode("utf-32-le"), "<u4")
    nbytes = 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)
    starts = np.concatenate(([0], np.cumsum(nbytes)))
    byte_to_char = np.full(int(starts[-1]) + 1, -1, np.int64)
    byte_to_char[starts] = np.arange(len(cps) + 1)
    arr = byte_to_char[np.array(offs, np.int64)]
    assert (arr >= 0).all()
    return list(zip(arr[:, 0].tolist(), arr[:, 1].tolist()))


def onig_isolated(pattern: str, text: str) -> list:
    return [off for _, off in pre_tokenizers.Split(Regex(pattern), "isolated").pre_tokenize_str(text)]


_GCS = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi",
        "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn"]
_WS16 = set([*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
             0x202F, 0x205F, 0x3000])


@functools.lru_cache(maxsize=1)
def _regex_standins() -> dict:
    """{cp: stand-in} for code points the `regex` module (Unicode 17) classifies differently from
    Unicode 16; each stand-in has, in both versions, the cp's Unicode 16 category."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    text = "".join(map(chr, cps))
    gc17 = {}
    for g in _GCS:
        for m in regex.finditer(r"\p{%s}+" % g, text):
            for i in range(m.start(), m.end()):
                gc17[cps[i]] = g
    ws17 = {cps[m.start()] for m in regex.finditer(r"\s", text)}
    assert ws17 == _WS16
    stable = {}
    for c in range(0x100, 0x30000):  # a stable, unremarkable representative per category
        g = ud.category(chr(c))
        if g not in stable and g != "Cs" and gc17.get(c) == g and c not in (0x17F, 0x212A):
            stable[g] = c
    diff = {c: chr(stable[ud.category(chr(c))]) for c in cps if gc17.get(c) != ud.category(chr(c))}
    assert 0 < len(diff) < 30000
    return diff


def _fancy_regex(pattern: str):
    # fancy-regex's $ is end of text; the regex module's $ also matches before a final \n.
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        out.append("\\Z" if c == "$" and not in_class else c)
        i += 1
    return regex.compile("".join(out))


@functools.lru_cache(maxsize=None)
def _fancy_compiled(pattern: str):
    return _fancy_regex(pattern)


def fancy_spans(pattern: str, text: str, pieces=None) -> list:
    table = {c: s for c, s in _regex_standins().items()}
    subst = text.translate(table)  # same length: spans stay code point spans of text
    rx = _fancy_compiled(pattern)
    if pieces is None:
        pieces = [(0, len(text))]
    out = []
    for a, b in pieces:
        out += [(m.start() + a, m.end() + a) for m in rx.finditer(subst[a:b])]
    return out


_BYTE_RANKS = {bytes([i]): i for i in range(256)}


def tiktoken_matched(pattern: str, text: str) -> str:
    """Concatenation of all fancy-regex matches (tiktoken encodes matches, drops the gaps)."""
    enc = tiktoken.Encoding("probe", pat_str=pattern, mergeable_ranks=_BYTE_RANKS, special_tokens={})
    return enc.decode_bytes(enc.encode_ordinary(text)).decode("utf-8")


def _first_diff(a: list, b: list, text: str) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            lo = max(0, min(x[0], y[0]) - 20)
            return f"at match {i}: mine {x} ref {y} near {text[lo:max(x[1], y[1]) + 20]!r}"
    return f"lengths differ: mine {len(a)} ref {len(b)}"


def assert_same(mine_spans, ref_spans, text, what):
    if mine_spans != ref_spans:
        pytest.fail(f"{what}: {_first_diff(mine_spans, ref_spans, text)}")


# ----------------------------------------------------------------------------------------------
# Generated strings
# ----------------------------------------------------------------------------------------------

SEP = "\U0010fffd"  # cuts the batch into separate haystacks for Oniguruma; never generated

_SPACES = [chr(c) for c in sorted(_WS16)] + ["\x1c", "\x1d", "\x1e", "\x1f", "\u200b", "\u180e", "\ufeff",
                                              "\u2060", "\u200c", "\u200d"]
_SCRIPTS = [(0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x531, 0x587),
            (0x5D0, 0x5EA), (0x620, 0x64A), (0x905, 0x939), (0xE01, 0xE30), (0x10A0, 0x10FF),
            (0x1E00, 0x1EFF), (0x3041, 0x3096), (0x30A1, 0x30FA), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
            (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF), (0x1C80, 0x1C88), (0x10400, 0x1044F)]
_MARKS = [chr(c) for c in [*range(0x300, 0x370), 0x483, 0x488, 0x591, 0x64B, 0x93E, 0x94D, 0xE31,
                           0x1AB0, 0x20D0, 0x20DD, 0x302A, 0xFE0F, 0xFE00, 0x1F3FB, 0xE0100]]
_DIGITS = "0123456789" + "٠١٢٣٤٥٦٧٨٩" + "०१२३४५६७८९" + "０１２３４５６７８９" + "²³¹½¼¾ⅠⅡⅫⅻ①⑩〇三𝟘𝟙" + "\U00010107"
_PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("—–“”‘’«»¿¡…·•€£¥©®™∑∞√≠←→§¶†‡※〜、。「」『』！？（）＠")
_EMOJI = ["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200d\U0001F469\u200d\U0001F467",
          "\U0001F3F3\ufe0f\u200d\U0001F308", "\u2764\ufe0f", "\U0001F1EF\U0001F1F5", "#\ufe0f\u20e3",
          "\U0001F9D1\u200d\U0001F4BB", "\U0001FAE8"]
_NEWLINES = ["\n", "\r\n", "\r", "\n\n", "\r\n\r\n", " \n", "\t\n", "\n ", "\r\r\n", "\n\r", "\u2028", "\x85"]
_CONTRACTIONS = ["s", "t", "re", "ve", "m", "ll", "d", "S", "T", "RE", "Re", "rE", "VE", "M", "LL", "Ll", "lL",
                 "D", "\u017f", "\u212a", "K", "k", "x", "", "'", "st", "ss"]


def _rand_cp(rng: random.Random) -> str:
    while True:
        c = rng.randrange(0x110000) if rng.random() < 0.5 else rng.randrange(0x30000)
        if not 0xD800 <= c < 0xE000 and chr(c) != SEP:
            return chr(c)


def _segment(rng: random.Random) -> str:
    kind = rng.randrange(12)
    if kind == 0:
        return "".join(rng.choice(_SPACES) for _ in range(rng.randrange(1, 5)))
    if kind == 1:
        return rng.choice(_NEWLINES) * rng.randrange(1, 3)
    if kind == 2:
        return "".join(rng.choice(_DIGITS[:10] if rng.random() < 0.6 else _DIGITS) for _ in range(rng.randrange(1, 9)))
    if kind == 3:
        return rng.choice(["'", "\u2019", "''"]) + rng.choice(_CONTRACTIONS)
    if kind == 4:
        return "".join(rng.choice(_PUNCT) for _ in range(rng.randrange(1, 4)))
    if kind == 5:
        return rng.choice(_EMOJI)
    if kind == 6:
        return "".join(_rand_cp(rng) for _ in range(rng.randrange(1, 4)))
    if kind == 7:
        return rng.choice([" ", "/", "//", " /", "\t"])
    # words: letters of one script, sometimes with combining marks or mixed case
    lo, hi = rng.choice(_SCRIPTS)
    word = []
    for _ in range(rng.randrange(1, 9)):
        word.append(chr(rng.randint(lo, hi)))
        if rng.random() < 0.15:
            word.append(rng.choice(_MARKS))
    w = "".join(word)
    return w.upper() if rng.random() < 0.1 else w


def generated_strings(n: int = 10_000, seed: int = 20240718) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        s = "".join(_segment(rng) for _ in range(rng.randrange(1, 14)))
        if i % 500 == 0:  # a few long runs
            s += rng.choice([" ", "\n", "a", "7", "!", "\u3000", "\u4e00", "\r\n", "\u0301"]) * rng.randrange(200, 3000)
            s += _segment(rng)
        out.append(s)
    return out


@functools.lru_cache(maxsize=1)
def _generated():
    strings = generated_strings()
    batch = SEP.join(strings)
    return strings, batch, _pieces(batch, SEP)


# ----------------------------------------------------------------------------------------------
# Corpora
# ----------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _corpus(name: str) -> str:
    with open(os.path.join(_testdata(), "corpus", name), encoding="utf-8") as f:
        return f.read()


def _corpus_names() -> list:
    try:
        return sorted(n for n in os.listdir(os.path.join(_testdata(), "corpus")) if n.endswith(".txt"))
    except BaseException:  # skip raised by _testdata at collection time
        return []


ALL = REAL_PATTERNS + EXTRA_PATTERNS


def _ids(items):
    return [i[0] for i in items]


# ----------------------------------------------------------------------------------------------
# Tests: real patterns against the references
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", _corpus_names())
@pytest.mark.parametrize("pid,flavor,load", REAL_PATTERNS, ids=_ids(REAL_PATTERNS))
def test_corpus(pid, flavor, load, name):
    """Whole corpus file as one haystack, and every non-empty line as its own haystack."""
    pattern = load()
    text = _corpus(name)
    m = mine(pattern, flavor)
    lines = _pieces(text, "\n")
    whole = m.spans(None, m.translate(text))
    per_line = m.spans_per_piece(text, lines)
    if flavor == "onig":
        assert_same(whole, onig_spans(pattern, text), text, f"{pid} whole {name}")
        assert_same(per_line, onig_spans(pattern, text, sep="\n"), text, f"{pid} lines {name}")
    else:
        assert_same(whole, fancy_spans(pattern, text), text, f"{pid} whole {name}")
        assert_same(per_line, fancy_spans(pattern, text, lines), text, f"{pid} lines {name}")


@pytest.mark.parametrize("pid,flavor,load", ALL, ids=_ids(ALL))
def test_generated(pid, flavor, load):
    """>= 10,000 generated strings, each its own haystack."""
    pattern = load()
    strings, batch, pieces = _generated()
    assert len(strings) >= 10_000
    m = mine(pattern, flavor)
    got = m.spans_per_piece(batch, pieces)
    if flavor == "onig":
        ref = onig_spans(pattern, batch, sep=SEP)
    else:
        ref = fancy_spans(pattern, batch, pieces)
    assert_same(got, ref, batch, pid)
    # translate_py and translate_np agree on everything generated
    assert translate_py(batch, None, None, m.memo) == m.translate(batch)


_FULL_COVER = {"llama3", "qwen3", "gpt4o", "bytelevel", "gpt4o-lookahead", "r50k-as-onig",
               "cl100k-as-onig"}


@pytest.mark.parametrize("pid,flavor,load", [p for p in ALL if p[1] == "onig"],
                         ids=_ids([p for p in ALL if p[1] == "onig"]))
def test_onig_isolated_matches_removed_invert(pid, flavor, load):
    """The Removed+invert reference is the Isolated split minus the gaps; on the real patterns
    (which match every char) both must equal our spans exactly."""
    pattern = load()
    text = _corpus("en.txt")[:20000] + "\r\n\u3000 \n\n x's" + "".join(_generated()[0][:200])
    got = mine(pattern, flavor).spans(text)
    assert_same(got, onig_spans(pattern, text), text, pid)
    if pid in _FULL_COVER:  # patterns that match every char: Isolated pieces == matches
        assert_same(got, onig_isolated(pattern, text), text, pid + " isolated")


@pytest.mark.parametrize("pid,flavor,load", [p for p in REAL_PATTERNS if p[1] == "fancy"],
                         ids=_ids([p for p in REAL_PATTERNS if p[1] == "fancy"]))
def test_fancy_tiktoken_token_crosscheck(pid, flavor, load):
    """tiktoken itself as a second fancy reference: with a vocab made of our pieces (plus single
    bytes), every reference piece that equals one of ours comes out as exactly one token, and
    tokens never cross reference pieces; so the decoded token sequence equals our pieces unless
    the split differs."""
    pattern = load()
    m = mine(pattern, flavor)
    for name in ("en.txt", "multi.txt", "utf8seq.txt"):
        text = _corpus(name)
        if name == "multi.txt":
            text = text[:800_000]
        pieces = [text[a:b].encode("utf-8") for a, b in m.spans(None, m.translate(text))]
        ranks = dict(_BYTE_RANKS)
        for p in pieces:
            ranks.setdefault(p, len(ranks))
        enc = tiktoken.Encoding("xcheck", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        toks = [enc.decode_single_token_bytes(t) for t in enc.encode_ordinary(text)]
        if toks != pieces:
            i = next(i for i, (a, b) in enumerate(zip(toks, pieces)) if a != b)
            pytest.fail(f"{pid} {name}: piece {i}: tiktoken {toks[i]!r} mine {pieces[i]!r}")


# ----------------------------------------------------------------------------------------------
# Tests: character classes on every code point, against the engines themselves
# ----------------------------------------------------------------------------------------------

_CP_ALL = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]

ATOMS = (
    [r"\p{L}", r"\p{N}", r"\s", r"\S", r"\d", r"\D", r"\w", r"\W", r".", r"[^\s\p{L}\p{N}]",
     r"[^\r\n\p{L}\p{N}]", r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]",
     r"[^\r\n\p{L}\p{P}\p{S}]", r"[\p{L}\p{M}]", r"[\p{P}\p{S}]", r"\p{^N}", r"\P{Lu}",
     r"\p{Letter}", r"\p{Decimal_Number}", r"\p{Cased_Letter}", r"\p{LC}", r"[a-z\p{Nd}\u00e9-\u0100]",
     r"(?i:[a-z])", r"(?i:s)", r"(?i:k)", r"[\x{1F600}-\x{1F64F}\t]"]
    + [r"\p{%s}" % g for g in _GCS + ["L", "M", "N", "P", "S", "Z", "C"]]
)


@functools.lru_cache(maxsize=1)
def _all_cp_text() -> str:
    return "".join(map(chr, _CP_ALL))


def _mine_members(atom: str, flavor: str) -> set:
    m = mine(f"(?:{atom})+", flavor)
    text = _all_cp_text()
    out = set()
    for a, b in m.spans(None, m.translate(text)):
        out.update(_CP_ALL[a:b])
    return out


def onig_members(atom: str) -> set:
    """Code points Oniguruma's atom matches: the Replace normalizer deletes every match from a
    string of all code points (much faster than a Split over 1.1M chars)."""
    from tokenizers import normalizers

    kept = normalizers.Replace(Regex(f"(?:{atom})+"), "").normalize_str(_all_cp_text())
    return set(_CP_ALL) - set(map(ord, kept))


@pytest.mark.parametrize("atom", ATOMS)
def test_class_members_onig(atom):
    ref = onig_members(atom)
    got = _mine_members(atom, "onig")
    assert got == ref, f"{atom}: extra {sorted(map(hex, got - ref))[:10]} missing {sorted(map(hex, ref - got))[:10]}"


@pytest.mark.parametrize("atom", ATOMS)
def test_class_members_fancy(atom):
    text = _all_cp_text()
    ref = {ord(c) for c in tiktoken_matched(f"(?:{atom})+", text)}
    got = _mine_members(atom, "fancy")
    assert got == ref, f"{atom}: extra {sorted(map(hex, got - ref))[:10]} missing {sorted(map(hex, ref - got))[:10]}"


_LONG_NAMES = {
    "L": ["Letter", "letter", "LETTER", "le_tt-er"], "LC": ["Cased_Letter"], "Lu": ["Uppercase_Letter"],
    "Ll": ["Lowercase_Letter", "lowercaseletter"], "Lt": ["Titlecase_Letter"], "Lm": ["Modifier_Letter"],
    "Lo": ["Other_Letter"], "M": ["Mark", "Combining_Mark"], "Mn": ["Nonspacing_Mark"], "Mc": ["Spacing_Mark"],
    "Me": ["Enclosing_Mark"], "N": ["Number"], "Nd": ["Decimal_Number"], "Nl": ["Letter_Number"],
    "No": ["Other_Number"], "P": ["Punctuation"], "Pc": ["Connector_Punctuation"], "Pd": ["Dash_Punctuation"],
    "Ps": ["Open_Punctuation"], "Pe": ["Close_Punctuation"], "Pi": ["Initial_Punctuation"],
    "Pf": ["Final_Punctuation"], "Po": ["Other_Punctuation"], "S": ["Symbol"], "Sm": ["Math_Symbol"],
    "Sc": ["Currency_Symbol"], "Sk": ["Modifier_Symbol"], "So": ["Other_Symbol"], "Z": ["Separator"],
    "Zs": ["Space_Separator"], "Zl": ["Line_Separator"], "Zp": ["Paragraph_Separator"], "C": ["Other"],
    "Cc": ["Control"], "Cf": ["Format"], "Co": ["Private_Use"], "Cn": ["Unassigned"],
    "Lu ": ["lu", "LU"],
}


@functools.lru_cache(maxsize=1)
def _run_edges_text() -> str:
    """First and last code point of every Unicode 16 General Category run (plus neighbours)."""
    cps = set()
    prev = None
    for c in _CP_ALL:
        g = ud.category(chr(c))
        if g != prev:
            cps.update((c - 1, c, c + 1))
            prev = g
    return "".join(chr(c) for c in sorted(cps) if 0 <= c < 0x110000 and not 0xD800 <= c < 0xE000)


@pytest.mark.parametrize("short", sorted(_LONG_NAMES))
def test_property_aliases(short):
    """Long / loose property names: both engines accept them with the short name's meaning, and
    so do we (checked on every category-run edge; the short names are checked exhaustively)."""
    from tokenizers import normalizers

    text = _run_edges_text()
    for name in _LONG_NAMES[short] + [short.strip()]:
        atom = r"\p{%s}" % name
        for flavor in ("onig", "fancy"):
            mine_set = {text[a] for a, _ in mine(atom, flavor).spans(text)}
            if flavor == "onig":
                kept = normalizers.Replace(Regex(atom), "").normalize_str(text)
                ref = set(text) - set(kept)
            else:
                ref = set(tiktoken_matched(atom, text))
            assert mine_set == ref, (name, flavor, sorted(map(ord, mine_set ^ ref))[:10])


def test_onig_hex_digit_escape():
    assert _mine_members(r"\h", "onig") == onig_members(r"\h")


@pytest.mark.parametrize("atom", [r"\pL", r"\pN", r"\PL"])
def test_class_members_fancy_single_letter_property(atom):
    ref = {ord(c) for c in tiktoken_matched(f"(?:{atom})+", _all_cp_text())}
    assert _mine_members(atom, "fancy") == ref


# ----------------------------------------------------------------------------------------------
# Tests: flavour semantics on small cases, errors, output shape
# ----------------------------------------------------------------------------------------------

SMALL = ["a\nb\n", "x \n y  \n\n", "\n\nab  ", "ab\r\ncd\r\n", " ", "\n", "a b", "\u3000x\u3000\n\u3000"]


@pytest.mark.parametrize("pattern", [r"x$|\S", r"^\S|\s", r"\s+$|\S+|\s", r"\s++$|\s+(?!\S)|\s|\S+",
                                     r"\S+\Z|\S|\s", r"\A\S|\s|\S", r"\S\z|\S|\s", r"^\s+|\S|\s"])
@pytest.mark.parametrize("flavor", ["onig", "fancy"])
def test_anchor_flavours(pattern, flavor):
    if flavor == "fancy" and r"\Z" in pattern:
        with pytest.raises(PatternError):
            compile_pattern(pattern, flavor)
        return
    m = mine(pattern, flavor)
    for text in SMALL + [s.replace("a", "x") for s in SMALL]:
        ref = onig_spans(pattern, text) if flavor == "onig" else fancy_spans(pattern, text)
        assert m.spans(text) == ref, (pattern, flavor, text)


def test_fancy_anchors_are_text_anchors_in_tiktoken():
    assert tiktoken_matched(r"x$", "x\nx\nx") == "x"
    assert compile_pattern(r"x$", "fancy").py_pattern.endswith(r"\Z")
    assert compile_pattern(r"^x", "fancy").py_pattern.startswith(r"\A")


@pytest.mark.parametrize("pattern,construct", [
    (r"(a)\1", "escape '\\1'"),
    (r"\p{Han}+", "property 'Han'"),
    (r"\p{Greek}", "property 'Greek'"),
    (r"\pL", "\\p without braces"),
    (r"\u{41}", "\\u{...}"),
    (r"(?i:ss)", "multi-char case folding"),
    (r"(?i:s(?:t))", "multi-char case folding"),
    (r"a(?i)b", "(?i)"),
    (r"(?i:\p{L})", "\\p/\\P under (?i)"),
    (r"(?i:[^a])", "negated class under (?i)"),
    (r"(?i:é)", "non-ASCII literal under (?i)"),
    (r"a{,2}", "'{'"),
    (r"a**", "quantifier applied to a quantifier"),
    (r"x*", "empty string"),
    (r"(?<=a+)b", "variable-width lookbehind"),
    (r"(?m)a", "group syntax"),
    (r"(?s:.)", "group syntax"),
    (r"(?x) a", "group syntax"),
    (r"[[:alpha:]]", "POSIX"),
    (r"[a&&b]", "class set operation"),
    (r"\bfoo", "escape '\\b'"),
    (r"\G", "escape '\\G'"),
    (r"\Z", "escape '\\Z'"),
    (r"\R", "escape '\\R'"),
    (r"[a", "unterminated"),
    (r"(a", "missing ')'"),
    (r"a)", "unbalanced"),
])
def test_refused(pattern, construct):
    flavor = "fancy" if pattern == r"\Z" else "onig"
    with pytest.raises(PatternError) as e:
        compile_pattern(pattern, flavor)
    assert construct in str(e.value)
    assert "position" in str(e.value)
    assert isinstance(e.value, ValueError)


def test_too_many_classes():
    atoms = "|".join(f"\\x{{{0x100 + 2 * i:x}}}" for i in range(130))
    with pytest.raises(PatternError, match="more than 128"):
        compile_pattern(atoms, "onig")


def test_unknown_flavor():
    with pytest.raises(ValueError):
        compile_pattern("a", "pcre")


@pytest.mark.parametrize("pid,flavor,load", ALL, ids=_ids(ALL))
def test_output_shape(pid, flavor, load):
    cp = compile_pattern(load(), flavor)
    assert cp.unicode_version == "16.0.0"
    assert len(cp.class_index) == 0x1100 * 2
    assert len(cp.class_blocks) % 256 == 0
    nblocks = len(cp.class_blocks) // 256
    assert max(memoryview(cp.class_index).cast("H")) == nblocks - 1
    assert cp.class_blocks[:128] == bytes(range(128))  # block 0 starts with identity ASCII
    assert cp.py_pattern.isascii()
    # stdlib shorthands are wrong for us (\s has \x1c-\x1f, . is Python's own): never emitted
    assert not re.search(r"(?<!\\)(?:\\\\)*\\[sSdDwWbB]", cp.py_pattern), cp.py_pattern
    assert "." not in cp.py_pattern
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. FutureWarning for '--' or '[[' inside a class
        re.compile(cp.py_pattern)


def test_deterministic():
    p = _split_pattern("llama3")
    assert compile_pattern(p, "onig") == compile_pattern(p, "onig")


# ----------------------------------------------------------------------------------------------
# Runtime translation
# ----------------------------------------------------------------------------------------------


def test_translate_py_np_agree():
    m = mine(_split_pattern("gpt4o"), "onig")
    rng = random.Random(7)
    idx_mv = memoryview(m.cp.class_index).cast("H")
    blk_mv = memoryview(m.cp.class_blocks)
    samples = ["", "plain ascii \n", "\ud800", "a\udfffb\ud83d", "\U0010ffff\x00\x7f\x80"]
    for _ in range(300):
        n = rng.randrange(0, 200)
        samples.append("".join(chr(rng.choice([rng.randrange(128), rng.randrange(0x110000)]))
                               for _ in range(n)))
    samples.append("".join(chr(rng.randrange(0x110000)) for _ in range(600_000)))  # > one numpy chunk
    for s in samples:
        t_np = translate_np(s, m.index, m.blocks)
        assert t_np == translate_py(s, idx_mv, blk_mv)
        assert t_np == translate_np(s, m.cp.class_index, m.cp.class_blocks)  # raw buffers accepted
        assert len(t_np) == len(s)
        assert all(ord(c) < 256 for c in t_np)
    # ASCII maps to itself, non-ASCII to representatives >= 128
    s = "".join(map(chr, range(0x200)))
    t = translate_np(s, m.index, m.blocks)
    assert t[:128] == s[:128] and all(ord(c) >= 128 for c in t[128:])


def test_translate_py_reuses_memo():
    m = mine(BYTELEVEL, "onig")
    text = "héllo wörld 東京 ١٢٣"
    assert translate_py(text, None, None, m.memo) == translate_np(text, m.index, m.blocks)
    assert translate_py("ascii", None, None, None) == "ascii"


def _imports_of(path: str) -> set:
    code = ("import importlib.util, sys; before = set(sys.modules); "
            f"spec = importlib.util.spec_from_file_location('m', {path!r}); mod = importlib.util.module_from_spec(spec); "
            "sys.modules['m'] = mod; spec.loader.exec_module(mod); print(' '.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_runtime_imports_stdlib_only():
    new = _imports_of(os.path.join(REPO, "tokmap", "runtime", "charclass.py"))
    assert not {"numpy", "regex"} & new, new
    new = _imports_of(os.path.join(REPO, "tokmap", "exporter", "regex_compile.py"))
    assert not {"numpy", "regex", "unicodedata", "unicodedata2"} & new, new


# ----------------------------------------------------------------------------------------------
# Tests: py_pattern_bmp, the same pattern over original code points for text without astral ones
# ----------------------------------------------------------------------------------------------


def _bmp_spans(m: Mine, text: str) -> list:
    return [mt.span() for mt in re.compile(m.cp.py_pattern_bmp).finditer(text)]


_BMP_ALL = "".join(map(chr, range(0x10000)))  # surrogates included: a str may hold them


@pytest.mark.parametrize("atom", ATOMS)
def test_bmp_class_members(atom):
    """Each atom over the original BMP code points matches exactly what it matches translated."""
    m = mine(f"(?:{atom})+", "onig")
    assert _bmp_spans(m, _BMP_ALL) == m.spans(_BMP_ALL)


@pytest.mark.parametrize("pid,flavor,load", ALL, ids=_ids(ALL))
def test_bmp_pattern_generated(pid, flavor, load):
    """On the generated strings (astral code points replaced by BMP ones of many classes) and the
    corpora without astral code points, py_pattern_bmp on the text gives the translated spans."""
    m = mine(load(), flavor)
    stand_ins = "a\u00e9\u4e00 7\u0661\u3000!\u0301\U0010fffd"[:-1]
    strings = [re.sub("[\U00010000-\U0010ffff]", lambda c: stand_ins[ord(c.group()) % len(stand_ins)], s)
               for s in _generated()[0]]
    texts = strings + [_corpus(n) for n in ("en.txt", "pride.txt", "wagahai.txt") if n in _corpus_names()]
    bad = [t[:40] for t in texts if _bmp_spans(m, t) != m.spans(t)]
    assert not bad, f"{pid}: {len(bad)} texts differ, first {bad[0]!r}"


def test_bmp_only_detects_astral():
    from tokmap.runtime.pretokenizers import bmp_only

    class Sub(str):
        pass

    for text, want in [("caf\u00e9", True), ("\u4e00\u4e8c", True), ("a" * 1000 + "\u0100", True),
                       ("\ud800 lone surrogate", True), ("x\U0001f600", False), ("\U00010000" * 3, False),
                       (Sub("\u4e00"), True), (Sub("\U0001f600"), False), ("\u00e9" * 70000 + "\U00020000", False)]:
        assert bmp_only(text) is want, text[:20]


LEAD_PATTERNS = [
    r"a?b|a*c|x+y|[ab]{0,2}c|[ab]{2,3}d",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}]*[\p{Ll}]+(?i:'s|'t)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"(?:x?y|z*w)+q|q?|w",
]


@pytest.mark.parametrize("pattern", LEAD_PATTERNS)
def test_leading_repeats_rewritten_exactly(pattern):
    """_lead_with_sets turns X?R into X·R|R, X*R into X·X*·R|R and X+R into X·X*·R: the same
    matches under leftmost-first backtracking, on strings made of the patterns' own chars."""
    import tokmap.exporter.regex_compile as rc

    new = compile_pattern(pattern, "fancy", allow_empty=True).py_pattern_full
    saved = rc._lead_with_sets
    rc._lead_with_sets = lambda ast: ast
    try:
        old = compile_pattern(pattern, "fancy", allow_empty=True).py_pattern_full
    finally:
        rc._lead_with_sets = saved
    assert new != old  # each pattern has something to rewrite
    rng = random.Random(7)
    alphabet = "abcdqwxyzAB1 \n\r'stT/é"
    for _ in range(3000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 24)))
        assert [m.span() for m in re.finditer(new, s)] == [m.span() for m in re.finditer(old, s)], (s, new, old)


def test_every_alternative_opens_with_a_char_test():
    """In o200k's pattern every top-level alternative now opens with a class or a literal, which
    CPython's BRANCH op checks before entering the alternative (the point of the rewrite)."""
    from re import _constants as C, _parser

    pat = _tiktoken_patterns()["o200k"]
    parsed = _parser.parse(compile_pattern(pat, "fancy").py_pattern_bmp, 0)
    (op, av), = parsed.data
    assert op is C.BRANCH
    firsts = [alt.data[0][0] for alt in av[1]]
    assert len(firsts) > 7 and all(f in (C.IN, C.LITERAL, C.NOT_LITERAL) for f in firsts), firsts


RUN_PATTERNS = [  # (pattern, flavor, k or None when no alternative qualifies)
    ("cl100k", "fancy", 3), ("o200k", "fancy", 3), ("r50k", "fancy", None), ("qwen3", "onig", 1),
    ("llama3", "onig", 3), ("gpt4o", "onig", 3), ("cl100k-as-onig", "onig", None),  # ({1,3})+ there
    (r"\d{1,3}|\w+|\s+", "fancy", None),  # \w consumes digits too
    (r"\d{1,2}+|[a-z]+|(?=\d)x|\s+", "fancy", 2),  # a lookahead consumes nothing
    (r"\d{1,4}|[a-z]*|\s", "fancy", None),  # an alternative that can match empty
    (r"\d{2,3}|[a-z]+|\s+", "fancy", None),  # not from 1
    (r"[a-c]{1,3}?|\d+", "fancy", None),  # lazy
]


def _run_pattern(pid: str) -> str:
    pats = _tiktoken_patterns()
    if pid in pats:
        return pats[pid]
    if pid == "cl100k-as-onig":
        return pats["cl100k"]
    if pid in ("qwen3", "llama3", "gpt4o"):
        return _split_pattern(pid)
    return pid


@pytest.mark.parametrize("pid,flavor,k", RUN_PATTERNS)
def test_run_alternative_found_and_exact(pid, flavor, k):
    """_run_branch finds the D{1,k} alternative that alone consumes D's chars; the runs pattern
    (D++ there) with each of its D-runs longer than k cut into k-char pieces from the start gives
    exactly the pattern's own matches, on strings crowded with D's chars (ASCII and other
    numbers) between letters, marks, spaces and punctuation."""
    cp = compile_pattern(_run_pattern(pid), flavor, allow_empty=True)
    assert cp.run_k == (k or 0) and bool(cp.runs_pattern) == (k is not None)
    if k is None:
        return
    m = mine(_run_pattern(pid), flavor)
    plain, runs = re.compile(cp.py_pattern), re.compile(cp.runs_pattern)
    long_run = re.compile(f"{cp.run_set}{{{k + 1},}}")
    rng = random.Random(11)
    alphabet = "0123456789" * 3 + "\u0663\u0664\u00b2\u2167\U0001d7ce" + "abXY\u00e9\u4e00 \n\t.,'/-\u0301"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        t = m.translate(text)
        want = [mm.span() for mm in plain.finditer(t)]
        got = []
        for mm in runs.finditer(t):
            s, e = mm.span()
            if long_run.fullmatch(t, s, e):
                got += [(a, min(a + k, e)) for a in range(s, e, k)]
            else:
                got.append((s, e))
        assert got == want, (text, got, want)


# ----------------------------------------------------------------------------------------------
# Tiling: the exporter's proof that findall's matches cover the text back to back
# ----------------------------------------------------------------------------------------------


def _covers(m: Mine, strings) -> bool:
    """Whether, in each string searched alone, the matches tile it."""
    for s in strings:
        prev = 0
        for a, b in m.spans(None, m.translate(s)):
            if a != prev:
                return False
            prev = b
        if prev != len(s):
            return False
    return True


@pytest.mark.parametrize("pid,flavor,load", ALL, ids=_ids(ALL))
def test_tiles_claim_holds(pid, flavor, load):
    """Where compile_pattern says a pattern tiles, its matches cover every generated string (the
    runtime then skips its coverage check); every real tokenizer's pattern is proved to tile."""
    m = mine(load(), flavor)
    if pid in _ids(REAL_PATTERNS):
        assert m.cp.tiles, pid
    if m.cp.tiles:
        assert _covers(m, _generated()[0]), pid


@pytest.mark.parametrize("pattern,gap", [
    (r"\p{N}+|\s+", "ab 1"),  # no alternative takes a letter
    (r"a?+a|[^a]", "ab"),  # the possessive a?+ takes the a that the branch needs
    (r"\s+(?!\S)|\p{L}+|\p{N}+|[^\s\p{L}\p{N}]", " a"),  # a space before a non-space
    (r"x*+x|[^x]", "x"),
])
def test_tiles_refused_where_a_gap_can_open(pattern, gap):
    for flavor in ("onig", "fancy"):
        m = mine(pattern, flavor)
        assert not m.cp.tiles and not _covers(m, [gap]), (pattern, flavor)


def test_tiles_is_sound_on_random_patterns():
    """Random alternations of sequences over a few classes, quantifiers (possessive and lazy
    too) and lookaheads: whenever one is said to tile, random texts over those classes tile; and
    the proof is not vacuous."""
    rng = random.Random(11)
    atoms = [r"\p{L}", r"\p{N}", r"\s", r"[^\s\p{L}\p{N}]", "a", "[ab]", r"[^\r\n\p{L}\p{N}]", r"\p{Lu}", r"\p{Ll}"]
    quants = ["", "?", "*", "+", "?+", "*+", "++", "{1,2}", "??", "+?"]
    said, held, refused_tiling = 0, 0, 0
    texts = ["".join(rng.choice("aAbB1 \n\r!é中") for _ in range(rng.randrange(1, 12))) for _ in range(300)]
    for _ in range(400):
        branches = []
        for _b in range(rng.randrange(1, 5)):
            items = [rng.choice(atoms) + rng.choice(quants) for _i in range(rng.randrange(1, 4))]
            if rng.random() < 0.2:
                items.append(rng.choice(["(?=a)", r"(?!\S)", r"(?=\s)"]))
            branches.append("".join(items))
        # Some catch-all branches after them (all: tiles; some: tiles when the others make up)
        branches += [b for b in (r"\s+", r"\p{L}+", r"\p{N}", r"[^\s\p{L}\p{N}]+") if rng.random() < 0.7]
        pattern = "|".join(branches)
        try:
            m = mine(pattern, "fancy")
        except PatternError:
            continue  # (can match empty)
        if m.cp.tiles:
            said += 1
            assert _covers(m, texts), pattern
            held += 1
        elif _covers(m, texts):
            refused_tiling += 1  # (conservative: tiles here, not proved)
    assert said >= 50 and held == said and refused_tiling < said
