"""Seeded generator of adversarial strings for conformance tests.

Mixes scripts, combining marks, emoji ZWJ sequences, every Unicode space, digit runs of all kinds,
contractions in every case (including ſ and the Kelvin sign), CR/LF runs, special-token strings
inside text, and occasional long runs with no split point.
"""

from __future__ import annotations

import random

SPACES = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680"] + [chr(c) for c in range(0x2000, 0x200B)] + \
    ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\x1c", "\x1d", "\x1e", "\x1f", "\u200b", "\ufeff"]
WORDS = ["hello", "World", "THE", "naïve", "Straße", "İstanbul", "ΟΔΟΣ", "ὀδυσσεύς", "москва", "Ελλάδα",
         "日本語", "中文字符", "한국어", "ひらがな", "カタカナー", "العربية", "עברית", "हिन्दी", "தமிழ்", "ไทย",
         "ꯃꯤꯇꯩ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𐐀𐐨", "ǅemal", "ﬁne", "ｆｕｌｌｗｉｄｔｈ", "x²", "½", "Ⅻ", "١٢٣", "४५६",
         "def", "return", "self.x", "__init__", "i++", "a->b", "<div>", "http://x.y/z?q=1", "foo_bar", "$%^&*"]
MARKS = ["\u0301", "\u0308", "\u0327", "\u20dd", "\u0e31", "\u094d", "\u05b0", "\u0670", "\u1ab0", "\U0001e8d0"]
EMOJI = ["👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "☃️", "🇫🇷", "❤️‍🔥", "1️⃣", "🧑🏿‍💻", "\U0001fae8"]
CONTRACTIONS = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'lL",
                "'d", "'D", "'ſ", "'K", "’s", "''", "'"]
DIGITS = ["0", "12", "123", "1234", "12345678901", "٣", "৪৫", "１２３", "²³", "⅓", "𝟘𝟙"]
PUNCT = [".", ",", "!", "?", "...", "--", "/", "//", "\\", "(", ")", "[", "]", "{", "}", "'", '"', "“", "”", "«",
         "»", "—", "、", "。", "·", "\x00", "\x7f", "\ud7ff", "\ue000", "\U0010fffd", "\ufffd"]


def random_string(rng: random.Random, specials: list[str]) -> str:
    parts = []
    for _ in range(rng.randint(1, 14)):
        k = rng.random()
        if k < 0.25:
            parts.append(rng.choice(WORDS))
        elif k < 0.35:
            parts.append(rng.choice(WORDS) + rng.choice(CONTRACTIONS))
        elif k < 0.45:
            parts.append("".join(rng.choice(SPACES) for _ in range(rng.randint(1, 4))))
        elif k < 0.52:
            parts.append(rng.choice(WORDS)[:3] + "".join(rng.choice(MARKS) for _ in range(rng.randint(1, 3))))
        elif k < 0.6:
            parts.append(rng.choice(EMOJI))
        elif k < 0.68:
            parts.append(rng.choice(DIGITS) * rng.randint(1, 3))
        elif k < 0.76:
            parts.append(rng.choice(PUNCT))
        elif k < 0.8 and specials:
            parts.append(rng.choice(specials))
        elif k < 0.86:
            parts.append(rng.choice(["\r\n", "\n\n", "\r", " \n ", "\n  \n"]))
        elif k < 0.93:
            parts.append(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff),
                                         rng.randint(0x3000, 0xd7ff), rng.randint(0xe000, 0x10ffff)])))
        else:
            parts.append(" ")
    sep = rng.choice(["", " ", " ", "  "])
    return sep.join(parts)


def generated(n: int, specials: list[str], seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    out = [random_string(rng, specials) for _ in range(n)]
    return out


def long_runs() -> list[str]:
    """Runs of 10^5 characters with nothing to split on."""
    return ["a" * 100_000, "ab" * 50_000, "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(100_000)),
            " " * 100_000, "1" * 100_000, "\u0301" * 100_000, "😀" * 100_000 + "x"]
