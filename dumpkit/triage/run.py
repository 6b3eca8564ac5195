"""Running a triage: cache look-ups, then the remaining dumps in this process, in a pool of
worker processes, or on a Dask cluster. Records come back as each dump finishes, so an
interrupted run still has every finished one."""

from __future__ import annotations

import gc
import os
import signal
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from collections import deque
from itertools import chain, islice
from typing import Deque, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from dumpkit.triage.analyse import Job, analyse_one, content_hash
from dumpkit.triage.cache import Cache, cache_key
from dumpkit.triage.forkserver import worker_context
from dumpkit.triage.memory import apply_cap, private_bytes
from dumpkit.triage.record import FAILED, DumpRecord

# (path, content hash or None, cache key or None)
Item = Tuple[str, Optional[str], Optional[str]]

# Worker processes are replaced (a new pool) when one reports that its memory has grown by
# REPLACE_GROWTH since its first batch, so memory an analysis leaves behind (fragmentation,
# caches) cannot pile up over thousands of dumps; and in any case after TASKS_PER_CHILD
# dumps each. Replacing them costs: the new workers start cold (their memos, the pages they
# share with the fork server), and the old ones' last batches end together. Every 256 dumps
# that was 14% of a 2,000-dump run's CPU, while a worker's memory stayed flat at ~40 MiB
# over 3,000 real dumps (~60 MiB over 320 of the 41-187-thread public crashes).
TASKS_PER_CHILD = 8192
REPLACE_GROWTH = 256 << 20
# Small dumps go to a worker together, up to BATCH_DUMPS of them or BATCH_BYTES of dump:
# handing over one task (pickling, the executor's queues, waking both sides) costs the
# parent and the worker about what a small dump's analysis costs, and the parent shares
# the cores with the workers. A big dump goes alone.
BATCH_DUMPS = 16
BATCH_BYTES = 4 << 20
# Tasks handed to the pool per worker: one it runs and one waiting, so no worker idles
# between tasks; few, so Ctrl-C loses little work and a million-dump run holds few futures.
AHEAD = 2


def _worker_setup(memory_cap: Optional[int]) -> None:
    """Ctrl-C is the parent's to handle: it stops handing out dumps and writes what
    finished; a worker dying of it mid-dump would break the pool instead. The memory cap
    bounds what one dump's analysis can take (triage/memory.py). The analysis the worker
    imported (~25,000 objects that live as long as it) is left out of the cyclic collector's
    passes: a dump's analysis makes no cycles (tests/triage/test_no_cycles.py), and full
    collections walked the imports for nothing."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()
    apply_cap(memory_cap)


def _failed(item: Item, message: str) -> DumpRecord:
    path, sha, _ = item
    try:
        size = os.path.getsize(path)
    except OSError:
        size = 0
    return DumpRecord(path, size, sha or "", FAILED, error=message)


def _inline(job: Job, items: Iterable[Item]) -> Iterator[Tuple[Item, DumpRecord]]:
    for item in items:
        yield item, analyse_one(job, item[0], item[1])


def _pool(jobs: int, memory_cap: Optional[int]) -> ProcessPoolExecutor:
    """Workers for TASKS_PER_CHILD * jobs dumps (_processes then starts another pool), forked
    from the fork server where there is one (triage/forkserver.py)."""
    return ProcessPoolExecutor(
        max_workers=jobs, mp_context=worker_context(), initializer=_worker_setup, initargs=(memory_cap,)
    )


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Interrupted: end the workers now rather than after the dumps they are on (which can
    take minutes each). The executor has no public way before Python 3.14."""
    terminate = getattr(pool, "terminate_workers", None)
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            process.terminate()
        except (OSError, AttributeError):
            pass


def _discard(pool: ProcessPoolExecutor) -> None:
    """Let a broken pool go. On Windows, CPython 3.8's executor closes the broken pool's
    queues from its own thread too, and closing them again here can meet a handle already
    closed (OSError, WinError 6: one run in three of tests/triage's dying worker under Wine):
    nothing is left to release then."""
    try:
        pool.shutdown(wait=False)
    except OSError:
        pass


def analyse_batch(job: Job, items: Sequence[Item]) -> List[DumpRecord]:
    """A worker's task: the records of a few dumps, in order."""
    return [analyse_one(job, path, sha) for path, sha, _ in items]


