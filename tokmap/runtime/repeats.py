"""Whether a long text is one met before, for the chunk caches (spacecut.SpaceCuts, fastpath.Chunks).

A chunk cache (text cut at whitespace, each chunk's ids remembered) makes a repeated text cost a
split, a lookup per chunk and a concat; but filling it costs more than encoding a new text by
its words or pieces does. So a long text goes by chunks only when it repeats: when it was met
before (most of its fingerprint windows, TEXT_WINDOW chars at every WINDOW_STRIDE-th position,
were seen), or when most of its chunks are in the cache already (judged on the chunks of a few
windows spread over it). The windows are at fixed positions, so a text that grows at its end (a
chat's history) keeps meeting its earlier ones.
"""

from __future__ import annotations

REPEAT_SHARE = 0.9  # the share met before from which a text goes by chunks
TEXT_WINDOW, WINDOW_STRIDE, MAX_WINDOWS = 32, 4096, 64  # a text's fingerprint: chars, where, how many
MET_WINDOWS_MAX = 1 << 16  # fingerprint windows remembered; emptied when they would grow past this
SAMPLE_WINDOWS, SAMPLE_CHARS = 8, 256  # where mostly_cached() samples chunks: that many windows, spread out


class TextMemory:
    """The fingerprint windows of the long texts met."""

    def __init__(self):
        self._windows: set[str] = set()

    def met(self, text: str) -> bool:
        """Whether most of this text's windows were met before; they are remembered from now on."""
        n = len(text)
        stride = WINDOW_STRIDE * (1 + n // (WINDOW_STRIDE * MAX_WINDOWS))
        windows = list(map(text.__getitem__, map(slice, range(0, n - TEXT_WINDOW, stride),
                                                 range(TEXT_WINDOW, n, stride))))
        seen = self._windows
        hits = sum(map(seen.__contains__, windows))
        if len(seen) + len(windows) > MET_WINDOWS_MAX:
            seen.clear()
        seen.update(windows)
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
