"""The Tokenizer: a mapped .mtok file and the pipeline its META section describes.

Loading maps the file, checks the header and parses the small META json; everything else
(pipeline objects, added-token matchers, numpy views) is built on first use. Encoding follows the
source's reference library: tokenizers for tokenizer.json ("hf"), tiktoken for .tiktoken
("tiktoken"), mistral-common's Tekkenizer for Tekken ("tekken"), sentencepiece's
SentencePieceProcessor for a SentencePiece .model ("sentencepiece").
"""

from __future__ import annotations

import json
import re
import zlib
from _thread import RLock, _local
from gc import disable as gc_disable, enable as gc_enable, isenabled as gc_isenabled

from .. import bytelevel, mtok
from ..errors import ArgumentError, EncodeError, FormatError, TokmapError
from . import added as added_mod
from . import postprocess
from .meta_check import check_meta
from .reader import MtokFile


def load(path, verify: bool = False) -> "Tokenizer":
    """Map a .mtok file. verify=True also checks every section checksum (reads the whole file)."""
    f = MtokFile(path)
    if verify:
        f.verify()
    return Tokenizer(f)


class Encoding:
    """One encoded sequence, with what tokenizers' Encoding carries. (A plain class: importing
    dataclasses would pull inspect and cost milliseconds on the cold-start path.)"""

    __slots__ = ("ids", "type_ids", "offsets", "special_tokens_mask", "attention_mask", "overflowing")

    def __init__(self, ids, type_ids, offsets, special_tokens_mask, attention_mask, overflowing=None):
        self.ids = ids
        self.type_ids = type_ids
        self.offsets = offsets
        self.special_tokens_mask = special_tokens_mask
        self.attention_mask = attention_mask
        self.overflowing = [] if overflowing is None else overflowing

    def __len__(self):
        return len(self.ids)

    def __repr__(self):
        return f"Encoding(num_tokens={len(self.ids)}, ids={self.ids[:8]}{'...' if len(self.ids) > 8 else ''})"


_CORRUPTION = (IndexError, KeyError, ValueError, TypeError, OverflowError, RecursionError, MemoryError,
               UnicodeError, re.error)
PAUSE_GC_CHARS = 1024  # texts from this long encode with the cyclic collector paused (see _encoding)


def _corrupted(self, fn, e):
    """The error to raise for e, raised inside fn: e itself when the call was the caller's mistake,
    else a FormatError naming the file (and the damaged section, if its checksum says so)."""
    if isinstance(e, TypeError) and e.__traceback__.tb_next is None:
        return e  # the call itself failed (an unknown keyword, say): the caller's mistake
    self._f.verify()  # a damaged section is the likely cause: name it if its checksum fails
    # (lstrip: encode's general path is _encode; the caller called encode)
    return FormatError(self.path, f"corrupted data while running {fn.__name__.lstrip('_')}: {type(e).__name__}: {e} "
                       f"(run `tokmap verify` on the file)")


def _guard(fn, pause_gc: bool = False):
    """Turn any failure caused by corrupted mapped data into a FormatError naming the file.

    pause_gc (the encode calls): pause the cyclic garbage collector while fn runs over a text of
    PAUSE_GC_CHARS or more. A first encode of a document makes a Python object for each of its
    distinct pieces (the cache's tuples of ids, hundreds of thousands on a multilingual text),
    and each 700 of them start a collection that walks the young objects again (every tenth one
    the older ones too): 200 of multi.txt's 1,480 ms under Llama 3. Nothing the encoder makes can
    be part of a reference cycle (ints, strs, tuples of ints, lists and dicts of those), so
    refcounting frees all of it and the pause loses nothing; the collector runs as usual once
    the call returns. Short texts skip the pause (it costs a few tenths of a microsecond, and
    they make few objects), as do calls made while the collector is off already, and a text
    passed by keyword. A list in the text's place (the model input batching.py recorded for a
    group of documents, at least 4K chars) always pauses it."""

    def wrapper(self, *args, **kwargs):
        busy = self._busy
        if not busy.acquire(False):  # another thread is in a call on this tokenizer: _own_copy
            return wrapper(self._own_copy(), *args, **kwargs)
        # (text taken from args, so that a call missing it fails in fn, with fn's name)
        paused = pause_gc and args and (type(args[0]) is str and len(args[0]) >= PAUSE_GC_CHARS
                                        or type(args[0]) is list) and gc_isenabled()
        if paused:
            gc_disable()
        try:
            return fn(self, *args, **kwargs)
        except TokmapError:
            raise
        except _CORRUPTION as e:
            err = _corrupted(self, fn, e)
            if err is e:
                raise
            raise err from e
        finally:
            if paused:
                gc_enable()
            busy.release()

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _encoding(fn):
    """_guard for the encode calls: the collector paused on long texts (see _guard)."""
    return _guard(fn, pause_gc=True)