def _analyse_and_weigh(job: Job, items: Sequence[Item]) -> Tuple[List[DumpRecord], Optional[int]]:
    """A pool worker's task: the batch's records, and the worker's memory after it."""
    return analyse_batch(job, items), private_bytes()


def _size(item: Item) -> int:
    try:
        return os.path.getsize(item[0])
    except OSError:
        return 0  # analyse_one says why it cannot be read


class _Pending:
    """The dumps still to hand out, in order, taken from `items` as they are needed: with
    --cache, each is hashed and looked up only then, so the workers start on the first
    misses while the parent goes on looking up the rest (a cold cache's run waited for
    every dump to be hashed before the first was analysed)."""

    def __init__(self, items: Iterable[Item]):
        self._source: Optional[Iterator[Item]] = iter(items)
        self._ready: Deque[Item] = deque()

    def _fill(self, n: int) -> None:
        while self._source is not None and len(self._ready) < n:
            item = next(self._source, None)
            if item is None:
                self._source = None
            else:
                self._ready.append(item)

    def __bool__(self) -> bool:
        self._fill(1)
        return bool(self._ready)

    def left(self, enough: int) -> int:
        """How many are left, counted up to `enough` (looking up no more than that)."""
        self._fill(enough)
        return len(self._ready)

    def take(self) -> Item:
        self._fill(1)
        return self._ready.popleft()

    def peek(self) -> Item:
        self._fill(1)
        return self._ready[0]


