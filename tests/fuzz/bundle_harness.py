"""Fuzz harness for the bundle reader: a `.dkb` through open_bundle -> analyze (images and
PDBs served from the bundle's pages) -> JSON, in-process.

The only exception an input may raise is `DumpError` from `open_bundle` (a one-line
message: damaged, hostile or not a bundle). Anything else, or an input that takes too
long, is a bug.

Mutations are structure-aware, so that most inputs get past the zip's CRCs and the
manifest's checks and reach the PE, unwind and PDB code with hostile pages: a member is
changed (the dump by harness.mutate with its sha256 kept right, an image's or a PDB's
pages by bit flips and boundary words, the manifest by one hostile field) and the zip is
written again; now and then the zip's own bytes are flipped instead.

Drivers, as in harness.py:

* coverage-guided (atheris / libFuzzer, with this mutator as its custom mutator)::

      python tests/fuzz/bundle_harness.py -atheris_runs=100000 -timeout=20 -rss_limit_mb=2048 \\
          /tmp/dumpkit-bundle-fuzz

* random: `python tests/fuzz/bundle_harness.py --random SECONDS [SEED]`, and
  tests/fuzz/test_fuzz_bundle.py (a short smoke campaign under pytest).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import struct
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
if str(HERE.parents[1]) not in sys.path:
    sys.path.insert(0, str(HERE.parents[1]))

from tests.fuzz import harness  # noqa: E402  (the path above first)

# Bundles written on first use from these sample dumps and their images: a small native
# crash, a recursion through static functions whose names only its PDB gives (PDB pages in
# the bundle), the recursion's bundle with only the memory read (format 4: the dump's kept
# pieces, served at their offsets), and the committed NumPy bundle (a Python process).
SEED_DUMPS = ("null_deref.dmp", "pdb_static_cycle.dmp", "pdb_static_fastfail.dmp")
SLIM_SEED_DUMPS = ("recursion_cycle3.dmp",)
COMMITTED_SEEDS = ("python/numpy_object_recursion.dkb",)
SEED_CACHE = Path(tempfile.gettempdir()) / "dumpkit-bundle-fuzz-seeds"


def seed_files() -> List[Path]:
    """The seed bundles, written into SEED_CACHE when missing or written by other dumpkit
    code (a bundle holds the pages one analysis read: another one reads others)."""
    out: List[Path] = []
    code = hashlib.sha256()
    for py in sorted((harness.ROOT / "dumpkit").rglob("*.py")):
        code.update(py.read_bytes())
    folder = SEED_CACHE / code.hexdigest()[:16]
    wanted = [(n, False) for n in SEED_DUMPS] + [(n, True) for n in SLIM_SEED_DUMPS]
    for name, slim in wanted:
        dump = harness.SAMPLES / name
        if not dump.is_file():
            continue
        path = folder / (name[: -len(".dmp")] + (".slim" if slim else "") + ".dkb")
        if not path.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            _write_seed(dump, path, slim)
        out.append(path)
    out += [harness.SAMPLES / n for n in COMMITTED_SEEDS if (harness.SAMPLES / n).is_file()]
    return out


def _write_seed(dump: Path, path: Path, slim: bool = False) -> None:
    from dumpkit.bundle.writer import write_bundle
    from dumpkit.sources.minidump import open_dump

    target = open_dump(str(dump))
    try:
        write_bundle(
            target,
            str(dump),
            str(path),
            image_paths=[str(harness.SAMPLE_BIN)],
            only_used_memory=slim,
            problems=target.soft_errors,
        )
    finally:
        target.close()


def seeds() -> List[bytes]:
    return [p.read_bytes() for p in seed_files()]


def run_one(data: bytes) -> Optional[str]:
    """Open `data` as a bundle, analyse it and render JSON. None when it was refused
    (DumpError, one line), else the JSON report; raises on any bug."""
    from dumpkit.sources.bundle import open_bundle
    from dumpkit.engine import Options, analyze
    from dumpkit.report.json_report import render_json
    from dumpkit.target import DumpError

    path = harness._scratch_file()  # its suffix does not matter: open_bundle is asked directly
    with open(path, "wb") as f:
        f.write(data)
    try:
        target = open_bundle(path)
    except DumpError as e:
        if "\n" in str(e):
            raise harness.Bug(f"DumpError message is not one line: {e!r}") from None
        return None
    try:
        opts = Options(max_frames=20_000, other_thread_max_frames=500, max_other_threads=64, other_frames_budget=5_000)
        js = render_json(analyze(target, opts, problems=target.soft_errors).report, indent=None)
        json.loads(js)
        return js
    finally:
        target.close()


# ----------------------------------------------------------------- mutator
_HOSTILE = (None, -1, 0, 1, 4095, 4096, 1 << 31, 1 << 63, 1 << 70, "0x", "0xffffffffffffffffff", "", [], {}, True)


def _members(data: bytes) -> Optional[Dict[str, bytes]]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return {i.filename: zf.read(i) for i in zf.infolist()[:64] if i.file_size <= 64 << 20}
    except Exception:  # a mutated zip: mutate its bytes instead
        return None


def _zip(members: Dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _flip(data: bytes, rng: random.Random) -> bytes:
    """Bit flips and boundary 32-bit words: what a damaged page of a PE or PDB file holds."""
    if not data:
        return data
    buf = bytearray(data)
    for _ in range(rng.randrange(1, 9)):
        at = rng.randrange(len(buf))
        if rng.random() < 0.5 and at + 4 <= len(buf):
            buf[at : at + 4] = struct.pack("<I", rng.choice(harness.INTERESTING32 + (len(buf),)))
        else:
            buf[at] ^= 1 << rng.randrange(8)
    return bytes(buf)


def _mutate_manifest(raw: bytes, rng: random.Random) -> bytes:
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(doc, dict):
        return raw
    lists = [k for k in ("modules", "pdbs") if isinstance(doc.get(k), list) and doc[k]]
    if lists and rng.random() < 0.8:
        entry = rng.choice(doc[rng.choice(lists)])
        if isinstance(entry, dict) and entry:
            key = rng.choice(sorted(entry))
            if key == "ranges" and isinstance(entry[key], list) and entry[key] and rng.random() < 0.7:
                r = rng.choice(entry[key])
                if isinstance(r, list) and len(r) == 2:
                    r[rng.randrange(2)] = rng.choice([v for v in _HOSTILE if isinstance(v, int)] + [4097, 8191])
            else:
                entry[key] = rng.choice(_HOSTILE)
    else:
        doc[rng.choice(["version", "format", "dump", "pdbs", "modules", "redacted", "packages"])] = rng.choice(_HOSTILE)
    return json.dumps(doc).encode()


def mutate(data: bytes, rng: random.Random) -> bytes:
    members = _members(data)
    if members is None or rng.random() < 0.05:
        return harness.mutate(data, rng)  # the zip's own bytes
    names = sorted(members)
    pages = [n for n in names if n.startswith(("images/", "pdbs/"))]
    kind = rng.random()
    if kind < 0.45 and pages:
        # prefer PDB pages: they are what is new here
        pdbs = [n for n in pages if n.startswith("pdbs/")]
        name = rng.choice(pdbs) if pdbs and rng.random() < 0.6 else rng.choice(pages)
        members[name] = _flip(members[name], rng)
    elif kind < 0.7 and "dump.dmp" in members and "manifest.json" in members:
        dump = harness.mutate(members["dump.dmp"], rng)
        try:  # keep the manifest's size and sha256 right, so the dump is read
            doc = json.loads(members["manifest.json"])
            if doc["dump"].get("kept") is not None and doc.get("version", 0) >= 4:
                # the member is the kept pieces: its length is theirs, the dump's size stays
                n = len(members["dump.dmp"])
                dump = dump[:n] + bytes(max(0, n - len(dump)))
                doc["dump"].update(sha256=hashlib.sha256(dump).hexdigest())
            else:
                doc["dump"].update(size=len(dump), sha256=hashlib.sha256(dump).hexdigest())
            members["manifest.json"] = json.dumps(doc).encode()
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
        members["dump.dmp"] = dump
    elif "manifest.json" in members:
        members["manifest.json"] = _mutate_manifest(members["manifest.json"], rng)
    return _zip(members)


TARGET = harness.FuzzTarget(seeds, lambda data, rng, pool: mutate(data, rng), run_one, ".dkb")


def campaign(seconds: float, seed: int = 0, crash_dir: Optional[str] = None) -> dict:
    """Mutate the seed bundles for `seconds` (harness.campaign's loop); return counts."""
    return harness.campaign(seconds, seed, crash_dir=crash_dir, target=TARGET)


# ----------------------------------------------------------------- atheris driver
def _atheris_main(argv: List[str]) -> None:
    import atheris

    with atheris.instrument_imports(include=["dumpkit", "minidump"]):
        import dumpkit.sources.bundle
        import dumpkit.engine
        import dumpkit.images
        import dumpkit.report.json_report
        import dumpkit.symbols.pdb  # noqa: F401

    harness.seed_corpus(argv, seed_files())
    if not any(a.startswith("-max_len") for a in argv):
        argv = argv + [f"-max_len={8 << 20}"]

    def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
        out = mutate(data, random.Random(seed))
        return out[:max_size]

    def test_one(data: bytes) -> None:
        run_one(data)

    atheris.Setup(argv, test_one, custom_mutator=custom_mutator)
    atheris.Fuzz()


def main(argv: List[str]) -> None:
    if len(argv) >= 2 and argv[1] == "--random":
        seconds = float(argv[2]) if len(argv) > 2 else 60.0
        seed = int(argv[3]) if len(argv) > 3 else int(time.time())
        print(json.dumps(campaign(seconds, seed, crash_dir=str(HERE / "crashes"))))
        return
    _atheris_main(argv)


if __name__ == "__main__":
    main(sys.argv)