class Tokenizer:
    def __init__(self, f: MtokFile):
        self._f = f
        # Threads. The caches (pieces, words, chunks, what a first call learns about the text) are
        # this object's, and a call fills them and reads them back in steps that another thread's
        # call could undo in between (emptying a full cache, dropping long entries, growing a
        # table). So one call at a time runs on this object, the one that finds `_busy` free; a
        # call made while another thread is in one runs on that thread's own Tokenizer over the
        # same mapped file (_own_copy: made on its first such call, ~0.3 ms, caches of its own),
        # never waiting: a lock that made it wait would hold a short encode back for the whole
        # of another thread's long one, where the interpreter's switching lets it through in
        # microseconds. One thread alone pays an uncontended RLock: ~0.15 us a call (a short
        # encode: 1.2-4.5 us).
        self._busy = RLock()
        self._copies = _local()
        self.path = f.path
        self.meta = self._json_section(mtok.SECTION_META, dict)
        meta_off = f.sections[mtok.SECTION_META][1]
        try:
            check_meta(self.meta)
        except (ValueError, TypeError) as e:
            raise FormatError(self.path, f"invalid META: {e}", section="meta", offset=meta_off) from None
        self.api = self.meta["api"]
        self.vocab_size = self.meta["vocab_size"]

        def bad(sid, msg):
            off = f.sections[sid][1] if sid in f.sections else None
            return FormatError(self.path, f"inconsistent file: {msg}", section=mtok.section_name(sid), offset=off)

        n_off = len(f.view(mtok.SECTION_TOKEN_OFFSETS, mtok.U32))
        if n_off != self.vocab_size + 1:
            raise bad(mtok.SECTION_TOKEN_OFFSETS, f"{n_off} token offsets for vocab_size {self.vocab_size}")
        if self.meta["model"].get("type", "bpe") == "bpe":
            # ranks_from_results: the results array is the ranks, so the file has no rank section.
            merged = self.meta["model"].get("ranks_from_results", False)
            arrays = (mtok.SECTION_MERGE_RESULTS,) if merged else (mtok.SECTION_MERGE_RANKS, mtok.SECTION_MERGE_RESULTS)
            for sid in (mtok.SECTION_MERGE_KEYS,) + arrays + (mtok.SECTION_BYTE_IDS,):
                if not f.has(sid):
                    raise bad(sid, "required section is missing")
            if merged and f.has(mtok.SECTION_MERGE_RANKS):
                raise bad(mtok.SECTION_MERGE_RANKS, "present although meta says model.ranks_from_results")
            nk = len(f.view(mtok.SECTION_MERGE_KEYS, mtok.U64))
            for sid in arrays:
                if len(f.view(sid, mtok.U32)) != nk:
                    raise bad(sid, f"{len(f.view(sid, mtok.U32))} entries but merge_keys has {nk}")
            if len(f.view(mtok.SECTION_BYTE_IDS, mtok.U32)) != 256:
                raise bad(mtok.SECTION_BYTE_IDS, "byte_ids must hold 256 entries")
            if f.has(mtok.SECTION_MERGE_NONMONO) and \
                    len(f.view(mtok.SECTION_MERGE_NONMONO, mtok.U8)) != (nk + 7) // 8:
                raise bad(mtok.SECTION_MERGE_NONMONO, f"bitmap must hold {(nk + 7) // 8} bytes for {nk} merges")
        self._model = None
        self._pipeline = None
        self._plain = None  # encode's short path (_plain_encoder; False: none), bound by the first general call
        # (whose rule encode's short path applies to lone surrogates: refused, or None: replaced)
        self._reference = {"sentencepiece": "sentencepiece", "hf": "tokenizers"}.get(self.api)
        self._added = None
        self._holes = None
        self._pool = None

    # -- loading helpers ----------------------------------------------------------------------
    def _checked(self, sid):
        """A small section's bytes, checksummed first: a flipped bit there must not run."""
        _dt, off, length, crc = self._f.sections.get(sid, (None, None, None, None))
        if off is None:
            raise FormatError(self.path, "section is missing", section=mtok.section_name(sid))
        raw = self._f.view(sid, mtok.U8)
        if zlib.crc32(raw) != crc:
            raise FormatError(self.path, "checksum mismatch (file corrupted)", section=mtok.section_name(sid),
                              offset=off)
        return raw

    def _json_section(self, sid, typ):
        """A small JSON section, checksummed (_checked) and parsed."""
        raw = self._checked(sid)
        off = self._f.sections[sid][1]
        try:
            val = json.loads(bytes(raw))
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise FormatError(self.path, f"invalid JSON: {type(e).__name__}: {e}", section=mtok.section_name(sid),
                              offset=off) from None
        if not isinstance(val, typ):
            raise FormatError(self.path, f"expected a JSON {typ.__name__}", section=mtok.section_name(sid), offset=off)
        return val

    @property
    def model(self):
        if self._model is None:
            from .models import build

            self._model = build(self._f, self.meta)
        return self._model

    @property
    def pipeline(self):
        if self._pipeline is None:
            from .pipeline import Pipeline

            self._pipeline = Pipeline(self._f, self.meta, self.model, self._added_columns())
        return self._pipeline

    @property
    def added_tokens(self) -> list:
        """The added tokens (AddedToken: id, content and the five flags), in the file's order."""
        return self._added_columns().tokens()

    def _added_columns(self):
        """The added tokens as added.AddedColumns, parsed and checked on first use."""
        if self._added is None:
            added = []
            f = self._f
            sid = mtok.SECTION_ADDED_COLUMNS if f.has(mtok.SECTION_ADDED_COLUMNS) else mtok.SECTION_ADDED_TOKENS
            if f.has(sid):  # (the JSON list in files from before the columns)
                off = f.sections[sid][1]
                try:
                    if sid == mtok.SECTION_ADDED_COLUMNS:  # (its ids are u32: checked against the vocabulary there)
                        self._added = added_mod.parse_columns(self._checked(sid), self.vocab_size)
                        return self._added
                    added = added_mod.parse(self._json_section(sid, list))
                except ValueError as e:
                    raise FormatError(self.path, str(e), section=mtok.section_name(sid), offset=off) from None
                ids = [a[0] for a in added]  # (AddedToken is a tuple: id first)
                if ids and not (0 <= min(ids) and max(ids) < self.vocab_size):
                    bad = next(i for i in ids if not 0 <= i < self.vocab_size)
                    raise FormatError(self.path, f"added token id {bad} outside the vocabulary",
                                      section=mtok.section_name(sid), offset=off)
            self._added = added_mod.AddedColumns.of(added)
        return self._added

    def verify(self) -> None:
        """Check every section checksum (reads the whole file); FormatError names the first bad one."""
        self._f.verify()

    @property
    def chat_template(self) -> str | None:
        if not self._f.has(mtok.SECTION_CHAT_TEMPLATE):
            return None
        return bytes(self._f.view(mtok.SECTION_CHAT_TEMPLATE)).decode("utf-8", "replace")

    @property
    def provenance(self) -> dict:
        return self.meta.get("provenance", {})

    # -- encoding -----------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True, *, allowed_special=None, disallowed_special=None,
               as_array: bool = False):
        """Token ids for `text`.

        tokenizer.json: as tokenizers' `encode(text, add_special_tokens=...).ids` (with the file's
        truncation and padding). .tiktoken: as tiktoken's `encode(text, allowed_special=...,
        disallowed_special=...)` (defaults: no specials allowed, all disallowed). Tekken: as
        `Tekkenizer.encode(text, bos=add_special_tokens, eos=False)`. SentencePiece .model: as
        `SentencePieceProcessor.encode(text, add_bos=add_special_tokens)` -- BOS only, and only when
        the model defines a BOS control piece (what HF's LlamaTokenizer adds); never EOS.
        """
        # A short str with no other option goes straight to the source's plain encode (bound once,
        # _plain_encoder): the general path's decorator, argument checks and branches cost a
        # short sentence ~1.5 of its 8-13 us. Same errors: the surrogate check, and corruption
        # turned into a FormatError as _guard does.
        run = self._plain
        if run and type(text) is str and len(text) < PAUSE_GC_CHARS and allowed_special is None \
                and disallowed_special is None and not as_array:
            busy = self._busy
            if not busy.acquire(False):  # (another thread's call is running here: see __init__)
                return self._own_copy().encode(text, add_special_tokens)
            try:
                if not text.isascii() and self._reference is not None:
                    _no_surrogates(text, self._reference)
                return run(text, add_special_tokens)
            except TokmapError:
                raise
            except _CORRUPTION as e:
                err = _corrupted(self, Tokenizer.encode, e)
                if err is e:
                    raise
                raise err from e
            finally:
                busy.release()
        return self._encode(text, add_special_tokens, allowed_special=allowed_special,
                            disallowed_special=disallowed_special, as_array=as_array)

    def _plain_encoder(self):
        """(text, add_special_tokens) -> ids for encode's short str calls with no other option (for
        SentencePiece: every call's), or None (truncation and padding need Encodings). tiktoken's
        and Tekken's replace lone surrogates; tiktoken's refuses a text holding a special token
        (all are disallowed by default): one search finds whether it does, and the general path
        raises its error."""
        if self.api == "tiktoken":
            contents = self._added_columns().contents
            ordinary = self.pipeline.short_encoder(ordinary=True)
            if not contents:
                return lambda text, add: ordinary(text if text.isascii() else _replace_surrogates(text), False)
            special = re.compile("|".join(map(re.escape, contents)))
            general = self._encode

            def run(text, add):
                if not text.isascii():
                    text = _replace_surrogates(text)
                if special.search(text) is not None:
                    return general(text)  # (its EncodeError names the token and the fix)
                return ordinary(text, False)
            return run
        if self.api == "tekken":
            ordinary = self.pipeline.short_encoder(ordinary=True)
            bos = self.meta["extra"].get("bos_id")

            def run(text, add):
                ids = ordinary(text if text.isascii() else _replace_surrogates(text), False)
                if add and bos is not None:
                    ids.insert(0, bos)
                return ids
            return run
        if self.api == "sentencepiece":
            bos = self.meta["model"].get("bos_id")
            # (the usual single SpmNormalizer step called directly, not through the generic chain:
            # a short encode is a few microseconds, the chain was a tenth)
            steps, encode = self.pipeline.normalizers, self.model.encode_normalized
            norm = steps[0].normalize if len(steps) == 1 else self.pipeline.normalize
            if bos is None:
                return lambda text, add: encode(norm(text)[0])

            def run(text, add):
                ids = encode(norm(text)[0])
                if add:
                    ids.insert(0, bos)
                return ids
            return run
        if self.api == "hf" and not (self.meta.get("truncation") or self.meta.get("padding")):
            return self.pipeline.short_encoder()
        return None

    @_encoding
    def _encode(self, text: str, add_special_tokens: bool = True, *, allowed_special=None, disallowed_special=None,
                as_array: bool = False):
        """encode's general path (the first call binds _plain)."""
        _check_text(text)
        if self._plain is None:
            self._plain = self._plain_encoder() or False
        if self.api == "tiktoken":
            ids = self._tiktoken_encode(text, allowed_special, disallowed_special)
        elif self.api == "tekken":
            self._no_tiktoken_args(allowed_special, disallowed_special)
            ids = self.pipeline.encode_ordinary(_replace_surrogates(text))
            bos = self.meta["extra"].get("bos_id")
            if add_special_tokens and bos is not None:
                ids.insert(0, bos)
        elif self.api == "sentencepiece":
            # SentencePieceProcessor.encode(text), with BOS when add_special_tokens and the model
            # defines one (as HF's LlamaTokenizer adds it), never EOS: _plain_encoder's function,
            # which serves texts of any length.
            self._no_tiktoken_args(allowed_special, disallowed_special)
            if not text.isascii():
                _no_surrogates(text, "sentencepiece")
            ids = self._plain(text, add_special_tokens)
        else:
            self._no_tiktoken_args(allowed_special, disallowed_special)
            if not text.isascii():
                _no_surrogates(text, "tokenizers")
            if self.meta.get("truncation") or self.meta.get("padding"):
                ids = self.pipeline.encode_full(text, None, add_special_tokens).ids
            else:
                ids = self.pipeline.encode_ids(text, add_special_tokens)
        return _as_array(ids) if as_array else ids

    @_encoding
    def encode_ordinary(self, text: str, as_array: bool = False):
        """Ids with no special-token handling at all (tiktoken's `encode_ordinary`)."""
        _check_text(text)
        if self.api == "sentencepiece":
            if not text.isascii():  # (a short ASCII call pays only this test)
                _no_surrogates(text, "sentencepiece")
            if self._plain is None:
                self._plain = self._plain_encoder()
            ids = self._plain(text, False)
            return _as_array(ids) if as_array else ids
        ids = self.pipeline.encode_ordinary(_replace_surrogates(text))
        return _as_array(ids) if as_array else ids

    @_encoding
    def encode_full(self, text: str, pair: str | None = None, add_special_tokens: bool = True) -> Encoding:
        """An Encoding with offsets (code points into `text`), type ids and masks, as tokenizers gives."""
        _check_text(text)
        if pair is not None:
            _check_text(pair)
        if self.api != "hf":
            ids = self.encode(text, add_special_tokens) if self.api in ("tekken", "sentencepiece") \
                else self.encode(text)
            return Encoding(ids, [0] * len(ids), [(0, 0)] * len(ids), [0] * len(ids), [1] * len(ids))
        _no_surrogates(text, "tokenizers")
        if pair is not None:
            _no_surrogates(pair, "tokenizers")
        return self.pipeline.encode_full(text, pair, add_special_tokens)

    def encode_batch(self, texts, add_special_tokens: bool = True, *, allowed_special=None, disallowed_special=None,
                     as_array: bool = False, num_workers: int | None = None):
        """encode() over a list; results in order, each exactly what encode() gives.

        tokenizer.json padding applies batch-wide (to the longest, as tokenizers' encode_batch).
        num_workers=N (N >= 2) spreads a large batch over N worker processes that map the same file
        (started on first use, kept until close()); the default runs in this process.
        """
        texts = texts if isinstance(texts, list) else list(texts)
        kwargs = {"allowed_special": allowed_special, "disallowed_special": disallowed_special}
        padding = self.meta.get("padding") if self.api == "hf" else None
        pool = self._pool_for(texts, num_workers, kwargs)
        # A second thread calling while the pool is busy runs in-process rather than wait.
        if pool is not None and pool.lock.acquire(blocking=False):
            try:
                ids = pool.encode(texts, add_special_tokens, kwargs, as_array=as_array and not padding)
            finally:
                pool.lock.release()
            if as_array and not padding:
                return ids
        else:
            from .batching import encode_each

            busy = self._busy
            if busy.acquire(False):
                try:
                    ids = encode_each(self, texts, add_special_tokens, kwargs)
                finally:
                    busy.release()
            else:  # (another thread's call is running here: see __init__)
                ids = encode_each(self._own_copy(), texts, add_special_tokens, kwargs)
        if padding:
            # Padding looks only at each sequence's length, so ids-only Encodings pad exactly.
            encs = [Encoding(x, [], [], [], []) for x in ids]
            ids = [e.ids for e in postprocess.pad_batch(encs, padding)]
        return [_as_array(x) for x in ids] if as_array else ids

    @_encoding
    def _fill_deferred(self, recorded: list, kind: str) -> list:
        """What batching.py's markers stand for (corrupted data: FormatError; the collector paused
        as for a long text): each recorded (pieces, runs) group's ids ("pieces"), or each recorded
        word's ("words")."""
        if kind == "pieces":
            return self.model.encode_piece_groups(recorded)
        return self.model.encode_word_parts(recorded)

    def _own_copy(self) -> "Tokenizer":
        """This thread's own Tokenizer over the same mapped file, for its calls made while another
        thread is in a call on this one (see __init__); kept for the thread's later such calls."""
        mate = getattr(self._copies, "tok", None)
        if mate is None:
            mate = self._copies.tok = Tokenizer(self._f)
        return mate

    def _pool_for(self, texts, num_workers, kwargs):
        """The worker pool when this batch is worth sending to one, else None (in-process)."""
        if num_workers is None:
            return None
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ArgumentError(f"num_workers must be a positive int or None, got {num_workers!r}")
        if num_workers == 1:
            return None
        from . import parallel

        # Anything unusual runs in-process, where it fails or succeeds exactly as encode() does:
        # a non-str document, arguments that do not pickle.
        if len(texts) < 2 or not all(type(t) is str for t in texts) \
                or sum(map(len, texts)) < parallel.PARALLEL_MIN_CHARS or not parallel.picklable(kwargs):
            return None
        pool = self._pool
        if pool is not None and pool.usable and pool.size != num_workers and pool.lock.locked():
            return None  # another thread is using the pool at its size: leave it be
        if pool is not None and (not pool.usable or pool.size != num_workers):
            if pool.usable:
                pool.close()
            pool = None
        if pool is None:
            pool = self._pool = parallel.WorkerPool(self.path, parallel.fingerprint(self._f), num_workers,
                                                    self.vocab_size)
        return pool

    def close(self) -> None:
        """Stop the encode_batch worker processes, if any were started. The tokenizer stays usable."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _no_tiktoken_args(self, allowed, disallowed):
        if allowed is not None or disallowed is not None:
            raise ArgumentError("allowed_special/disallowed_special apply to .tiktoken sources only; "
                            "use add_special_tokens=")

    def _tiktoken_encode(self, text, allowed_special, disallowed_special):
        cols = self._added_columns()
        specials = dict(zip(cols.contents, cols.ids))
        for name, arg in (("allowed_special", allowed_special), ("disallowed_special", disallowed_special)):
            if arg is not None and arg != "all" and (isinstance(arg, (str, bytes)) or not hasattr(arg, "__iter__")
                                                     or not all(isinstance(x, str) for x in arg)):
                raise ArgumentError(f"{name} must be 'all' or a collection of special-token strings")
        if allowed_special is None:
            allowed_special = set()
        if disallowed_special is None:
            disallowed_special = "all"
        allowed = set(specials) if allowed_special == "all" else set(allowed_special)
        if disallowed_special == "all":
            disallowed = set(specials) - allowed
        else:
            disallowed = set(disallowed_special)
        text = _replace_surrogates(text)
        if disallowed:
            for s in sorted(disallowed):
                if s in text:
                    raise EncodeError(
                        f"Encountered text corresponding to disallowed special token {s!r}.\n"
                        f"If you want this text to be encoded as a special token, pass it to `allowed_special`, "
                        f"e.g. `allowed_special={{{s!r}, ...}}`.\nIf you want this text to be encoded as normal "
                        f"text, disable the check for this token by passing `disallowed_special=(enc.special_tokens_set - "
                        f"{{{s!r}}})`.\nTo disable this check for all special tokens, pass `disallowed_special=()`.")
        return self.pipeline.encode_with_specials(text, {s: specials[s] for s in allowed if s in specials})

    # -- decoding -----------------------------------------------------------------------------
    @_guard
    def decode(self, ids, skip_special_tokens: bool | None = None) -> str:
        """Text for `ids`, as the source's reference decodes it (tokenizers: specials skipped by
        default and unknown ids dropped; tiktoken: everything kept, unknown ids raise; Tekken:
        specials ignored; SentencePiece: as SentencePieceProcessor.decode, which drops control
        pieces whatever skip_special_tokens says)."""
        if self.api == "sentencepiece":
            return self.model.decode(_check_ids(ids))
        return self.pipeline.decode(_check_ids(ids), skip_special_tokens)

    @_guard
    def decode_bytes(self, ids) -> bytes:
        return self.pipeline.decode_bytes(_check_ids(ids))

    # -- vocabulary ---------------------------------------------------------------------------
    @_guard
    def id_to_token(self, i: int):
        """HF sources: the vocabulary string (byte-level spelling); SentencePiece: the piece; others:
        the token's bytes."""
        if self.api == "sentencepiece":
            i = _check_ids([i])[0]
            return self.model.piece(i) if 0 <= i < self.vocab_size else None
        return self.pipeline.id_to_token(_check_ids([i])[0])

    @_guard
    def token_to_id(self, token) -> int | None:
        if not isinstance(token, (str, bytes, bytearray, memoryview)):
            raise ArgumentError(f"token must be str or bytes, got {type(token).__name__}")
        return self.pipeline.token_to_id(token)

    def get_vocab_size(self) -> int:
        return self.vocab_size