def _next_batch(pending: _Pending, workers: int, room: int) -> List[Item]:
    """The next task's dumps, at most `room`: small ones together, a big one alone. Fewer as
    the dumps run out, so the workers finish together rather than one waiting on the other's
    batch."""
    share = workers * AHEAD
    limit = max(1, min(BATCH_DUMPS, room, pending.left(BATCH_DUMPS * share) // share))
    batch = [pending.take()]
    size = _size(batch[0])
    while pending and len(batch) < limit:
        size += _size(pending.peek())
        if size > BATCH_BYTES:
            break
        batch.append(pending.take())
    return batch


def _processes(
    job: Job, items: Iterable[Item], jobs: int, memory_cap: Optional[int]
) -> Iterator[Tuple[Item, DumpRecord]]:
    """Dumps handed to a pool of workers in small batches. A worker that dies (killed, out
    of memory, a crash in a native library) breaks its pool: every dump the pool held goes
    back in the queue as a suspect and is tried again alone in a fresh pool; a suspect that
    is in flight at a second break is the likely cause and gets an error record."""
    queue = _Pending(items)
    retry: List[Item] = []  # suspects: in flight when a pool broke, tried again alone
    strikes: Dict[Item, int] = {}  # suspect -> pools it was in when they broke
    running: Dict[Future, List[Item]] = {}
    unsent: List[Item] = []  # handed to a pool found broken at the handing
    pool = _pool(jobs, memory_cap)
    given = 0  # dumps handed to this pool
    share = jobs * TASKS_PER_CHILD
    grown_from: Optional[int] = None  # the least memory a worker of this pool reported
    growth = REPLACE_GROWTH if not memory_cap else min(REPLACE_GROWTH, memory_cap // 4)

    def give(batch: List[Item]) -> None:
        nonlocal given
        given += len(batch)
        try:
            running[pool.submit(_analyse_and_weigh, job, batch)] = batch
        except BrokenProcessPool:
            unsent.extend(batch)

    finished = False
    try:
        while queue or retry or running:
            if given >= share and not running:
                # The pool has done its share: its workers go, with whatever memory the
                # analyses left behind, and a new pool goes on. (Not the executor's
                # max_tasks_per_child: in CPython 3.11 a worker that leaves while a result
                # is on its way is not replaced, and a run ends waiting on no workers.)
                pool.shutdown(wait=True)
                pool, given, grown_from = _pool(jobs, memory_cap), 0, None
            # one suspect in flight at a time, so a second break names it
            if retry and given < share and not any(batch[0] in strikes for batch in running.values()):
                give([retry.pop()])
            while queue and len(running) < jobs * AHEAD and given < share and not unsent:
                give(_next_batch(queue, jobs, share - given))
            done, _ = wait(list(running), return_when=FIRST_COMPLETED) if running else ((), ())
            broken = bool(unsent)
            for future in done:
                batch = running.pop(future)
                try:
                    records, weight = future.result()
                    if weight is not None:
                        grown_from = weight if grown_from is None else min(grown_from, weight)
                        if weight - grown_from > growth:
                            given = share  # no more for this pool: replaced once its batches are in
                except BrokenProcessPool:
                    broken = True
                    running[future] = batch  # handled with the rest of the pool below
                    continue
                except Exception as e:  # the records could not come back (pickling, ...)
                    records = [_failed(item, f"internal error: {type(e).__name__}: {e}") for item in batch]
                yield from zip(batch, records)
            if broken:
                held = unsent + [item for batch in running.values() for item in batch]
                running.clear()
                unsent.clear()
                _discard(pool)
                pool, given, grown_from = _pool(jobs, memory_cap), 0, None
                for item in held:
                    strikes[item] = strikes.get(item, 0) + 1
                    if strikes[item] >= 2:
                        yield item, _failed(item, "the worker process analysing it died")
                    else:
                        retry.append(item)
        finished = True
    finally:
        for future in running:
            future.cancel()
        if not finished:
            _stop_workers(pool)
        # at the end the workers are idle: wait for them to exit
        pool.shutdown(wait=finished)


def _dask(job: Job, items: Sequence[Item], address: str) -> Iterator[Tuple[Item, DumpRecord]]:
    """The same work as tasks on an existing Dask cluster. Workers open the dumps by the
    paths given here (and write per-dump reports to the output folder), so both must be
    on storage the workers see under the same names."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise RuntimeError("--scheduler needs Dask: pip install 'dumpkit[triage-dask]'") from None
    client = Client(address)
    run_id = uuid.uuid4().hex[:12]  # keys unique per run: clusters are shared
    try:
        futures = {
            client.submit(analyse_one, job, item[0], item[1], pure=False, key=f"dumpkit-triage-{run_id}-{i}"): item
            for i, item in enumerate(items)
        }
        try:
            for future in as_completed(list(futures)):
                item = futures.pop(future)
                try:
                    record = future.result()
                except Exception as e:  # the worker died or the task could not run
                    record = _failed(item, f"Dask task failed: {type(e).__name__}: {e}")
                # let the cluster forget the result: a worker holds every result some
                # client still refers to, and a soak of 10,000 dumps would keep them all
                future.release()
                yield item, record
        finally:
            client.cancel(list(futures))
    finally:
        client.close()


def _looked_up(paths: Sequence[str], job: Job, cache: Optional[Cache], hits: List[DumpRecord]) -> Iterator[Item]:
    """The dumps to analyse, in order: with a cache, each hashed and looked up as it is
    asked for, a hit's record added to `hits` instead."""
    for path in paths:
        if cache is None:
            yield path, None, None
            continue
        try:
            sha = content_hash(path)
        except OSError:
            yield path, None, None  # analyse_one reports why it cannot be read
            continue
        key = cache_key(sha, job)
        hit = cache.get(key, path, job.report_dir)
        if hit is not None:
            hits.append(hit)
        else:
            yield path, sha, key


def run(
    paths: Sequence[str],
    job: Job,
    jobs: int = 1,
    cache: Optional[Cache] = None,
    scheduler: Optional[str] = None,
    memory_cap: Optional[int] = None,
) -> Iterator[DumpRecord]:
    """Every dump's record: with a cache, hits as they are found while the misses are
    analysed, else in the order analyses finish. `memory_cap`: bytes each worker process may
    take (process workers only)."""
    hits: List[DumpRecord] = []
    todo = _looked_up(paths, job, cache, hits)
    # looked up until there is one dump to analyse per worker, or none is left: no more
    # workers than dumps, and none for a run the cache answers whole
    first = list(islice(todo, max(2, jobs)))
    yield from _drained(hits)
    results: Iterator[Tuple[Item, DumpRecord]]
    if scheduler:
        results = _dask(job, first + list(todo), scheduler)
    elif jobs <= 1 or len(first) <= 1:
        results = _inline(job, chain(first, todo))
    else:
        results = _processes(job, chain(first, todo), min(jobs, len(first)), memory_cap)
    try:
        for (_path, _sha, entry), record in results:
            yield from _drained(hits)
            if cache is not None and entry is not None:
                cache.put(entry, record, job.report_dir)
            yield record
        yield from _drained(hits)
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()


def _drained(records: List[DumpRecord]) -> List[DumpRecord]:
    """The records in `records`, which is emptied."""
    out = records[:]
    records.clear()
    return out
