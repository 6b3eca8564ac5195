"""Where does `dumpkit analyze` spend its time? Phase timings without profiler overhead,
and optionally a cProfile listing.

    python bench/profile_phases.py [DUMP] [--image-path DIR] [--cprofile N]

Runs what `dumpkit analyze DUMP --image-path DIR --format json` runs, in-process, with
the engine's phase functions wrapped in wall-clock timers (each wrapper adds ~1 us per
call; all of them are called a handful of times). Defaults to the 1M-frame dump.
"""

import argparse
import cProfile
import functools
import io
import os
import pstats
import sys
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

T0 = time.perf_counter()
import dumpkit.analysis.threadreport as threadreport  # noqa: E402
import dumpkit.analysis.threads as threads  # noqa: E402
import dumpkit.engine as engine  # noqa: E402
from dumpkit.problems import Problems  # noqa: E402
from dumpkit.report.json_report import render_json  # noqa: E402
from dumpkit.sources.minidump import open_dump  # noqa: E402

T_IMPORT = time.perf_counter() - T0

TIMES = defaultdict(float)
CALLS = defaultdict(int)
# (module whose global is replaced, name): a phase is timed where it is called from
PHASES = [
    (engine, "walk_all"),
    (threads, "find_cycles"),
    (threads, "frame_sizes"),
    (threads, "stack_budget"),
    (threadreport, "frame_records"),
    (threadreport, "identical_stacks"),
    (engine, "describe_environment"),
    (engine, "decide"),
    (engine, "exe_stack_reserve"),
    (engine, "make_walker"),
]


def timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*a, **kw):
        t = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            TIMES[name] += time.perf_counter() - t
            CALLS[name] += 1

    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dump", nargs="?", default=os.path.join(HERE, "out", "deep_recursion_1m.dmp"))
    ap.add_argument("--image-path", default=os.path.join(ROOT, "sample_dumps", "bin"))
    ap.add_argument("--cprofile", type=int, default=0, help="also print the top N of a cProfile run")
    a = ap.parse_args()
    for module, name in PHASES:
        if hasattr(module, name):
            setattr(module, name, timed(name, getattr(module, name)))

    t = time.perf_counter()
    problems = Problems()
    target = open_dump(a.dump, problems)
    t_open = time.perf_counter() - t
    t = time.perf_counter()
    result = engine.analyze(target, engine.Options(image_paths=[a.image_path]), problems=problems)
    t_analyze = time.perf_counter() - t
    t = time.perf_counter()
    text = render_json(result.report)
    t_render = time.perf_counter() - t
    crash = next((r for r in result.report.threads if r.is_crashing), None)
    print(f"dump: {a.dump}  crashing-thread frames: {crash.frame_count if crash else '?'}  JSON {len(text):,} chars")
    print(f"{'import dumpkit.engine + sources + json renderer':48s} {T_IMPORT * 1e3:9.1f} ms")
    print(f"{'open_dump':48s} {t_open * 1e3:9.1f} ms")
    print(f"{'engine.analyze (total)':48s} {t_analyze * 1e3:9.1f} ms")
    for _, name in PHASES:
        if CALLS[name]:
            print(f"  {name + f' ({CALLS[name]} calls)':46s} {TIMES[name] * 1e3:9.1f} ms")
    # no timed phase runs inside another: the sum counts each moment once
    accounted = sum(TIMES[n] for _, n in PHASES)
    print(f"  {'(rest of analyze)':46s} {(t_analyze - accounted) * 1e3:9.1f} ms")
    print(f"{'render_json':48s} {t_render * 1e3:9.1f} ms")

    if a.cprofile:
        problems = Problems()
        target = open_dump(a.dump, problems)
        prof = cProfile.Profile()
        prof.enable()
        result = engine.analyze(target, engine.Options(image_paths=[a.image_path]), problems=problems)
        render_json(result.report)
        prof.disable()
        s = io.StringIO()
        st = pstats.Stats(prof, stream=s)
        st.sort_stats("tottime").print_stats(a.cprofile)
        print(s.getvalue())


if __name__ == "__main__":
    main()
