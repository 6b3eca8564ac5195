"""One dump, analysed into a DumpRecord: the unit of work a worker process or a Dask
worker runs. Nothing escapes it: a dump that cannot be read, crashes the analysis or runs
past the time limit comes back as a record with its error."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from dumpkit import __version__
from dumpkit.limits import MAX_FRAMES, OVERSIZED_FRAME
from dumpkit.analysis.facts import nothing_to_analyse
from dumpkit.analysis.model import Report
from dumpkit.analysis.signature import RULES, python_recursion
from dumpkit.analysis.waits import nameless_dlls
from dumpkit.gcpause import paused
from dumpkit.engine import Options, analyze
from dumpkit.images.fetch import fetch_requested
from dumpkit.images.paths import RememberingProbe
from dumpkit.problems import Problems
from dumpkit.sources.minidump import open_dump, open_dump_bytes, open_dump_copy
from dumpkit.sources.packed import IN_MEMORY, packing_of, plain_head, temporary_name, unpack
from dumpkit.target import DumpError, Module
from dumpkit.triage.memory import applied_cap, describe
from dumpkit.triage.record import ANALYSED, FAILED, RECORD_VERSION, TIMED_OUT, DumpRecord, Status
from dumpkit.triage.watchdog import Watchdog
from dumpkit.records import record

_CHUNK = 1 << 20
# A plain dump up to this size is read once, hashed and parsed from memory: a fleet's small
# dumps cost a second read and a mapping (its page faults and unmapping) otherwise.
READ_WHOLE = 8 << 20


@record
class Job:
    """What every dump of one triage is analysed with. `report_writer` is a module-level
    function handed in by the front door (picklable by reference): how to render a
    per-dump report, which lives above this package. A bundle is opened here: it is a
    source (`sources.bundle`), below the triage."""

    image_paths: Tuple[str, ...] = ()
    symbol_paths: Tuple[str, ...] = ()
    use_recorded_paths: bool = True
    max_frames: int = MAX_FRAMES
    oversized_threshold: int = OVERSIZED_FRAME
    timeout: Optional[float] = None  # seconds per dump
    report_dir: Optional[str] = None  # write a per-dump report here (with report_writer)
    report_writer: Optional[Callable[[Report], str]] = None
    report_suffix: str = ".html"
    # --fetch-images: each worker fetches into the shared images cache (DUMPKIT_CACHE); a
    # worker started with DUMPKIT_FETCH_IMAGES=1 fetches too (the engine reads it)
    fetch_images: bool = False
    # how many times its packed size a packed dump may unpack to (None: DUMPKIT_MAX_UNPACK_RATIO
    # where it is analysed); the front door reads it once, so every worker refuses alike
    unpack_ratio: Optional[int] = None

    def answer_key(self) -> str:
        """What, besides the dump's bytes, changes the record: the cache's key includes it."""
        parts = (
            __version__,
            str(RULES),
            f"record {RECORD_VERSION}",  # a cached record of another shape lacks fields
            "|".join(self.image_paths),
            "|".join(self.symbol_paths),
            str(self.use_recorded_paths),
            str(self.max_frames),
            str(self.oversized_threshold),
            str(self.report_writer is not None),
            f"fetch {fetch_requested(self.fetch_images)}",  # fetched images change the walk
        )
        return "\n".join(parts)


T = TypeVar("T")


class _TimedOut(BaseException):
    """Raised into the analysis when its time is up. A BaseException, as KeyboardInterrupt
    is: the engine's `except Exception` (a damaged part of a dump costs that part only)
    must not swallow it and carry on."""


def content_hash(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _raise_in(thread_id: int, exc: Optional[type]) -> None:
    """Have CPython raise `exc` in the thread at its next bytecode; None withdraws one
    not yet raised. (`PyThreadState_SetAsyncExc`: the interpreter's own way to stop a
    thread, on every platform; the id of an object is its address in CPython.)"""
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), None if exc is None else ctypes.c_void_p(id(exc))
    )


_WATCHDOG = Watchdog(lambda thread_id: _raise_in(thread_id, _TimedOut))


def _within(seconds: Optional[float], work: Callable[[], T]) -> T:
    """work(), or _TimedOut after `seconds`, raised in this very thread: the analysis
    stops where it is (between two bytecodes: a native call under way ends first) and
    unwinds through its own cleanup, so the dump is closed and an unpacked copy deleted
    before the next dump starts. The same on Windows, in a worker process, in a Dask
    worker's thread and inline, with no signal and no thread left running once the
    process's analyses are done (triage/watchdog.py)."""
    if seconds is None or seconds <= 0:
        return work()
    me = threading.get_ident()
    token = _WATCHDOG.arm(seconds, me)
    fired = False
    try:
        value = work()
    finally:
        fired = _WATCHDOG.disarm(token)
        if fired:
            _raise_in(me, None)  # fired as work() returned: not raised yet, withdrawn
    if fired:
        raise _TimedOut()
    return value