def _check_text(text):
    if not isinstance(text, str):
        raise ArgumentError(f"expected str, got {type(text).__name__}")


def _check_ids(ids) -> list[int]:
    from operator import index

    try:
        return list(map(index, ids))
    except TypeError:
        raise ArgumentError("ids must be an iterable of integers") from None


def _no_surrogates(text: str, reference: str) -> None:
    """EncodeError for a str holding a surrogate code point (U+D800-U+DFFF, alone or paired up as
    two code units): it is no Unicode text and has no UTF-8 form, and tokenizers (a TypeError)
    and sentencepiece (a RuntimeError) refuse it. The test is a strict UTF-16 encode, which
    fails at a surrogate: for text within the BMP about a copy (wagahai.txt, 375K chars: 0.1 ms,
    where UTF-8 takes 0.8; a 23-char Chinese sentence 35 ns, "utf-16" being one of the codec
    names str.encode looks up without the registry, which "utf-16-le" (159 ns) is not). ASCII
    text needs no test: encode() skips it (str.isascii() reads a flag)."""
    try:
        text.encode("utf-16")
    except UnicodeEncodeError as e:
        raise EncodeError(f"the text holds a surrogate, U+{ord(text[e.start]):04X} at index {e.start}: it is no "
                          f"Unicode text and has no UTF-8 form, and {reference} refuses it too. Replace it "
                          "first, as tiktoken does: text.encode('utf-16', 'surrogatepass').decode('utf-16', "
                          "'replace')") from None


def _replace_surrogates(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        # tiktoken's rule: lone surrogates become U+FFFD via a UTF-16 round trip.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _as_array(ids):
    import numpy as np

    return np.asarray(ids, dtype=np.uint32)


__all__ = ["load", "Tokenizer", "Encoding", "bytelevel"]
