"""A thread waiting on a queue nobody feeds.

A job runner starts a "consumer" thread that takes jobs from a queue.Queue (`jobs.get()`,
no timeout) and a "producer" that should fill it, but the producer fails before it puts
anything (its error is caught and logged, and it ends). The main thread joins the consumer.
The consumer waits for good inside Queue.get, in Condition.wait, on a waiter lock that only
a put() would release; the main thread waits in join() for the consumer.

Once both are stuck, a short-lived thread ("marker") prints the MARKER line (the ground
truth): every thread's native id, name, PyThreadState address and Python stack
(sys._current_frames()), what it waits on and who could end the wait: the queue, its
Condition, the waiter lock the consumer sleeps on and the queue's mutex, by address
(id()). Then it ends; the process stays hung until it is killed.
"""

import ctypes
import json
import os
import queue
import sys
import threading
import time
import traceback

jobs = queue.Queue()
tstates = {}  # thread name -> its PyThreadState address, as the thread itself gets it
ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p


def note_thread():
    tstates[threading.current_thread().name] = ctypes.pythonapi.PyThreadState_Get()


def run_job(job):
    print("ran", job)


def consume():
    note_thread()
    while True:
        job = jobs.get()  # waits here: nobody puts anything
        if job is None:
            return
        run_job(job)


def list_jobs(folder):
    return sorted(os.listdir(folder))


def produce():
    try:
        for job in list_jobs(r"C:\jobs\incoming"):  # no such folder
            jobs.put(job)
        jobs.put(None)
    except OSError as e:
        print("producer failed:", e, flush=True)  # and the None that would end the consumer never comes


# ----------------------------------------------------------------------------- the MARKER
def python_threads(exclude):
    by_ident = {t.ident: t for t in threading.enumerate()}
    out = {}
    for ident, frame in sys._current_frames().items():
        thread = by_ident.get(ident)
        if thread is None or thread.name in exclude:
            continue
        out[thread.name] = {
            "name": thread.name,
            "native_id": thread.native_id,
            "ident": ident,
            "daemon": thread.daemon,
            "tstate": tstates.get(thread.name),
            "frames": [[f.name, f.filename, f.lineno] for f in traceback.extract_stack(frame)],
        }
    return out


def waiting(thread_name, function):
    """Whether thread `thread_name` is inside `function` now."""
    thread = next(t for t in threading.enumerate() if t.name == thread_name)
    frame = sys._current_frames().get(thread.ident)
    return frame is not None and function in [f.name for f in traceback.extract_stack(frame)]


def tell(consumer):
    deadline = time.monotonic() + 30
    while not (waiting("consumer", "wait") and waiting("MainThread", "join")) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)
    threads = python_threads(exclude={"marker"})
    waiter = jobs.not_empty._waiters[0] if jobs.not_empty._waiters else None
    threads["consumer"]["waits_on"] = {
        "kind": "queue",
        "object": "jobs",
        "type": "queue.Queue",
        "address": id(jobs),
        "qsize": jobs.qsize(),
        "condition": id(jobs.not_empty),
        "condition_lock": id(jobs.mutex),
        "condition_lock_repr": repr(jobs.mutex),
        "waiter_lock": None if waiter is None else id(waiter),
        "waiter_lock_repr": repr(waiter),
        "waiter_lock_bytes": None if waiter is None else ctypes.string_at(id(waiter), 48).hex(),
        "waiters": len(jobs.not_empty._waiters),
        "held_by": None,
        "released_by": "a put() on jobs (nobody makes one: the producer failed)",
    }
    threads["consumer"]["holds"] = []
    lock = getattr(consumer, "_tstate_lock", None)
    handle = getattr(consumer, "_handle", None)
    threads["MainThread"]["waits_on"] = {
        "kind": "join",
        "thread": "consumer",
        "tstate_lock": None if lock is None else id(lock),
        "tstate_lock_repr": None if lock is None else repr(lock),
        "handle": None if handle is None else id(handle),
        "handle_type": None if handle is None else type(handle).__qualname__,
        "held_by": "consumer",
    }
    threads["MainThread"]["holds"] = []
    facts = {
        "scenario": "queue_wait",
        "python": sys.version,
        "executable": sys.executable,
        "pid": os.getpid(),
        "switch_interval": sys.getswitchinterval(),
        "threads": sorted(threads.values(), key=lambda t: (t["name"] != "MainThread", t["native_id"])),
        "queue": {"address": id(jobs), "qsize": jobs.qsize(), "unfinished_tasks": jobs.unfinished_tasks},
        "deadlock": None,
        "gil": {"held_by": None, "why": "both threads wait with the GIL released (lock acquire, join)"},
    }
    print("MARKER " + json.dumps(facts), flush=True)


def main():
    note_thread()
    consumer = threading.Thread(target=consume, name="consumer")
    consumer.start()
    producer = threading.Thread(target=produce, name="producer")
    producer.start()
    producer.join()
    threading.Thread(target=tell, args=(consumer,), name="marker", daemon=True).start()
    consumer.join()
    print("all jobs done")


main()
