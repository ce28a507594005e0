"""TokenizerDef -> the .mtok sections: sorted vocabulary, packed merges, compiled pipeline, META.

The pipeline steps are rewritten here into what the runtime executes: split patterns become stdlib
`re` patterns plus class tables, ByteLevel's built-in regex becomes an ordinary split step,
Unicode normalizers get their tables as blobs. Anything the runtime could not run exactly has
already been refused by the reader.
"""

from __future__ import annotations

import json
import struct
from array import array
from itertools import accumulate

from .. import __version__, bytelevel, mtok
from ..definition import TokenizerDef
from ..errors import SourceError

# The regex HF's ByteLevel pre-tokenizer runs when use_regex is true (GPT-2's, Oniguruma flavour).
BYTE_LEVEL_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def _u32(values) -> bytes:
    a = array("I", values)
    if a.itemsize != 4:
        a = array("L", values)
    return _le(a)


def _le(a: array) -> bytes:
    import sys

    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


class _Blobs:
    def __init__(self):
        self.items: list[tuple[int, bytes]] = []

    def add(self, dtype: int, payload: bytes) -> int:
        self.items.append((dtype, payload))
        return len(self.items) - 1


def build_sections(d: TokenizerDef) -> dict[int, tuple[int, bytes]]:
    m = d.model
    n_model = len(m.vocab)
    n = max([n_model] + [a.id + 1 for a in d.added_tokens])
    token_bytes: list[bytes] = [b""] * n
    present = [False] * n
    for i, b in enumerate(m.vocab):
        if b is not None:
            token_bytes[i] = b
            present[i] = True
    byte_decoder = d.api == "hf" and any(s["type"] == "byte_level" for s in d.decoder)
    for a in d.added_tokens:
        if not present[a.id]:
            b = bytelevel.to_bytes(a.content) if byte_decoder else None
            token_bytes[a.id] = b if b is not None else a.content.encode("utf-8", "surrogatepass")
            present[a.id] = True
    offsets = [0]
    for b in token_bytes:
        offsets.append(offsets[-1] + len(b))
    if offsets[-1] >= 1 << 32:
        raise SourceError(d.source_path, "vocabulary bytes exceed 4 GiB")
    irregular_ids = set(m.irregular.values()) | set(getattr(m, "shadowed", ()))  # Unigram: repeated pieces
    regular = [i for i, b in enumerate(m.vocab) if b is not None and i not in irregular_ids]
    regular.sort(key=lambda i: token_bytes[i])
    for x, y in zip(regular, regular[1:]):
        if token_bytes[x] == token_bytes[y]:
            raise SourceError(d.source_path, f"tokens {x} and {y} have the same bytes {token_bytes[x]!r}",
                              field="model.vocab")
    sections: dict[int, tuple[int, bytes]] = {
        mtok.SECTION_TOKEN_BYTES: (mtok.U8, b"".join(token_bytes)),
        mtok.SECTION_TOKEN_OFFSETS: (mtok.U32, _u32(offsets)),
        mtok.SECTION_SORTED_IDS: (mtok.U32, _u32(regular)),
    }
    from .models import model_sections

    model_meta = model_sections(d, token_bytes, regular, sections)
    blobs = _Blobs()
    pre = _compile_pre_tokenizer(d, blobs)
    norm = _compile_normalizer(d, blobs)
    word_class = None
    if any(a.single_word for a in d.added_tokens):
        # tokenizers checks single_word neighbours with the Rust regex crate's Unicode \w.
        word_class = _split_step(d, r"\w", False, "fancy", "isolated", False, blobs)
    holes = _ranges([i for i in range(n) if not present[i]])
    unicode_versions = sorted({s["unicode_version"] for s in pre + norm if "unicode_version" in s})
    meta = {
        "api": d.api,
        "vocab_size": n,
        "model_vocab_size": n_model,
        "model": model_meta,
        "irregular": m.irregular,
        "holes": holes,
        "normalizer": norm,
        "pre_tokenizer": pre,
        "post_processor": d.post_processor,
        "decoder": [_compile_decoder_step(d, s, blobs) for s in d.decoder],
        "padding": d.padding,
        "truncation": d.truncation,
        "n_added": len(d.added_tokens),
        "word_class": word_class,
        "extra": d.extra,
        "provenance": {
            "source_format": d.source_format,
            "source_name": d.source_path.replace("\\", "/").rsplit("/", 1)[-1],
            "source_sha256": d.source_sha256,
            "exporter_version": __version__,
            "unicode_versions": unicode_versions,
        },
    }
    sections[mtok.SECTION_META] = (mtok.U8, json.dumps(meta, ensure_ascii=False, sort_keys=True).encode("utf-8"))
    sections[mtok.SECTION_ADDED_COLUMNS] = (mtok.U8, added_columns(d.added_tokens))
    if d.chat_template is not None:
        sections[mtok.SECTION_CHAT_TEMPLATE] = (mtok.U8, d.chat_template.encode("utf-8"))
    for k, (dtype, payload) in enumerate(blobs.items):
        sections[mtok.BLOB_BASE + k] = (dtype, payload)
    return sections