_PROBE_SECONDS = 60.0  # how long a process takes the answers of one probe as true
_probe_kept: List[Tuple[float, RememberingProbe]] = []


def _probe() -> RememberingProbe:
    """The file probe the dumps a process analyses share: the same program's modules
    recorded at the same paths in every dump of a fleet are looked for once. Its answers
    depend on nothing a job sets (which files are where), and are kept a minute at most: a
    Dask worker serves triage after triage."""
    now = time.monotonic()
    if not _probe_kept or now - _probe_kept[0][0] > _PROBE_SECONDS:
        _probe_kept[:] = [(now, RememberingProbe())]
    return _probe_kept[0][1]


MAX_MISSING = 8  # modules a record names as missing their images


def _missing_images(report: Report) -> Tuple[str, ...]:
    """The crashing stack's modules whose images were not found; for a snapshot, the system
    DLLs its threads stopped in whose images would name their waits (waits.thread_wait)."""
    if report.images is not None and report.images.missing:
        return tuple(m.module for m in report.images.missing[:MAX_MISSING])
    if report.crash is not None:
        return ()
    return nameless_dlls(report.waits)[:MAX_MISSING]


def _modules_named(report: Report, modules: Sequence[Module]) -> Tuple[str, ...]:
    """The modules the signature's frames name, with their file versions when known
    (`modules`: the dump's; of two of one name, the one at the higher base)."""
    if report.signature is None:
        return ()
    versions = {m.name.lower(): m.file_version for m in sorted(modules, key=lambda m: m.base)}
    names = []
    for element in report.signature.frames:
        inner = element[len("recursion(") : -1] if element.startswith("recursion(") else element
        for member in inner.split(" > "):
            for sep in ("!", "+0x"):
                if sep in member:
                    name = member.split(sep, 1)[0]
                    if name not in names:
                        names.append(name)
                    break
    return tuple(f"{n} {versions[n]}" if versions.get(n) else n for n in names)


def _write_report(job: Job, report: Report, path: str, sha: str) -> Optional[str]:
    """The per-dump report, named by content (copies of one dump share it), written
    atomically; its name relative to the output folder."""
    if job.report_dir is None or job.report_writer is None:
        return None
    base = os.path.basename(path)
    name = f"{sha[:12]}-{''.join(c if c.isalnum() or c in '._-' else '_' for c in base)[:80]}{job.report_suffix}"
    os.makedirs(job.report_dir, exist_ok=True)
    final = os.path.join(job.report_dir, name)
    fd, tmp = tempfile.mkstemp(prefix=".dumpkit-", dir=job.report_dir)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(job.report_writer(report))
    os.replace(tmp, final)
    return os.path.join(os.path.basename(job.report_dir), name)


def _open(job: Job, path: str, opened: Dict[str, Any], problems: Problems, data: Optional[bytes] = None) -> Any:
    """The dump as a Target, opened into `problems`. What must be undone is put in `opened` as soon as it exists
    (the private copy of a compressed dump under "tmp", by name, before it is created),
    for the caller to undo whenever the work stops. `data`: the whole file, when it was read
    already."""
    named_bundle = path.lower().endswith(".dkb")
    if data is not None and not named_bundle and plain_head(data[:8]):
        return open_dump_bytes(data, path, problems=problems)
    packing = None if named_bundle else packing_of(path)
    if named_bundle or (packing is not None and packing.bundle):
        from dumpkit.sources.bundle import open_bundle  # a bundle's reader, only for bundles

        return open_bundle(path, problems)
    if packing is None:
        return open_dump(path, problems)
    # unpacked as `analyze` unpacks it: in memory, or past IN_MEMORY into a private copy
    opened["tmp"] = tmp = temporary_name()
    data = unpack(path, packing, tmp, IN_MEMORY, job.unpack_ratio)
    if data is not None:
        return open_dump_bytes(data, path, problems=problems)
    return open_dump_copy(tmp, path, problems=problems)


