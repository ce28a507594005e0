"""Command line: `tok-export SRC -o OUT`, and `tokmap inspect|encode|decode|verify|bench`."""

from __future__ import annotations

import json
import sys
import time

import click

from .errors import TokmapError


def _fail(e: Exception):
    click.echo(f"error: {e}", err=True)
    sys.exit(1)


@click.command("tok-export")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", "out", required=True, type=click.Path(dir_okay=False), help="the .mtok file to write")
@click.option("--format", "fmt", type=click.Choice(["hf_json", "tiktoken", "tekken", "sentencepiece"]), default=None,
              help="source format (default: detected from the content)")
@click.option("--encoding", default=None, help="tiktoken encoding name for a .tiktoken file (default: by sha256)")
def export_main(src, out, fmt, encoding):
    """Compile a tokenizer.json, .tiktoken or Tekken json into one .mtok file."""
    from . import export

    t0 = time.perf_counter()
    try:
        export(src, out, fmt=fmt, encoding=encoding)
    except TokmapError as e:
        _fail(e)
    import os

    click.echo(f"wrote {out} ({os.path.getsize(out):,} bytes) in {time.perf_counter() - t0:.2f} s")


@click.group()
def main():
    """Inspect and run .mtok tokenizers."""


def _load(path, verify=False):
    from . import load

    try:
        return load(path, verify=verify)
    except TokmapError as e:
        _fail(e)


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def inspect(path):
    """Header, sections, sizes and provenance of a .mtok file."""
    tok = _load(path)
    f = tok._f
    click.echo(f"{path}: .mtok v{f.version}, {f.size:,} bytes, api {tok.api}, vocab {tok.vocab_size:,}")
    click.echo("provenance: " + json.dumps(tok.provenance, ensure_ascii=False))
    if tok.meta.get("extra"):
        click.echo("source settings: " + json.dumps(tok.meta["extra"], ensure_ascii=False))
    click.echo(f"{'section':<16}{'dtype':<6}{'offset':>12}{'length':>12}  crc32")
    for s in f.describe():
        click.echo(f"{s['name']:<16}{s['dtype']:<6}{s['offset']:>12,}{s['length']:>12,}  {s['crc32']}")
    m = tok.meta
    sizes = {s["name"]: s["length"] for s in f.describe()}

    def describe(step):
        """A step's type and options, and which embedded table (blob) it uses, of what size and data version."""
        blobs = [(k, v) for k, v in step.items() if k in ("table", "tables", "class_index", "class_blocks")
                 and isinstance(v, int)]
        opts = {k: v for k, v in step.items() if k not in ("type", "unicode_version", "regex") and (k, v) not in blobs}
        text = step["type"] + (f" {json.dumps(opts, ensure_ascii=False)}" if opts else "")
        if blobs:
            names = ", ".join(f"blob{v} ({sizes.get(f'blob{v}', 0):,} bytes)" for _k, v in blobs)
            text += f" -> tables {names}, data {step.get('unicode_version', '?')}"
        return text

    model = m["model"]
    if model["type"] == "bpe" and "merge_keys" in sizes:
        stored = sizes["merge_keys"] // 8
        source = model.get("source_merges")
        if source and stored < source:
            kept = f"{stored:,} of the source's {source:,} (the others can never fire)"
        else:
            kept = f"{stored:,}, all of the source's"
        ranks = "the results (no rank section)" if model.get("ranks_from_results") else "merge_ranks"
        click.echo(f"merges: {kept}; ranks: {ranks}")
    for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        steps = m[key]
        if not steps:
            click.echo(f"{key}: none" + (" (no normalization tables)" if key == "normalizer" else ""))
        for step in steps:
            click.echo(f"{key}: {describe(step)}")
    click.echo(f"added tokens: {m['n_added']}; chat template: {'yes' if tok.chat_template else 'no'}")


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.argument("text", required=False)
@click.option("--no-special", is_flag=True, help="add_special_tokens=False")
@click.option("--allowed-special", default=None, help="tiktoken sources: 'all' or comma-separated tokens")
@click.option("--timing", is_flag=True, help="print load and encode times")
def encode(path, text, no_special, allowed_special, timing):
    """Encode TEXT (or standard input) and print the ids."""
    t0 = time.perf_counter()
    tok = _load(path)
    t1 = time.perf_counter()
    if text is None:
        text = sys.stdin.read()
    kwargs = {}
    if allowed_special is not None:
        kwargs["allowed_special"] = "all" if allowed_special == "all" else set(allowed_special.split(","))
    try:
        if tok.api == "tiktoken":
            ids = tok.encode(text, **kwargs)
        else:
            ids = tok.encode(text, add_special_tokens=not no_special)
    except TokmapError as e:
        _fail(e)
    t2 = time.perf_counter()
    if timing:
        click.echo(f"load {1e3 * (t1 - t0):.3f} ms, encode {1e3 * (t2 - t1):.3f} ms, {len(ids)} tokens")
    click.echo(" ".join(map(str, ids)))


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.argument("ids", nargs=-1, type=int)
def decode(path, ids):
    """Decode IDS (or whitespace-separated ids on standard input) and print the text."""
    tok = _load(path)
    if not ids:
        ids = [int(x) for x in sys.stdin.read().split()]
    try:
        click.echo(tok.decode(list(ids)))
    except TokmapError as e:
        _fail(e)


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def verify(path):
    """Check every section checksum; exit 1 naming the first corrupted section."""
    tok = _load(path, verify=True)
    click.echo(f"{path}: OK ({len(tok._f.sections)} sections, checksums match)")


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.argument("corpus", type=click.Path(exists=True, dir_okay=False))
@click.option("--repeat", default=3, show_default=True)
def bench(path, corpus, repeat):
    """Quick single-file timing: load time and encode MiB/s on CORPUS (see bench/ for the peer run)."""
    from . import load

    t0 = time.perf_counter()
    tok = load(path)
    load_ms = 1e3 * (time.perf_counter() - t0)
    with open(corpus, encoding="utf-8") as fh:
        text = fh.read()
    mib = len(text.encode("utf-8")) / 2**20
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        ids = tok.encode_ordinary(text) if tok.api != "hf" else tok.encode(text)
        times.append(time.perf_counter() - t)
    click.echo(f"load {load_ms:.3f} ms; {len(ids):,} tokens; cold {mib / times[0]:.2f} MiB/s, "
               f"warm {mib / min(times[1:] or times):.2f} MiB/s")
