"""What `triage --memory-cap` does to a worker process on Windows, asked of real workers:
run by the Windows lane as `python.exe -m tests.windows_lane.memory_cap_probe CAP_MIB`.

Starts triage's own pool (dumpkit.triage.run._pool: the worker initializer, which calls
memory.apply_cap) with two workers and asks each, in a task, what it knows: the job it put
itself in (is this process in it, the limit QueryInformationJobObject reads back), whether
the cap counts as applied, and whether it can allocate twice the cap. Prints one JSON line.

Python 3.8 code (the lane's interpreter)."""

import json
import os
import sys

from dumpkit.triage.run import _pool


def in_worker(cap):
    from dumpkit.triage import memory, winjob

    job = memory.job()
    out = {"pid": os.getpid(), "applied": memory.applied_cap(), "job": None}
    if job is not None:
        out["job"] = {
            "in_job": winjob.in_job(job.handle),
            "cap": job.cap,
            "flags_read_back": job.flags_read_back,
            "limit_read_back": job.limit_read_back,
            "confirmed": job.confirmed,
        }
    try:
        block = bytearray(2 * cap)  # zeroed: committed on Windows
        block[:: 1 << 12] = b"\1" * len(range(0, len(block), 1 << 12))  # and touched
        out["allocated_twice_the_cap"] = True
        del block
    except MemoryError:
        out["allocated_twice_the_cap"] = False
    return out


def main():
    cap = int(sys.argv[1]) << 20
    pool = _pool(2, cap)
    try:
        answers = [pool.submit(in_worker, cap) for _ in range(2)]
        workers = [a.result(timeout=120) for a in answers]
    finally:
        pool.shutdown()
    from dumpkit.triage import memory

    print(json.dumps({"parent_job": memory.job() is not None, "workers": workers}))


if __name__ == "__main__":
    main()
