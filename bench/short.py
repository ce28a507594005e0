"""Short strings: per-call latency of `encode` on sentences of 5–60 characters, warm.

The sentences are a fixed list (10 English, 10 Chinese, 10 code), written for this bench. For each library
and model: one freshly loaded object, every sentence encoded twice as warm-up, then each sentence
timed over REPEATS back-to-back calls (per-call time = loop time / REPEATS; best of 3 such loops). The
three loops of a sentence are taken in three rounds over all the sentences, not back to back: a few
seconds of a busy machine then slow one round of each sentence, which the best of three drops,
instead of every loop of the sentences they fall on (botchan-wordlevel measured 10.2 µs in a run
where it measured 7.3-7.5 µs before and after, each loop back to back).
Reported: the median over the 30 sentences (the issue-4 figure), the median per language, the slowest
sentence, and whether the ids equal tokmap's on every sentence.
"""

from __future__ import annotations

import gc
import statistics
import time

SENTENCES = {
    "en": [
        "Hello, world!",
        "The cat sat on the mat.",
        "I'll be there at 5 o'clock.",
        "Why doesn't this work?",
        "Prices rose 3.2% in March.",
        "She said: \"Not today, thanks.\"",
        "A quick brown fox jumps over the lazy dog.",
        "Please send the report by Friday morning.",
        "It's 2026 and tokenizers still matter a lot.",
        "Email me at someone@example.com, or call +1 555 0100.",
    ],
    "zh": [
        "你好，世界！",
        "今天天气很好。",
        "我们明天去北京。",
        "这个问题怎么解决？",
        "他在图书馆看书。",
        "请把文件发给我，谢谢！",
        "机器学习需要大量的数据。",
        "春眠不觉晓，处处闻啼鸟。",
        "这家餐厅的菜非常好吃，价格也不贵。",
        "中文分词和英文分词有很大的区别，需要特别处理。",
    ],
    "code": [
        "x = 1",
        "return None",
        "for i in range(10):",
        "if (a != b) { b++; }",
        "import numpy as np",
        "def f(x): return x * 2",
        "const y = arr.map(v => v + 1);",
        "SELECT id, name FROM users;",
        "printf(\"%d\\n\", count);",
        "let s: Vec<u8> = Vec::with_capacity(64);",
    ],
}
REPEATS = 200
ROUNDS = 3


def all_sentences() -> list[tuple[str, str]]:
    return [(lang, s) for lang, xs in SENTENCES.items() for s in xs]


def measure(adapter, obj, model, tokmap_ids: list | None = None) -> dict:
    """Per-call µs for each sentence on an already loaded object; returns the summary and, for tokmap,
    the ids (so the peers can be compared with them)."""
    items = all_sentences()
    enc = adapter.encode
    ids_all = []
    for _lang, s in items:  # warm-up: pipeline built, caches filled
        enc(obj, model, s)
        ids_all.append(list(enc(obj, model, s)))
    best = [float("inf")] * len(items)
    gc.collect()
    for _round in range(ROUNDS):
        for k, (_lang, s) in enumerate(items):
            t0 = time.perf_counter()
            for _ in range(REPEATS):
                enc(obj, model, s)
            best[k] = min(best[k], (time.perf_counter() - t0) / REPEATS)
    out = summary([b * 1e6 for b in best]) | {"n": len(items), "repeats": REPEATS}
    if tokmap_ids is None:
        out["ids"] = ids_all
    else:
        diff = [items[i][1] for i, (a, b) in enumerate(zip(tokmap_ids, ids_all)) if a != b]
        out["ids_equal"] = not diff
        if diff:
            out["diff"] = f"{len(diff)} of {len(items)} sentences differ, e.g. {diff[0]!r}"
    return out


def summary(per: list[float]) -> dict:
    """The figures of µs per call for each sentence (all_sentences' order): median, per language,
    slowest (and which), and the per-sentence list itself."""
    items = all_sentences()
    by_lang = {}
    for (lang, _s), us in zip(items, per):
        by_lang.setdefault(lang, []).append(us)
    worst = max(range(len(per)), key=per.__getitem__)
    return {"median_us": statistics.median(per), "by_lang_us": {k: statistics.median(v) for k, v in by_lang.items()},
            "max_us": per[worst], "max_sentence": items[worst][1], "per_us": [round(x, 3) for x in per]}


def combine(a: dict, b: dict) -> dict:
    """measure()'s summaries of two rounds over the same sentences as one: each sentence's lower
    time, and the summary figures taken again from those (ids equal only when in both)."""
    out = a | summary([min(x, y) for x, y in zip(a["per_us"], b["per_us"])])
    if "ids_equal" in a or "ids_equal" in b:
        out["ids_equal"] = a.get("ids_equal", False) and b.get("ids_equal", False)
        if not out["ids_equal"]:
            out["diff"] = a.get("diff") or b.get("diff")
    return out
