r"""Build the benchmark inputs into bench/out/ (reused when already there).

    python bench/build_inputs.py [--force] [--functions N] [NAME...]

NAME is one of: deep1m, deep1400k, threads200, sparse4g, full4g, pyfull4g, bigpdata
(default: all).

  deep1m      out/deep_recursion_1m.dmp: sample_dumps/deep_recursion_1m.dmp.xz, decompressed.
  deep1400k   out/deep1400k/deep1400k.dmp: deep1m's recipe (sample_dumps/src/tfhost.c
              deep_recursion_1m) built with an 88 MiB stack reserve: ~1.44M frames.
  threads200  out/threads200/threads200.dmp: bench/src/threads200.c compiled with mingw-w64
              (same flags as sample_dumps/build.sh), run under Wine as
              `dumper.exe OUT threads200.exe 200` (sample_dumps/bin/dumper.exe: the
              out-of-process reporter, MiniDumpNormal): 200 blocked threads + the crashing
              main thread.
  sparse4g    out/sparse_4g.dmp: sample_dumps/recursion_cycle3.dmp + a 4 GiB / 8,192-range
              Memory64List whose bytes are a hole in a sparse file (bench/make_sparse_dump.py).
  full4g      out/full4g/full4g.dmp: bench/src/fullmem.c commits 4 GiB in 1-256 MiB blocks,
              then overflows a worker's 1 MiB stack in a 3-function recursion; dumped
              under Wine as `dumper.exe OUT --full fullmem.exe 4096`
              (MiniDumpWithFullMemory: a real multi-GB dump, all of it written by dbghelp),
              then made sparse on disk with `fallocate --dig-holes` (the untouched pages
              are zeros; the file's bytes do not change).
  pyfull4g    out/pyfull4g/pyfull4g.dmp: the genuine CPython 3.8 of ../shared/winpython (a
              scratch copy in out/pyfull4g/images/Python38, linked into the prefix as
              C:\Python38) runs bench/src/pyfull.py: 4 GiB of bytearrays in 1-256 MiB blocks
              and 300,000 ordinary objects, then Python-level recursion overflows the main
              thread's C stack; dumped as `dumper.exe OUT --full C:\Python38\python.exe
              C:\scripts\pyfull.py 4096` and dug sparse like full4g.
  bigpdata    out/bigpdata/: bench/src/gen_bigpdata.py writes assembly for N (default
              1,000,000) functions with SEH unwind data, assembled in 100 parts in parallel
              (gas is quadratic in functions per file) and linked into bigpdata.dll;
              bench/src/bighost.c loads it and calls bp_entry, which crashes 17 frames deep
              in functions spread over the whole table; dumped with dumper.exe under Wine.

Wine runs with its own prefix (out/wineprefix, created with `wineboot -i` like
sample_dumps/build.sh does), WINEDEBUG=-all, every call under `timeout`.
"""

import argparse
import lzma
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
SAMPLES = os.path.join(ROOT, "sample_dumps")
DUMPER = os.path.join(SAMPLES, "bin", "dumper.exe")
WINE = os.environ.get("WINE", "/usr/lib/wine/wine64")
CC = "x86_64-w64-mingw32-gcc"
AS = "x86_64-w64-mingw32-as"
CFLAGS = "-O2 -fno-inline -fno-optimize-sibling-calls -g0 -Wall".split()
LDFLAGS = "-static -static-libgcc".split()
WINEPREFIX = os.path.join(OUT, "wineprefix")

NAMES = ("deep1m", "deep1400k", "threads200", "sparse4g", "full4g", "pyfull4g", "bigpdata")
WINPY = os.path.join(os.path.dirname(ROOT), "shared", "winpython", "cpython-3.8-amd64")


def log(msg: str) -> None:
    print(f"[build] {msg}", file=sys.stderr, flush=True)


def run(cmd, timeout, cwd=None, env=None) -> subprocess.CompletedProcess:
    t = time.perf_counter()
    p = subprocess.run(["timeout", str(timeout)] + list(cmd), cwd=cwd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} -> rc {p.returncode}\n{p.stdout}\n{p.stderr}")
    log(f"{os.path.basename(cmd[0])} ... {dt:.1f} s")
    return p


