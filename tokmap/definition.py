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
    # Character-level BPE only (byte_level=False; tokenizers' BPE without ByteLevel): a missing char
    # becomes its <0xHH> byte tokens (byte_fallback), adjacent unks fuse (fuse_unk), and the initial
    # symbols carry continuing_subword_prefix (non-first chars) / end_of_word_suffix (last char).
    byte_fallback: bool = False
    fuse_unk: bool = False
    continuing_subword_prefix: str | None = None
    end_of_word_suffix: str | None = None


@dataclass
class WordPieceModel:
    # Token bytes by id (UTF-8 of the vocabulary strings; no byte-level spelling); None = hole.
    vocab: list[bytes | None]
    unk_id: int
    continuing_subword_prefix: str = "##"
    max_input_chars_per_word: int = 100
    byte_level: bool = False
    irregular: dict[str, int] = field(default_factory=dict)


@dataclass
class WordLevelModel:
    # Token bytes by id (UTF-8 of the vocabulary strings); None = hole.
    vocab: list[bytes | None]
    unk_id: int
    byte_level: bool = False
    irregular: dict[str, int] = field(default_factory=dict)


@dataclass
class SentencePieceModel:
    """A SentencePiece .model (BPE by piece scores, or Unigram): run with SentencePiece's own rules."""

    vocab: list[bytes]  # every piece's UTF-8 bytes, by id
    scores: list[float]  # float32 values
    types: list[int]  # ModelProto.SentencePiece.Type: 1 normal, 2 unknown, 3 control, 4 user, 5 unused, 6 byte
    kind: str  # "bpe" | "unigram"
    unk_id: int
    bos_id: int | None
    byte_fallback: bool
    charsmap: bytes  # normalizer_spec.precompiled_charsmap (empty: no normalization table)
    add_dummy_prefix: bool
    remove_extra_whitespaces: bool
    escape_whitespaces: bool
    treat_whitespace_as_suffix: bool
    unk_surface: str
    irregular: dict[str, int] = field(default_factory=dict)


@dataclass
class UnigramModel:
    """tokenizer.json Unigram: pieces by id with f64 scores (tokenizers' rules, see CONFORMANCE §6)."""

    vocab: list[bytes]  # every piece's UTF-8 bytes, by id
    scores: list[float]
    unk_id: int | None
    byte_fallback: bool = False
    # Ids whose piece is repeated by a later id: tokenizers maps the string to the last id, so these
    # stay decodable but are left out of the sorted lookup.
    shadowed: list[int] = field(default_factory=list)
    byte_level: bool = False
    irregular: dict[str, int] = field(default_factory=dict)


@dataclass
class TokenizerDef:
    source_format: str  # "hf_json" | "tiktoken" | "tekken"
    source_path: str
    source_sha256: str
    api: str  # whose conventions encode/decode follow: "hf" | "tiktoken" | "tekken"
    model: BPEModel | WordPieceModel | WordLevelModel
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
