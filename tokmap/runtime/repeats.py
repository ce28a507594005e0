"""Whether a long text is one met before, for the chunk caches (spacecut.SpaceCuts, fastpath.Chunks).

A chunk cache (text cut at whitespace, each chunk's ids remembered) makes a repeated text cost a
split, a lookup per chunk and a concat; but filling it costs more than encoding the text by its
words or pieces does, even with their caches warm. So a long text goes by chunks only when it
keeps coming: when it was met MEETINGS times before (most of its fingerprint windows, TEXT_WINDOW
chars at every WINDOW_STRIDE-th position, were seen that often), or when most of its chunks are
in the cache already (judged on the chunks of a few windows spread over it). The windows are at
fixed positions, so a text that grows at its end (a chat's history) keeps meeting its earlier ones.

Why not from the second meeting: a text encoded twice (count the tokens, then encode; a warm
second call) would pay the fill on its second call, which then cost about what its first did:
o200k over code.txt, a fresh tokenizer, 89 ms against 71 by its pieces with their cache warm
(en.txt 22 against 14; minilm over en.txt 21.6 against 8.1-8.8 by its words). From the third
meeting on the fill is paid once, and every call after it is the chunks' (code.txt 30 ms).
"""

from __future__ import annotations

REPEAT_SHARE = 0.9  # the share met before from which a text goes by chunks
MEETINGS = 2  # a text goes by chunks once met this many times before (the third time it comes)
TEXT_WINDOW, WINDOW_STRIDE, MAX_WINDOWS = 32, 4096, 64  # a text's fingerprint: chars, where, how many
MET_WINDOWS_MAX = 1 << 16  # fingerprint windows remembered; emptied when they would grow past this
SAMPLE_WINDOWS, SAMPLE_CHARS = 8, 256  # where mostly_cached() samples chunks: that many windows, spread out


class TextMemory:
    """The fingerprint windows of the long texts met, each with how often it was met (up to MEETINGS)."""

    def __init__(self):
        self._windows: dict[str, int] = {}

    def met(self, text: str) -> bool:
        """Whether most of this text's windows were met MEETINGS times before; this meeting is
        counted from now on."""
        n = len(text)
        stride = WINDOW_STRIDE * (1 + n // (WINDOW_STRIDE * MAX_WINDOWS))
        windows = list(map(text.__getitem__, map(slice, range(0, n - TEXT_WINDOW, stride),
                                                 range(TEXT_WINDOW, n, stride))))
        seen = self._windows
        times = [seen.get(w, 0) for w in windows]  # (at most MAX_WINDOWS of them)
        hits = sum(t >= MEETINGS for t in times)
        if len(seen) + len(windows) > MET_WINDOWS_MAX:
            seen.clear()
        seen.update((w, min(t + 1, MEETINGS)) for w, t in zip(windows, times))
        return hits >= REPEAT_SHARE * len(windows)

    def clear(self) -> None:
        self._windows.clear()


def mostly_cached(text: str, cache: dict, sep: str | None = " ") -> bool:
    """Whether most chunks (text.split(sep)) of a few windows spread over the text are keys of
    cache; the first and last chunk of each window are cut words and left out."""
    if not cache:
        return False
    step = len(text) // SAMPLE_WINDOWS
    sample: list[str] = []
    for k in range(SAMPLE_WINDOWS):
        a = k * step + (step >> 1)
        sample += filter(None, text[a:a + SAMPLE_CHARS].split(sep)[1:-1])
    return bool(sample) and sum(map(cache.__contains__, sample)) >= REPEAT_SHARE * len(sample)
