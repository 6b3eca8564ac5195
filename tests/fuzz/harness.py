"""Fuzz harness: open + walk + analyze + render (every format), then info and stack's
engine calls and renderers, in-process.

The only exception an input may raise is `DumpError` from `open_dump` (the input is
unusable). Anything else, a report that breaks its format's escaping, or an input that
takes too long, is a bug.

Two drivers share `run_one`:

* coverage-guided (atheris / libFuzzer), the long campaign::

      python tests/fuzz/harness.py -atheris_runs=1000000 -timeout=20 -rss_limit_mb=2048 \
          /tmp/dumpkit-fuzz-corpus

  (seeds from sample_dumps/ and ../shared/real_dumps are copied into the corpus folder
  on start; extra libFuzzer flags pass through.)

* a structure-aware random mutator with no dependency (`campaign`), used by
  tests/fuzz/test_fuzz_smoke.py and by `python tests/fuzz/harness.py --random SECONDS`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List, NamedTuple, Optional, Sequence

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
SAMPLES = ROOT / "sample_dumps"
SAMPLE_BIN = SAMPLES / "bin"
REAL_DUMPS = ROOT.parent / "shared" / "real_dumps"

# Seeds: small ones first (the fuzzer is faster on them); the big sample dumps still
# exercise thousands of memory ranges and deep walks.
SEED_SAMPLES = (
    "null_deref.dmp",
    "gp_wild_pointer.dmp",
    "fastfail_abort.dmp",
    "big_frame.dmp",
    "tf_env_abort.dmp",
    "recursion_cycle3.dmp",
)
MAX_SEED_BYTES = 2 << 20


def seed_files() -> List[Path]:
    out = [SAMPLES / n for n in SEED_SAMPLES if (SAMPLES / n).is_file()]
    if REAL_DUMPS.is_dir():
        out += [p for p in sorted(REAL_DUMPS.glob("*/*.dmp")) if p.stat().st_size <= MAX_SEED_BYTES]
    return out


def seeds() -> List[bytes]:
    return [p.read_bytes() for p in seed_files()]


class Bug(AssertionError):
    """A report that breaks its output format."""


class FuzzTarget(NamedTuple):
    """What a campaign fuzzes: its seeds, its mutator (data, rng, seed pool), the run that
    returns None for refused input and raises on a bug, the suffix of saved inputs."""

    seeds: Callable[[], List[bytes]]
    mutate: Callable[[bytes, random.Random, Sequence[bytes]], bytes]
    run: Callable[[bytes], Optional[str]]
    suffix: str


_scratch: Optional[str] = None


def _scratch_file() -> str:
    global _scratch
    if _scratch is None:
        folder = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        fd, _scratch = tempfile.mkstemp(prefix="dumpkit-fuzz-", suffix=".dmp", dir=folder)
        os.close(fd)
    return _scratch


def run_one(data: bytes, image_paths: Sequence[str] = (), all_formats: bool = True) -> Optional[str]:
    """Analyse `data` as a dump and render it in every format (JSON only when not
    `all_formats`), then run `dumpkit info` and `dumpkit stack`'s engine calls and
    renderers on it. Returns None when the input was rejected as unusable (DumpError, or
    nothing to analyse: what every command rejects), else the JSON report. Raises on any
    bug."""
    from dumpkit.analysis.facts import nothing_to_analyse
    from dumpkit.engine import Options, analyze
    from dumpkit.report.html import render_html
    from dumpkit.report.json_report import render_json
    from dumpkit.report.markdown import render_markdown
    from dumpkit.report.text import render_text
    from dumpkit.sources.minidump import open_dump
    from dumpkit.target import DumpError

    path = _scratch_file()
    with open(path, "wb") as f:
        f.write(data)
    try:
        target = open_dump(path)
    except DumpError as e:
        if "\n" in str(e):
            raise Bug(f"DumpError message is not one line: {e!r}") from None
        return None
    if nothing_to_analyse(target, target.soft_errors) is not None:
        target.close()
        return None
    try:
        # Limits well below the CLI defaults keep one execution short (a mutated thread
        # list naming thousands of threads is the common expensive input); the code paths
        # are the same, only repeated less.
        opts = Options(
            image_paths=tuple(image_paths),
            max_frames=20_000,
            other_thread_max_frames=500,
            max_other_threads=64,
            other_frames_budget=5_000,
        )
        report = analyze(target, opts, problems=target.soft_errors).report
        # Compact JSON in the long campaign: the C encoder, the same objects; indentation
        # is whitespace the pure-Python encoder would spend most of an execution on.
        js = render_json(report, indent=2 if all_formats else None)
        json.loads(js)
        if not all_formats:
            return js
        text = render_text(report, color=False)
        if "\x1b" in text:
            raise Bug("ESC byte in the text report")
        html = render_html(report)
        if "<script" in html.lower():
            raise Bug("raw <script in the HTML report")
        render_markdown(report)
        _info_and_stack(target, opts, all_formats)
        return js
    finally:
        target.close()


def _info_and_stack(target, opts, all_formats: bool) -> None:
    """`dumpkit info` and `dumpkit stack --all` on the same input: the read phase alone,
    and a walk of every thread (the first 64) streamed as the CLI streams it."""
    import io

    from rich.console import Console

    from dumpkit.engine import contents, stacks
    from dumpkit.report.contents import render_contents
    from dumpkit.report.json_report import render_json
    from dumpkit.report.stream import write_stacks_json, write_stacks_text

    doc = contents(target, problems=target.soft_errors)
    json.loads(render_json(doc, indent=None))
    doc_s, frames, supports = stacks(
        target, opts, list(target.threads[: opts.max_other_threads]), cycles=all_formats, problems=target.soft_errors
    )
    out = io.StringIO()
    write_stacks_json(doc_s, frames, out, supports=supports)
    json.loads(out.getvalue())
    if not all_formats:
        return
    for write in (
        lambda console, sink: render_contents(doc, console),
        lambda console, sink: write_stacks_text(doc_s, frames, console, sink),
    ):
        sink = io.StringIO()
        write(Console(file=sink, highlight=False, soft_wrap=False, width=120, color_system=None), sink)
        if "\x1b" in sink.getvalue():
            raise Bug("ESC byte in info/stack text output")


# ----------------------------------------------------------------- random mutator
INTERESTING32 = (
    0,
    1,
    2,
    0x7F,
    0x80,
    0xFF,
    0x100,
    0x7FFF,
    0x8000,
    0xFFFF,
    0x10000,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFE,
    0xFFFFFFFF,
)


def _structure_offsets(data: bytes) -> List[int]:
    """Offsets of header, directory and stream-start words: where mutations matter most."""
    offs = list(range(0, min(32, len(data)), 4))
    if len(data) < 32:
        return offs
    n, rva = struct.unpack_from("<II", data, 8)
    for i in range(min(n, 64)):
        e = rva + 12 * i
        if e + 12 > len(data):
            break
        offs += [e, e + 4, e + 8]
        _t, size, srva = struct.unpack_from("<III", data, e)
        offs += list(range(srva, min(srva + min(size, 256), len(data) - 3), 4))
    return offs


def mutate(data: bytes, rng: random.Random, pool: Sequence[bytes] = ()) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 8))):
        if not buf:
            buf = bytearray(rng.randbytes(rng.randrange(1, 64)))
        op = rng.randrange(9)
        if op <= 2:  # a structure word set to an interesting or random value
            offs = _structure_offsets(bytes(buf))
            at = rng.choice(offs) if offs and rng.random() < 0.8 else rng.randrange(max(1, len(buf) - 3))
            val = (
                rng.choice(INTERESTING32 + (len(buf), len(buf) - 1, len(buf) + 12))
                if rng.random() < 0.6
                else rng.getrandbits(32)
            )
            if at + 4 <= len(buf):
                buf[at : at + 4] = struct.pack("<I", val & 0xFFFFFFFF)
        elif op == 3:  # +- a small delta to a structure word
            offs = _structure_offsets(bytes(buf))
            if offs:
                at = rng.choice(offs)
                if at + 4 <= len(buf):
                    (v,) = struct.unpack_from("<I", buf, at)
                    buf[at : at + 4] = struct.pack("<I", (v + rng.randint(-64, 64)) & 0xFFFFFFFF)
        elif op == 4:  # bit flips
            for _ in range(rng.randrange(1, 16)):
                i = rng.randrange(len(buf))
                buf[i] ^= 1 << rng.randrange(8)
        elif op == 5:  # truncate
            del buf[rng.randrange(len(buf)) :]
        elif op == 6:  # random bytes over a span
            at = rng.randrange(len(buf))
            n = rng.randrange(1, 256)
            buf[at : at + n] = rng.randbytes(min(n, len(buf) - at))
        elif op == 7:  # copy a span from elsewhere (this or another seed)
            src = rng.choice(pool) if pool and rng.random() < 0.3 else bytes(buf)
            if src:
                a = rng.randrange(len(src))
                n = rng.randrange(1, 512)
                b = rng.randrange(len(buf))
                chunk = src[a : a + n]
                buf[b : b + len(chunk)] = chunk
        else:  # append garbage / 64-bit word
            at = rng.randrange(max(1, len(buf) - 7))
            if at + 8 <= len(buf):
                buf[at : at + 8] = struct.pack("<Q", rng.choice((0, (1 << 64) - 1, 1 << 63, rng.getrandbits(64))))
    return bytes(buf)


def campaign(
    seconds: float,
    seed: int = 0,
    on_case: Optional[Callable[[int, bytes], None]] = None,
    crash_dir: Optional[str] = None,
    max_case_seconds: float = 10.0,
    target: Optional["FuzzTarget"] = None,
) -> dict:
    """Mutate seeds for `seconds`; return counts. Raises (after saving the input to
    crash_dir, if given) on the first bug. `target`: another input kind (bundle_harness.py);
    by default, dumps through run_one."""
    target = target or FuzzTarget(seeds, lambda data, rng, pool: mutate(data, rng, pool), run_one, ".dmp")
    pool = target.seeds()
    if not pool:
        raise RuntimeError("no seeds found")
    rng = random.Random(seed)
    started = time.monotonic()
    execs = rejected = 0
    slowest = 0.0
    while time.monotonic() - started < seconds:
        base = rng.choice(pool)
        data = target.mutate(base, rng, pool)
        t0 = time.monotonic()
        try:
            if target.run(data) is None:
                rejected += 1
        except KeyboardInterrupt:
            break
        except BaseException:
            _save(crash_dir, data, target.suffix)
            raise
        took = time.monotonic() - t0
        slowest = max(slowest, took)
        if took > max_case_seconds:
            _save(crash_dir, data, target.suffix)
            raise Bug(f"one input took {took:.1f} s")
        execs += 1
        if on_case:
            on_case(execs, data)
    return {
        "executions": execs,
        "rejected": rejected,
        "seconds": time.monotonic() - started,
        "slowest": slowest,
        "seed": seed,
    }


def _save(crash_dir: Optional[str], data: bytes, suffix: str = ".dmp") -> None:
    if crash_dir:
        os.makedirs(crash_dir, exist_ok=True)
        name = hashlib.sha1(data).hexdigest()[:16]
        Path(crash_dir, f"crash-{name}{suffix}").write_bytes(data)


def seed_corpus(argv: Sequence[str], files: Sequence[Path]) -> None:
    """Copy the seeds into the first corpus folder given to libFuzzer (it reads and extends it)."""
    dirs = [a for a in argv[1:] if not a.startswith("-")]
    if dirs:
        os.makedirs(dirs[0], exist_ok=True)
        for p in files:
            dst = Path(dirs[0], "seed-" + p.parent.name + "-" + p.name)
            if not dst.exists():
                dst.write_bytes(p.read_bytes())


# ----------------------------------------------------------------- atheris driver
def _atheris_main(argv: List[str]) -> None:
    import atheris

    # Only our code and the record parsers we lean on are instrumented: coverage of rich
    # or capstone internals says nothing about dumpkit and costs most of the time.
    with atheris.instrument_imports(include=["dumpkit", "minidump"]):
        import dumpkit.analysis.budget
        import dumpkit.analysis.environment
        import dumpkit.analysis.framesizes
        import dumpkit.analysis.recursion
        import dumpkit.analysis.verdict
        import dumpkit.context
        import dumpkit.engine
        import dumpkit.images
        import dumpkit.pe
        import dumpkit.report.html
        import dumpkit.report.json_report
        import dumpkit.report.markdown
        import dumpkit.report.text
        import dumpkit.sources.minidump
        import dumpkit.unwind.amd64
        import dumpkit.unwind.disasm  # noqa: F401

    seed_corpus(argv, seed_files())
    if not any(a.startswith("-max_len") for a in argv):
        argv = argv + [f"-max_len={MAX_SEED_BYTES}"]

    # DUMPKIT_FUZZ_FORMATS=json: open + walk + analyze + JSON only, about 3x the
    # executions per second; the escaping of the other formats is what tests/hostile covers.
    all_formats = os.environ.get("DUMPKIT_FUZZ_FORMATS", "all") != "json"

    def test_one(data: bytes) -> None:
        run_one(data, all_formats=all_formats)

    atheris.Setup(argv, test_one)
    atheris.Fuzz()


def main(argv: List[str]) -> None:
    if len(argv) >= 2 and argv[1] == "--random":
        seconds = float(argv[2]) if len(argv) > 2 else 60.0
        seed = int(argv[3]) if len(argv) > 3 else int(time.time())
        stats = campaign(seconds, seed, crash_dir=str(ROOT / "tests" / "fuzz" / "crashes"))
        print(json.dumps(stats))
        return
    _atheris_main(argv)


if __name__ == "__main__":
    main(sys.argv)