def wine_env() -> dict:
    env = dict(os.environ, WINEPREFIX=WINEPREFIX, WINEDEBUG="-all")
    if not os.path.isdir(os.path.join(WINEPREFIX, "drive_c")):
        log(f"creating Wine prefix {WINEPREFIX}")
        subprocess.run(
            ["timeout", "300", WINE, "wineboot", "-i"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    return env


def wine_dump(workdir: str, out_dmp: str, program: list, binaries=(), timeout: int = 300) -> str:
    """dumper.exe OUT program... under Wine in `workdir`; returns dumper's stdout.
    `binaries` are copied into `workdir` for the run and removed afterwards, so the
    module paths recorded in the dump do not exist and dumpkit has to find the images
    through --image-path (they stay in their own folder)."""
    env = wine_env()
    copies = [os.path.join(workdir, "dumper.exe")]
    shutil.copy(DUMPER, copies[0])
    for b in binaries:
        copies.append(os.path.join(workdir, os.path.basename(b)))
        shutil.copy2(b, copies[-1])
    if os.path.exists(out_dmp):
        os.remove(out_dmp)
    winpath = "Z:" + os.path.abspath(out_dmp).replace("/", "\\")
    t0 = time.perf_counter()
    p = subprocess.run(
        ["timeout", str(timeout), WINE, "dumper.exe", winpath] + program,
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,  # python.exe dies in init_sys_streams on a terminal's handle
        capture_output=True,
        text=True,
    )
    subprocess.run(
        ["timeout", "60", os.path.join(os.path.dirname(WINE), "wineserver"), "-k"], env=env, capture_output=True
    )
    for c in copies:
        os.remove(c)
    if not (os.path.exists(out_dmp) and os.path.getsize(out_dmp) > 0):
        raise RuntimeError(f"no dump written (rc {p.returncode})\n{p.stdout}\n{p.stderr}")
    log(f"{p.stdout.strip()} ({time.perf_counter() - t0:.1f} s under Wine)")
    return p.stdout


def fresh(target: str, *sources: str) -> bool:
    if not os.path.exists(target):
        return False
    t = os.path.getmtime(target)
    return all(os.path.getmtime(s) <= t for s in sources)


# ----------------------------------------------------------------------------- inputs
def build_deep1m(force: bool) -> str:
    src = os.path.join(SAMPLES, "deep_recursion_1m.dmp.xz")
    dst = os.path.join(OUT, "deep_recursion_1m.dmp")
    if force or not fresh(dst, src):
        with lzma.open(src) as fi, open(dst + ".tmp", "wb") as fo:
            shutil.copyfileobj(fi, fo, 1 << 20)
        os.replace(dst + ".tmp", dst)
        log(f"decompressed {dst}")
    return dst


def build_deep1400k(force: bool, reserve_mib: int = 88) -> str:
    """out/deep1400k/deep1400k.dmp: the deep_recursion_1m recipe (sample_dumps/src/tfhost.c,
    `descend` recursing 64 bytes a frame until the stack overflows) with an 88 MiB
    reserve instead of 64: ~1.44M frames. tfhost.exe is built here with
    -DDEEP_RESERVE_MIB; opkernels.dll is the committed sample_dumps/bin one."""
    d = os.path.join(OUT, "deep1400k")
    os.makedirs(os.path.join(d, "images"), exist_ok=True)
    src = os.path.join(SAMPLES, "src", "tfhost.c")
    exe = os.path.join(d, "images", "tfhost.exe")
    dll = os.path.join(d, "images", "opkernels.dll")
    dmp = os.path.join(d, "deep1400k.dmp")
    if force or not fresh(exe, src):
        run([CC] + CFLAGS + [f"-DDEEP_RESERVE_MIB={reserve_mib}"] + LDFLAGS + ["-o", exe, src, "-ldbghelp"], 120)
        shutil.copy2(os.path.join(SAMPLES, "bin", "opkernels.dll"), dll)
    if force or not fresh(dmp, exe):
        wine_dump(d, dmp, ["tfhost.exe", "deep_recursion_1m"], [exe, dll])
    return dmp


def program_dump(
    name: str, source: str, exe_name: str, program_args: list, force: bool, dumper_args: tuple = (), timeout: int = 300
) -> str:
    """out/NAME/NAME.dmp: bench/src/SOURCE compiled into out/NAME/images/EXE_NAME and run
    under dumper.exe (rebuilt only when the source or the program is newer)."""
    d = os.path.join(OUT, name)
    os.makedirs(os.path.join(d, "images"), exist_ok=True)
    src = os.path.join(HERE, "src", source)
    exe = os.path.join(d, "images", exe_name)
    dmp = os.path.join(d, f"{name}.dmp")
    if force or not fresh(exe, src):
        run([CC] + CFLAGS + LDFLAGS + ["-o", exe, src], 120)
    if force or not fresh(dmp, exe):
        wine_dump(d, dmp, list(dumper_args) + [exe_name] + program_args, [exe], timeout=timeout)
    return dmp


def build_threads200(force: bool) -> str:
    return program_dump("threads200", "threads200.c", "threads200.exe", ["200"], force)


def build_sparse4g(force: bool) -> str:
    src = os.path.join(SAMPLES, "recursion_cycle3.dmp")
    dst = os.path.join(OUT, "sparse_4g.dmp")
    script = os.path.join(HERE, "make_sparse_dump.py")
    if force or not fresh(dst, src, script):
        p = run([sys.executable, script, src, dst, "--gib", "4", "--ranges", "8192"], 120)
        log(p.stdout.strip())
    return dst


def build_full4g(force: bool, mib: int = 4096) -> str:
    dmp = os.path.join(OUT, "full4g", "full4g.dmp")
    before = os.path.getmtime(dmp) if os.path.exists(dmp) and not force else None
    program_dump("full4g", "fullmem.c", "fullmem.exe", [str(mib)], force, dumper_args=("--full",), timeout=900)
    if before is None or os.path.getmtime(dmp) != before:
        dig_holes(dmp)
    return dmp


def dig_holes(dmp: str) -> None:
    """Zero pages become holes: the file's bytes do not change, its disk use does."""
    subprocess.run(["fallocate", "--dig-holes", dmp], capture_output=True, timeout=600)
    st = os.stat(dmp)
    log(f"{os.path.basename(dmp)}: {st.st_size:,} bytes, {st.st_blocks * 512:,} on disk")


def build_pyfull4g(force: bool, mib: int = 4096) -> str:
    d = os.path.join(OUT, "pyfull4g")
    py = os.path.join(d, "images", "Python38")
    script = os.path.join(HERE, "src", "pyfull.py")
    dmp = os.path.join(d, "pyfull4g.dmp")
    if not os.path.exists(os.path.join(WINPY, "python38.dll")):
        raise RuntimeError(f"needs the genuine CPython 3.8 at {WINPY} (../shared/winpython)")
    if force or not os.path.exists(os.path.join(py, "python38.dll")):
        shutil.rmtree(py, ignore_errors=True)
        shutil.copytree(WINPY, py)  # a scratch copy: python.exe may write next to itself
    if force or not fresh(dmp, script):
        wine_env()  # creates the prefix on first use
        drive_c = os.path.join(WINEPREFIX, "drive_c")
        link = os.path.join(drive_c, "Python38")
        if os.path.islink(link):
            os.remove(link)
        os.symlink(py, link)  # the path a real user's dump records: C:\Python38\python38.dll
        os.makedirs(os.path.join(drive_c, "scripts"), exist_ok=True)
        shutil.copy2(script, os.path.join(drive_c, "scripts", "pyfull.py"))
        wine_dump(d, dmp, ["--full", "C:\\Python38\\python.exe", "C:\\scripts\\pyfull.py", str(mib)], timeout=1200)
        dig_holes(dmp)
    return dmp


def build_bigpdata(force: bool, functions: int) -> str:
    d = os.path.join(OUT, "bigpdata")
    asm = os.path.join(d, "asm")
    os.makedirs(asm, exist_ok=True)
    os.makedirs(os.path.join(d, "images"), exist_ok=True)
    gen = os.path.join(HERE, "src", "gen_bigpdata.py")
    host_src = os.path.join(HERE, "src", "bighost.c")
    dll = os.path.join(d, "images", "bigpdata.dll")
    exe = os.path.join(d, "images", "bighost.exe")
    dmp = os.path.join(d, "bigpdata.dmp")
    stamp = os.path.join(d, "images", f"functions.{functions}")
    parts = max(1, functions // 10000)
    timings = {}
    if force or not fresh(dll, gen) or not os.path.exists(stamp):
        for f in os.listdir(asm):
            os.remove(os.path.join(asm, f))
        t0 = time.perf_counter()
        run([sys.executable, gen, str(functions), str(parts), asm], 300)
        t1 = time.perf_counter()
        # gas is quadratic in .seh_proc blocks per file: 10,000 per file, 2 at a time
        procs, todo = [], [f"bigpdata_{i}" for i in range(parts)]
        while todo or procs:
            while todo and len(procs) < (os.cpu_count() or 2):
                n = todo.pop(0)
                procs.append(subprocess.Popen(["timeout", "300", AS, f"{n}.s", "-o", f"{n}.o"], cwd=asm))
            procs[0].wait()
            if procs[0].returncode != 0:
                raise RuntimeError(f"as failed: {procs[0].args}")
            procs.pop(0)
        t2 = time.perf_counter()
        objs = [os.path.join(asm, f"bigpdata_{i}.o") for i in range(parts)]
        run([CC, "-shared", "-nostdlib", "-s", "-Wl,-e,bp_dllmain", "-o", dll] + objs, 600)
        t3 = time.perf_counter()
        timings = {"generate": t1 - t0, "assemble": t2 - t1, "link": t3 - t2}
        for f in os.listdir(asm):
            if f.endswith((".s", ".o")):
                os.remove(os.path.join(asm, f))
        for f in os.listdir(os.path.join(d, "images")):
            if f.startswith("functions."):
                os.remove(os.path.join(d, "images", f))
        with open(stamp, "w") as f:
            f.write("".join(f"{k} {v:.1f} s\n" for k, v in timings.items()))
        log("bigpdata.dll: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    if force or not fresh(exe, host_src):
        run([CC] + CFLAGS + LDFLAGS + ["-o", exe, host_src], 120)
    if force or not fresh(dmp, exe, dll):
        wine_dump(d, dmp, ["bighost.exe"], [exe, dll])
    return dmp


# Inputs made by running real programs: they need the cross toolchain and Wine.
NEEDS_WINE = {"deep1400k", "threads200", "full4g", "pyfull4g", "bigpdata"}


def missing_tools() -> list:
    """What a Wine-made input needs that this machine lacks (checked before any work, so a
    machine without Wine skips those inputs at once instead of generating 160 MB of
    assembly first)."""
    tools = [CC, AS]
    missing = [t for t in tools if shutil.which(t) is None]
    if not os.access(WINE, os.X_OK):
        missing.append(WINE)
    return missing


def build(names=NAMES, force=False, functions=1_000_000) -> dict:
    os.makedirs(OUT, exist_ok=True)
    out = {}
    lacking = missing_tools() if NEEDS_WINE.intersection(names) else []
    for n in names:
        if n in NEEDS_WINE and lacking:
            log(
                f"{n}: skipped: needs {', '.join(lacking)} "
                "(apt-get install gcc-mingw-w64-x86-64 wine64, see sample_dumps/README.md)"
            )
            continue
        try:
            if n == "deep1m":
                out[n] = build_deep1m(force)
            elif n == "deep1400k":
                out[n] = build_deep1400k(force)
            elif n == "threads200":
                out[n] = build_threads200(force)
            elif n == "sparse4g":
                out[n] = build_sparse4g(force)
            elif n == "full4g":
                out[n] = build_full4g(force)
            elif n == "pyfull4g":
                out[n] = build_pyfull4g(force)
            elif n == "bigpdata":
                out[n] = build_bigpdata(force, functions)
        except Exception as e:  # one failed input must not stop the others
            log(f"{n}: FAILED: {e}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="build the benchmark inputs into bench/out/")
    ap.add_argument("names", nargs="*", metavar="NAME", help=" | ".join(NAMES))
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--functions", type=int, default=1_000_000)
    a = ap.parse_args()
    bad = [n for n in a.names if n not in NAMES]
    if bad:
        ap.error(f"unknown input(s) {bad}; choose from {NAMES}")
    for k, v in build(a.names or NAMES, a.force, a.functions).items():
        print(f"{k}\t{v}")


if __name__ == "__main__":
    main()
