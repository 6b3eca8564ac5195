"""Where the inputs of the tests live, and how to open them: the bundled sample dumps
(sample_dumps/), the real dumps and Windows CPython beside the repository (../shared), the
Python samples and their images, and `run_cli` (dumpkit as a user runs it). The session
fixtures built on these are in tests/conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLES = ROOT / "sample_dumps"


def build_cache(variable: str, folder: str) -> Path:
    """Where a sample family's build.sh keeps what is not committed (interpreters, wheels'
    images): $variable, else `folder` beside the repository, as build.sh defaults."""
    return Path(os.environ.get(variable) or ROOT.parent / folder)


def cpython_git() -> Path:
    """Where `fetch` left bare clones of CPython (deadsnakes+python3.X/repo):
    $DUMPKIT_CPYTHON_GIT, else .mirror beside the repository."""
    return Path(os.environ.get("DUMPKIT_CPYTHON_GIT") or ROOT.parent / ".mirror")


SAMPLE_BIN = SAMPLES / "bin"
REAL_DUMPS = ROOT.parent / "shared" / "real_dumps"


def run_cli(*args, cwd=None, timeout: float = 300, env=None) -> "subprocess.CompletedProcess[str]":
    """`python -m dumpkit ARGS...` in a child, as a user runs it: text output captured.
    UTF-8, what dumpkit writes into a pipe on Windows too (dumpkit/console.py), not the
    ANSI code page Python would read it with there."""
    return subprocess.run(
        [sys.executable, "-m", "dumpkit", *map(str, args)],
        capture_output=True,
        encoding="utf-8",
        errors="backslashreplace",
        timeout=timeout,
        cwd=cwd or ROOT,
        env=env,
    )


def sample_manifest():
    path = SAMPLES / "manifest.json"
    if not path.exists():
        return []
    return json.loads(path.read_text())["dumps"]


def sample_path(name: str) -> Path:
    p = SAMPLES / name
    if not p.exists():
        pytest.skip(f"sample dump {name} not present")
    return p


def real_dump(rel: str) -> Path:
    p = REAL_DUMPS / rel
    if not p.exists():
        pytest.skip(f"../shared/real_dumps/{rel} not present")
    return p


def real_manifest():
    """../shared/real_dumps/manifest.json (one entry per dump), or [] when absent."""
    path = REAL_DUMPS / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else []


def real_dumps():
    if not REAL_DUMPS.is_dir():
        return []
    return sorted(REAL_DUMPS.glob("*/*.dmp"))


def every_dump() -> list:
    """pytest params (path, image paths) of every dump of the repository (with the sample
    images) and of ../shared (without): for a promise that holds on all of them. Those in
    sample_dumps' sub-folders (Python processes, bundles, the million-frame recursions:
    seconds each) are the slow tier's."""
    found = sorted(
        p for p in SAMPLES.rglob("*") if p.name.endswith((".dmp", ".dmp.xz", ".dkb")) and "bin" not in p.parts
    )
    params = []
    for p in found:
        marks = [] if p.parent == SAMPLES and p.suffix == ".dmp" else [pytest.mark.slow]
        params.append(pytest.param(p, (str(SAMPLE_BIN),), id=str(p.relative_to(SAMPLES)), marks=marks))
    return params + [pytest.param(p, (), id=f"real/{p.parent.name}/{p.name}") for p in real_dumps()]


# --- walked crashing threads of the sample dumps (tests/analysis: recursion, frame sizes,
# --- stack budget). One walk per dump per session.
class CrashWalk:
    """A sample dump opened and its crashing thread walked from the exception context."""

    def __init__(self, target, walker, thread, walk, facts):
        self.target = target
        self.walker = walker
        self.thread = thread
        self.walk = walk
        self.frames = walk.frames
        self.exception = target.exception
        self.facts = facts  # the dump's manifest.json entry ({} when there is no manifest)

    def module_base(self, name):
        low = name.lower()
        for m in self.target.modules:
            if m.name.lower() == low:
                return m.base
        return None


def sample_facts(name: str) -> dict:
    """The manifest.json entry of a sample dump; skips when the manifest or entry is missing."""
    for d in sample_manifest():
        if d.get("file") == name:
            return d
    pytest.skip(f"sample_dumps/manifest.json has no entry for {name}")


# --- compressed sample dumps: decompressed once per session into a temporary folder
_PLAIN: dict = {}


def sparse_dump(src: Path, out: Path, gib: int, ranges: int = 4096) -> dict:
    """bench/make_sparse_dump.py's transformation (the one the benchmarks measure): the real
    dump byte for byte, plus a memory list of `gib` GiB in `ranges` ranges at 1 TiB up,
    where the process had nothing, left as a hole in the file. What it made, as that
    script says it; skips when the file system does not keep holes."""
    if not hasattr(os.stat_result, "st_blocks"):
        pytest.skip("the holes are measured by st_blocks, which os.stat has only on POSIX")
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_sparse_dump", ROOT / "bench" / "make_sparse_dump.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    info = module.make(str(src), str(out), gib, ranges)
    if info["disk_bytes"] > src.stat().st_size + (64 << 20):
        pytest.skip(f"{out.parent} does not keep holes in files ({info['disk_bytes']:,} bytes on disk)")
    return info


