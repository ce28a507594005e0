"""Decoders for tokenizer.json sources: tokenizers' decode_chain over token strings.

Each step maps a list of token strings to a list of strings; the result is their concatenation.
A chain that is only ByteLevel takes the fast path straight from the mapped token bytes.
With no decoder at all, tokenizers joins the tokens with spaces.
"""

from __future__ import annotations

from .. import bytelevel


def byte_level(tokens: list[str]) -> list[str]:
    data = bytearray()
    for t in tokens:
        b = bytelevel.to_bytes(t)
        data += b if b is not None else t.encode("utf-8", "surrogatepass")
    return [data.decode("utf-8", "replace")]


# type -> factory(step) returning a function list[str] -> list[str]
STEPS = {
    "byte_level": lambda step: byte_level,
}

from .sp_decoders import STEPS as _SP_STEPS  # noqa: E402  (Replace, ByteFallback, Fuse, Strip, BPEDecoder, CTC)

STEPS.update(_SP_STEPS)


def _wordpiece(step):
    from .bert import wordpiece_decoder

    return wordpiece_decoder(step)


STEPS["wordpiece"] = _wordpiece


def _metaspace(step):
    from .metaspace import decoder

    return decoder(step)


STEPS["metaspace"] = _metaspace


class Decoder:
    def __init__(self, steps: list[dict], f=None):
        self.steps = steps
        self.bytes_only = bool(steps) and all(s["type"] in ("byte_level", "bytes") for s in steps)
        self.chain = []
        for s in steps:
            factory = STEPS.get(s["type"])
            if factory is None:
                raise ValueError(f"unknown decoder step {s['type']!r}")
            # A factory marked wants_file also gets the mapped file (for blobs, e.g. a regex's tables).
            self.chain.append(factory(s, f) if getattr(factory, "wants_file", False) else factory(s))

    def decode(self, tokens: list[str]) -> str:
        if not self.steps:
            return " ".join(tokens)
        for fn in self.chain:
            tokens = fn(tokens)
        return "".join(tokens)