def analyse_one(job: Job, path: str, sha: Optional[str] = None) -> DumpRecord:
    """The record of the dump at `path` (`sha`: its content hash, when the caller has it),
    made with the cyclic collector paused: it makes no cycles (gcpause.py)."""
    with paused():
        return _analyse_one(job, path, sha)


def _analyse_one(job: Job, path: str, sha: Optional[str]) -> DumpRecord:
    started = time.monotonic()
    whole: Optional[bytes] = None  # the file's bytes, when it is small enough to read once
    try:
        size = os.path.getsize(path)
        if size <= READ_WHOLE:
            with open(path, "rb") as f:
                whole = f.read()
            size = len(whole)
            sha = sha or hashlib.sha256(whole).hexdigest()
        else:
            sha = sha or content_hash(path)
    except OSError as e:
        return DumpRecord(path, 0, "", FAILED, error=f"cannot read: {e.strerror or e}")

    def failed(status: Status, message: str) -> DumpRecord:
        return DumpRecord(path, size, sha or "", status, error=message, seconds=time.monotonic() - started)

    opened: Dict[str, Any] = {}  # the Target and the private copy to delete, once opened

    def work() -> Tuple[Report, Sequence[Module], Optional[str]]:
        problems = Problems()  # the dump's run: what reading it meets, then the analysis
        opened["target"] = _open(job, path, opened, problems, whole)
        why = nothing_to_analyse(opened["target"], problems)
        if why is not None:  # what every command rejects as unusable input
            raise DumpError(why)
        full = job.report_writer is not None and job.report_dir is not None
        options = Options(
            image_paths=job.image_paths,
            symbol_paths=job.symbol_paths,
            use_recorded_paths=job.use_recorded_paths,
            max_frames=job.max_frames,
            oversized_threshold=job.oversized_threshold,
            fetch_images=job.fetch_images,
            # a record needs the crashing thread's walk (and the other threads' it is checked
            # against, bounded by the walker); a per-dump report shows every thread
            all_threads=full,
            for_record=not full,
            file_probe=_probe(),
        )
        report = analyze(opened["target"], options, problems=problems).report
        return report, opened["target"].modules, _write_report(job, report, path, sha or "")

    try:
        report, modules, written = _within(job.timeout, work)
    except _TimedOut:
        return failed(TIMED_OUT, f"analysis took longer than {job.timeout:g} s")
    except DumpError as e:
        return failed(FAILED, str(e))
    except MemoryError:
        cap = applied_cap()
        if cap is not None:
            return failed(FAILED, f"needed more memory than a worker may take (--memory-cap {describe(cap)})")
        return failed(FAILED, "not enough memory")
    except Exception as e:  # a bug in dumpkit must not stop a triage of thousands
        return failed(FAILED, f"internal error: {type(e).__name__}: {e}")
    finally:
        if opened.get("target") is not None:
            opened["target"].close()
        if opened.get("tmp") is not None:
            try:
                os.unlink(opened["tmp"])
            except OSError:  # never created, or (Windows) still open: nothing more to do
                pass
    sig = report.signature
    return DumpRecord(
        path=path,
        size=size,
        sha256=sha,
        status=ANALYSED,
        written=report.dump.timestamp or None,
        signature=sig.text if sig else None,
        kind=sig.kind if sig else None,
        rules=sig.rules if sig else RULES,
        verdict=report.verdict.kind,
        headline=report.verdict.headline,
        confidence=report.verdict.confidence,
        modules=_modules_named(report, modules),
        python_recursion=python_recursion(report.python, report.crash.thread_id if report.crash else None),
        missing_images=_missing_images(report),
        memory_limits=report.environment.memory.limits_reached if report.environment.memory else (),
        problems=len(report.soft_errors),
        seconds=round(time.monotonic() - started, 3),
        report=written,
    )