def added_columns(tokens) -> bytes:
    """The added_columns section (mtok.ADDED_COLUMNS) of these added tokens."""
    n = len(tokens)
    data = "".join(a.content for a in tokens).encode("utf-8")
    ends = list(accumulate(len(a.content) for a in tokens))
    flags = bytes(sum(bool(getattr(a, name)) << k for k, name in enumerate(mtok.ADDED_FLAGS)) for a in tokens)
    return (mtok.ADDED_COLUMNS.pack(n, len(data)) + struct.pack(f"<{n}I", *(a.id for a in tokens))
            + struct.pack(f"<{n}I", *ends) + flags + data)


def _ranges(ids: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for i in ids:
        if out and out[-1][1] == i:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1])
    return out


def _split_step(d, pattern, literal, flavor, behavior, invert, blobs) -> dict:
    step = {"type": "split", "behavior": behavior, "invert": invert}
    if literal:
        step["literal"] = pattern
        return step
    from .regex_compile import PatternError, compile_pattern

    try:
        cp = compile_pattern(pattern, flavor)
    except PatternError as e:
        field = {"tekken": "config.pattern", "hf_json": "pre_tokenizer.pattern"}.get(d.source_format)
        raise SourceError(d.source_path, f"split pattern cannot be compiled exactly: {e}", field=field) from None
    step["regex"] = cp.py_pattern
    if cp.tiles:
        step["tiles"] = True
    if cp.runs_pattern:
        step["runs"] = {"regex": cp.runs_pattern, "set": cp.run_set, "k": cp.run_k}
    if cp.space_cut is not None:  # where a text may be cut at a space (regex_compile.space_cut_unsafe)
        step["space_cut"] = cp.space_cut.hex()
    step["regex_bmp"] = cp.py_pattern_bmp
    from .sre_code import compile_code

    # regex_full compiled ahead with its classes guarded (sre_code.py): loads in ~1 ms and runs on
    # any text, astral code points included, where regex_bmp needs stand-ins for them. Only the
    # code serves (plain `re` runs the text slowly), so a runtime on another engine takes regex_bmp.
    stored = compile_code(cp.py_pattern_full, guard_astral=True)
    if stored is not None:
        info, words = stored
        step["regex_full"] = cp.py_pattern_full
        step["regex_full_code"] = dict(info, blob=blobs.add(mtok.U32, words))
    step["class_index"] = blobs.add(mtok.U16, cp.class_index)
    step["class_blocks"] = blobs.add(mtok.U8, cp.class_blocks)
    step["unicode_version"] = cp.unicode_version
    return step


def _compile_decoder_step(d: TokenizerDef, s: dict, blobs: _Blobs) -> dict:
    if s["type"] == "replace" and "pattern" in s:  # a Replace decoder's Regex: exporter/sp_steps.py
        from .sp_steps import compile_normalizer_step

        return compile_normalizer_step(d, dict(s, literal=False), blobs, field="decoder.pattern")
    return s


def _compile_pre_tokenizer(d: TokenizerDef, blobs: _Blobs) -> list[dict]:
    out = []
    for s in d.pre_tokenizer:
        if s["type"] == "split":
            out.append(_split_step(d, s["pattern"], s["literal"], s["flavor"], s["behavior"], s["invert"], blobs))
        elif s["type"] == "byte_level":
            if s["add_prefix_space"]:
                out.append({"type": "prefix_space"})
            if s["use_regex"]:
                out.append(_split_step(d, BYTE_LEVEL_PATTERN, False, "onig", "isolated", False, blobs))
        elif s["type"] == "char_split":  # BertPreTokenizer, Punctuation, WhitespaceSplit
            from .bert import compile_pre_tokenizer

            out.extend(compile_pre_tokenizer(s, blobs))
        elif s["type"] == "metaspace":  # runtime/metaspace.py; no data
            out.append(dict(s))
        elif s["type"] in ("digits", "unicode_scripts"):  # pinned char tables: exporter/sp_steps.py
            from .sp_steps import compile_pre_tokenizer_step

            out.append(compile_pre_tokenizer_step(d, s, blobs))
        else:
            raise SourceError(d.source_path, f"internal: unknown pre-tokenizer step {s['type']!r}")
    return out


def _compile_normalizer(d: TokenizerDef, blobs: _Blobs) -> list[dict]:
    out = []
    forms = {s["form"] for s in d.normalizer if s["type"] == "unicode"}
    blob = None
    if forms:
        from .norm_tables import build_norm_blob, pattern_fields

        table = build_norm_blob(forms)
        blob = blobs.add(mtok.U8, table)
        patterns = {form: pattern_fields(table, form, blobs) for form in sorted(forms)}
    from .unigram import compile_normalizer_steps  # Precompiled (charsmap + grapheme blobs), Nmt

    spm_steps = compile_normalizer_steps(d, d.normalizer, blobs)
    for k, s in enumerate(d.normalizer):
        if k in spm_steps:
            out.append(spm_steps[k])
        elif s["type"] == "unicode":
            out.append({"type": "unicode", "form": s["form"], "tables": blob, "patterns": patterns[s["form"]],
                        "unicode_version": "9.0.0"})
        elif s["type"] == "spm":  # SentencePiece's normalizer: flags only, its charsmap is a model section
            out.append(dict(s))
        elif s["type"] in ("prepend", "replace"):
            from .sp_steps import compile_normalizer_step

            out.append(compile_normalizer_step(d, s, blobs))
        elif s["type"] in ("bert", "lowercase", "strip", "strip_accents"):
            from .bert import compile_normalizer

            out.extend(compile_normalizer(s, blobs))
        else:
            raise SourceError(d.source_path, f"internal: unknown normalizer step {s['type']!r}")
    return out
