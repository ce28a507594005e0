"""The one intermediate definition between the format readers and the exporter: plain data.

A reader parses a source file and fills a TokenizerDef; the exporter turns a TokenizerDef into a
.mtok file. Neither side knows the other's format. Pipeline components are tagged dicts
({"type": ..., ...}) in tokmap's own vocabulary, already validated by the reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def sparse_id_limit(count: int) -> int:
    """Largest id a vocabulary of `count` tokens may use: ids index flat arrays, so an id far past
    the token count (a typo, or a hostile file) would make the exporter allocate gigabytes."""
    return 2 * count + 65536


@dataclass
class AddedToken:
    id: int
    content: str
    special: bool = True
    normalized: bool = False
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False


@dataclass
class BPEModel:
    # Token bytes by id for the model vocabulary; None marks an id with no token (a hole).
    vocab: list[bytes | None]
    # Merges: (left_id, right_id, result_id, rank); lower rank merges first. Several pairs may share
    # a rank (tiktoken: every split of a token ranks as the token); ties go to the leftmost pair.
    merges: list[tuple[int, int, int, int]]
    # byte_level: a piece's initial symbols are its UTF-8 bytes (GPT-2 byte alphabet / tiktoken).
    byte_level: bool = True
    # ignore_merges: a piece that is itself a token becomes that token directly (tiktoken, HF >= 0.19).
    ignore_merges: bool = False
    unk_id: int | None = None
    # Vocabulary strings that are not the byte-level spelling of their bytes (HF only): str -> id.
    irregular: dict[str, int] = field(default_factory=dict)


@dataclass
class TokenizerDef:
    source_format: str  # "hf_json" | "tiktoken" | "tekken"
    source_path: str
    source_sha256: str
    api: str  # whose conventions encode/decode follow: "hf" | "tiktoken" | "tekken"
    model: BPEModel
    added_tokens: list[AddedToken] = field(default_factory=list)
    normalizer: list[dict] = field(default_factory=list)
    pre_tokenizer: list[dict] = field(default_factory=list)
    post_processor: list[dict] = field(default_factory=list)
    decoder: list[dict] = field(default_factory=list)
    padding: dict | None = None
    truncation: dict | None = None
    chat_template: str | None = None
    # Source-specific settings the runtime needs (e.g. tiktoken's name, Tekken's bos/eos ids).
    extra: dict = field(default_factory=dict)