def plain_dump(path: Path, tmp_root: Path) -> Path:
    """`path` itself, or for NAME.dmp.xz a decompressed copy under `tmp_root` (made once
    per session): dumpkit reads plain dumps, the big samples are committed xz'd."""
    if path.suffix != ".xz":
        return path
    if path not in _PLAIN:
        import lzma
        import shutil

        out = tmp_root / path.parent.name / path.stem
        out.parent.mkdir(parents=True, exist_ok=True)
        with lzma.open(path) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        _PLAIN[path] = out
    return _PLAIN[path]


# --- the Python sample dumps (sample_dumps/python): real CPython 3.8 processes
PY_SAMPLES = SAMPLES / "python"
WINPYTHON = ROOT.parent / "shared" / "winpython" / "cpython-3.8-amd64"


def python_manifest():
    path = PY_SAMPLES / "manifest.json"
    return json.loads(path.read_text())["dumps"] if path.exists() else []


def python_bundle(facts: dict):
    """NAME.dkb for a Python sample whose images are too big to commit (NumPy, TensorFlow):
    the dump and the image pages its analysis reads, committed instead of NAME.dmp.xz
    (sample_dumps/python/build.sh makes it). None when there is none."""
    name = facts["file"].split(".dmp", 1)[0] + ".dkb"
    path = PY_SAMPLES / name
    return path if path.exists() else None


def python_dump(facts: dict) -> Path:
    """What to analyse for a Python sample: the dump its manifest entry names, else its
    bundle; skips when neither is here."""
    path = PY_SAMPLES / facts["file"]
    if path.exists():
        return path
    bundle = python_bundle(facts)
    if bundle is None:
        pytest.skip(f"{facts['file']} not present")
    return bundle


def open_any(path, problems=None) -> "object":
    """A Target for a dump or a bundle (.dkb), as the CLI opens them; what reading meets
    goes to `problems` (a new collector when None)."""
    from dumpkit.sources.bundle import open_bundle
    from dumpkit.sources.minidump import open_dump

    return open_bundle(str(path), problems) if str(path).endswith(".dkb") else open_dump(str(path), problems)


def analyse_file(path, options=None):
    """The Report of the dump or bundle at `path` as `dumpkit analyze` makes it: one run,
    whose one problems collector the dump is opened into and the engine is handed."""
    from dumpkit.engine import analyze
    from dumpkit.problems import Problems

    problems = Problems()
    return analyze(open_any(path, problems), options, problems=problems).report


def python_images(facts: dict, bundled: bool = True) -> list:
    """Folders holding the images a Python sample dump needs, or skip: the genuine CPython
    in ../shared/winpython serves python38.dll; NumPy's and TensorFlow's images come from
    the folder named by DUMPKIT_PYDUMPS_IMAGES (build.sh's cache) when set. A sample
    committed as a bundle needs none (when `bundled`: the caller analyses the bundle)."""
    if bundled and not (PY_SAMPLES / facts["file"]).exists() and python_bundle(facts) is not None:
        return []
    folders = []
    extra = os.environ.get("DUMPKIT_PYDUMPS_IMAGES")
    if extra and Path(extra).is_dir():
        folders.append(str(extra))
    if WINPYTHON.is_dir():
        folders.append(str(WINPYTHON))
    needs_extension = bool(facts.get("extension"))
    if not folders or (needs_extension and not extra):
        pytest.skip(f"images for {facts['file']} not here (../shared/winpython, DUMPKIT_PYDUMPS_IMAGES)")
    return folders


def interpreter_exports(target, image_folders: Sequence[str]):
    """(exports, interpreter) of the dump's python3X.dll: its export table from the dump's
    own memory (a full dump holds the image), else from an image in `image_folders`; the
    test skips where neither has it."""
    from dumpkit.cpython import export_lookup, find_interpreter
    from dumpkit.images import ImageLocator
    from dumpkit.pe import PEError
    from dumpkit.pe.image import PEImage
    from dumpkit.target import MemoryNotInDump

    interp = find_interpreter(target.modules)
    assert interp is not None, "the dump has no python3X.dll"
    base = interp.module.base
    try:
        return export_lookup(base, PEImage.from_memory(target.read, base).exports()), interp
    except (PEError, MemoryNotInDump):
        found = ImageLocator(list(image_folders), use_recorded_path=False).locate(interp.module, None)
        if found is None:
            pytest.skip(f"no image of {interp.module.name} to read its exports from")
        return export_lookup(base, found.image.exports()), interp
