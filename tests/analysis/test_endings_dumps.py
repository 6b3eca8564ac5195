"""How processes end, on the real dumps (issue #41): sample_dumps/endings, aborts and
collisions, made under Wine with python.org's CPython 3.8-3.13 and real wheels, each
checked against what its program and runtime printed (the folders' manifests: the exit code
in RCX, the thread, the stderr lines). The tests read sample_dumps/bundles (the dump with
the memory and image pages the analysis reads), so they run on any machine; where the raw
dump's images are at hand (../shared/winpython and Wine's own DLLs), the raw dump must give
the bundle's verdict."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Dict, Optional

import pytest

from dumpkit.analysis.model import Report
from dumpkit.engine import Options, analyze
from dumpkit.sources.bundle import open_bundle
from tests.support.samples import SAMPLES, build_cache

BUNDLES = SAMPLES / "bundles"
WINE_DLLS = Path("/usr/lib/x86_64-linux-gnu/wine/x86_64-windows")
WINPYTHON = SAMPLES.parent.parent / "shared" / "winpython"


def _manifest(folder: str) -> Dict[str, dict]:
    data = json.loads((SAMPLES / folder / "manifest.json").read_text())
    return {d["name"]: d for d in (data["dumps"] if isinstance(data, dict) else data)}


ENDINGS = _manifest("endings")
ABORTS = _manifest("aborts")
COLLISIONS = _manifest("collisions")


@lru_cache(maxsize=None)
def report(name: str) -> Report:
    """The bundle's report, as a colleague without the crashed machine's files gets it."""
    path = BUNDLES / f"{name}.dkb"
    if not path.exists():
        pytest.skip(f"{path} is not here")
    target = open_bundle(str(path))
    try:
        return analyze(target, Options(use_recorded_paths=False), problems=target.soft_errors).report
    finally:
        target.close()


def _fact(name: str) -> dict:
    for manifest in (ENDINGS, ABORTS, COLLISIONS):
        if name in manifest:
            return manifest[name]
    raise KeyError(name)


def _exit_code(fact: dict) -> Optional[int]:
    return fact["ending"]["exit_code"] if "ending" in fact else fact.get("exit_code")


def _thread(fact: dict) -> int:
    return fact.get("crash_thread_tid") or fact.get("thread_id") or fact["exception_thread_tid"]


BUNDLED = sorted(p.stem for p in BUNDLES.glob("*.dkb") if p.stem in {**ENDINGS, **ABORTS, **COLLISIONS})


@pytest.mark.parametrize("name", BUNDLED)
def test_every_ending_is_the_exit_the_dump_was_stopped_at(name):
    """The exit code and the thread are those the dump's own registers and the program
    said; never 'a breakpoint with no debugger to handle it'."""
    fact, r = _fact(name), report(name)
    assert r.crash is not None and r.crash.thread_id == _thread(fact)
    assert "breakpoint instruction" not in r.verdict.headline
    if fact.get("exception_code") == 0x80000003:
        assert r.ending is not None and r.ending.exit_code == _exit_code(fact)
        assert r.ending.stopped_at in ("RtlExitUserProcess", "NtTerminateProcess")


FATAL = sorted(n for n in BUNDLED if n in ENDINGS and "fatal_python_error" in (ENDINGS[n].get("reason_lines") or {}))


@pytest.mark.parametrize("name", FATAL)
def test_a_fatal_python_error_is_said_in_the_words_the_interpreter_printed(name):
    """On every verified CPython, the function and message come back from the dump: the
    headline is the 'Fatal Python error: ...' line stderr had (issue #41 item 2)."""
    printed = ENDINGS[name]["reason_lines"]
    r = report(name)
    assert r.verdict.kind == "fatal_python_error"
    assert r.verdict.headline.startswith(printed["fatal_python_error"].rstrip(".")), r.verdict.headline
    assert r.ending is not None and r.ending.reason is not None
    assert r.ending.reason.text == printed["fatal_python_error"]
    function = printed.get("fatal_python_error_function")
    if name.endswith("py38") or "py38" in name:  # 3.8's Py_FatalError(msg): the message names it
        assert r.ending.reason.function is None
    else:
        assert r.ending.reason.function == function
    assert r.signature is not None and r.signature.kind.startswith("FATAL_PYTHON_ERROR(")


def test_the_common_fatal_errors_say_what_they_mean():
    assert "GIL" in (report("fatal_gil_py311").ending.reason.meaning or "")
    assert "RecursionError" in (report("fatal_overflow_py312").ending.reason.meaning or "")
    assert "standard library" in (report("fatal_startup_py312").ending.reason.meaning or "")
    assert any("ctypes.pythonapi" in s for s in report("fatal_gil_py313").verdict.next_steps)


def test_a_fatal_error_in_a_full_dump_names_the_users_line_and_ctypes():
    r = report("fatal_gil_full_py313")
    marker = ENDINGS["fatal_gil_full_py313"]["marker"]
    assert "through a ctypes call into python313.dll" in r.verdict.headline
    assert "C:\\scripts\\fatal_gil.py" in r.verdict.headline and r.blame is not None
    assert marker  # the program printed its own facts before the call


def test_the_gil_error_groups_by_function_across_python_versions():
    kinds = {report(f"fatal_gil_py{v}").signature.kind for v in ("38", "39", "310", "311", "312", "313")}
    assert kinds == {"FATAL_PYTHON_ERROR(PyThreadState_Get)"}


@pytest.mark.parametrize(
    "name, kind, starts",
    [
        ("os_abort_py312", "abort", "The process ended itself with exit code 3, from abort() called by python312.dll"),
        ("sigabrt_py39", "abort", "The process ended itself with exit code 3, from raise() called by python39.dll"),
        ("os_exit3_py311", "process_exit", "The process ended itself with exit code 3, from _exit() called by"),
        (
            "sys_exit3_py310",
            "process_exit",
            "No crash: the program exited with exit code 3 through the C runtime's exit()",
        ),
        (
            "terminate_self_py312",
            "process_exit",
            "The process ended itself with exit code 0xe0000001, from TerminateProcess()",
        ),
    ],
)
def test_plain_endings_are_told_apart(name, kind, starts):
    r = report(name)
    assert r.verdict.kind == kind and r.verdict.headline.startswith(starts), r.verdict.headline


def test_an_assert_in_a_dll_gives_its_expression():
    r = report("assert_dll_py312")
    printed = ENDINGS["assert_dll_py312"]["reason_lines"][
        "assertion_failed"
    ]  # with ', line 24', which no register kept
    assert r.verdict.kind == "abort" and r.ending.reason.kind == "assertion"
    assert printed.startswith(r.ending.reason.text)
    assert "assertlib.dll!al_fill_matrix" in r.verdict.headline
    ucrt = report("assert_ucrt_py313")
    assert (
        ucrt.ending.reason.text == "Assertion failed: index >= 0 && index < count, file C:\\src\\shardlib\\shardlib.cpp"
    )


def test_std_terminate_names_the_exception_in_flight_and_who_threw_it():
    r = report("cxx_terminate_py312")
    assert r.verdict.kind == "abort" and r.ending.route == "terminate"
    assert ABORTS["cxx_terminate_py312"]["thrown_type"] == ".?AUShardError@@"
    assert 'uncaught C++ exception of type ShardError ("shard index out of range")' in r.verdict.headline
    assert "thrown in shardlib.dll!" in r.verdict.headline
    assert r.signature.kind == "ABORT(ShardError)"


def test_tensorflows_check_failed_is_read_from_the_heap_buffer_in_a_full_dump():
    line = ABORTS["tf_check_failed_full_py311"]["stderr_fatal_line"]
    full = report("tf_check_failed_full_py311")
    assert full.ending.reason.kind == "check_failed" and line.endswith("] " + full.ending.reason.text)
    assert (
        "dim_size" in full.verdict.headline and full.verdict.headline.count("Check failed: d < dims() (1 vs. 0)") == 1
    )
    assert "tf_check_failed.py:41), calling tensorflow.python.ops.gen_nn_ops.fused_pad_conv2d" in full.verdict.headline


def test_tensorflows_check_failed_without_the_heap_names_the_caller_and_no_reason():
    """The MiniDumpNormal dump of the same program holds no heap: the same caller and
    frames, no reason made up. Its images (TensorFlow's 700 MB pyd) are not committed, so
    this runs where the aborts build cache is (sample_dumps/aborts/build.sh)."""
    images = build_cache("ABORTS_CACHE", "cache-aborts") / "images" / "Python311-tf"
    if not images.is_dir() or not WINE_DLLS.is_dir():
        pytest.skip("needs TensorFlow's images (sample_dumps/aborts/build.sh's cache) and Wine's own DLLs")
    from dumpkit.commands.inputs import open_target

    target, problems = open_target(str(SAMPLES / "aborts" / "tf_check_failed_py311.dmp.xz"))
    try:
        normal = analyze(target, Options(image_paths=[str(WINE_DLLS), str(images)]), problems=problems).report
    finally:
        target.close()
    full = report("tf_check_failed_full_py311")
    assert normal.ending.reason is None and "TensorShapeBase" in normal.verdict.headline
    assert full.signature.text.split(" | ")[1:] == normal.signature.text.split(" | ")[1:]


def test_two_openmp_runtimes_are_one_group_whatever_the_python_and_the_control_is_not():
    a, b = report("omp_duplicate_py311"), report("omp_duplicate_py312")
    assert COLLISIONS["omp_duplicate_py311"]["stderr_first_line"].startswith("OMP: Error #15")
    assert a.signature.text == b.signature.text == "ABORT(OMP: Error #15)"
    assert "Two copies of Intel's OpenMP runtime" in a.verdict.headline
    assert any("KMP_DUPLICATE_LIB_OK" in s for s in a.verdict.next_steps)
    single = report("omp_single_py311")
    assert "OpenMP" not in single.verdict.headline and single.signature.text != a.signature.text


def test_the_msvcp140_mutex_crash_names_both_dlls_and_their_versions():
    r = report("msvcp140_mutex_py311")
    headline = r.verdict.headline
    assert r.verdict.kind == "access_violation" and "14.34.31931.0" in headline and "14.40" in headline
    assert "ctranslate2.dll" in headline and "MSVC 14.44" in headline
    assert any("_DISABLE_CONSTEXPR_MUTEX_CONSTRUCTOR" in s for s in r.verdict.next_steps)


def test_an_extension_that_loaded_another_pythons_dll_is_said_where_it_crashes():
    r = report("two_pythons_py311")
    assert r.verdict.kind == "access_violation" and "python39.dll" in r.verdict.headline
    assert any(c.kind == "python" for c in r.environment.runtime_collisions)


def test_two_cuda_majors_are_an_environment_finding_not_the_verdict():
    r = report("two_cuda_runtimes_py311")
    assert any(c.kind == "cuda" for c in r.environment.runtime_collisions)
    assert r.verdict.kind == "abort" and "CUDA" not in r.verdict.headline  # os.abort() in the interpreter


def _raw(name: str) -> Optional[Path]:
    for folder in ("endings", "aborts", "collisions"):
        for suffix in (".dmp.xz", ".dmp", ".trimmed.dmp.xz"):
            path = SAMPLES / folder / f"{name}{suffix}"
            if path.exists():
                return path
    return None


@pytest.mark.parametrize("name", [n for n in BUNDLED if n.startswith(("fatal_gil_py", "os_abort", "assert_dll"))])
def test_the_raw_dump_with_its_images_gives_the_bundles_verdict(name):
    raw = _raw(name)
    minor = name.rsplit("_py", 1)[1]
    images = WINPYTHON / f"cpython-3.{minor[1:]}-amd64"
    if raw is None or not images.is_dir() or not WINE_DLLS.is_dir():
        pytest.skip("needs ../shared/winpython and Wine's own DLLs (Debian's wine64)")
    from dumpkit.commands.inputs import open_target

    target, problems = open_target(str(raw))
    try:
        folders = [str(WINE_DLLS), str(images), str(SAMPLES / "endings" / "bin")]
        got = analyze(target, Options(image_paths=folders, use_recorded_paths=False), problems=problems).report
    finally:
        target.close()
    assert got.verdict.headline == report(name).verdict.headline
    assert got.signature.text == report(name).signature.text


def test_every_format_carries_the_reason(tmp_path):
    """Text, Markdown, HTML and JSON all say what ended the process and why, from the same
    view (issue #41 item 7)."""
    import subprocess
    import sys

    bundle = BUNDLES / "fatal_gil_py312.dkb"
    if not bundle.exists():
        pytest.skip(f"{bundle} is not here")
    message = "Fatal Python error: PyThreadState_Get: the function must be called with the GIL held"
    for fmt in ("text", "markdown", "html", "json"):
        out = subprocess.run(
            [sys.executable, "-m", "dumpkit", "analyze", str(bundle), "--format", fmt, "--no-recorded-paths"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        ).stdout
        flat = " ".join(out.split())
        assert message in flat, fmt
        if fmt != "json":
            assert "Ended" in flat and "Reason" in flat and "exit code" in flat, fmt
        else:
            doc = json.loads(out)
            assert doc["ending"]["reason"]["kind"] == "fatal_python_error" and doc["ending"]["exit_code"] == 3


# The raw dumps with Windows' own DLLs only (Wine's, committed in sample_dumps/bin/wine): a
# colleague who has the dump and not the crashed machine's Python. The walk gets through
# the way out and no further; below it only stack scanning reaches, with no code to check.
WAY_OUT = ("RtlExitUserProcess", "ExitProcess", "NtTerminateProcess")
RAW_EXITS = sorted(n for n, f in ENDINGS.items() if (f.get("ending") or {}).get("exit_code") is not None)


@lru_cache(maxsize=None)
def raw_report_without_images(name: str) -> Report:
    from dumpkit.commands.inputs import open_target

    target, problems = open_target(str(SAMPLES / "endings" / ENDINGS[name]["file"]))
    try:
        options = Options(image_paths=[str(SAMPLES / "bin" / "wine")], use_recorded_paths=False)
        return analyze(target, options, problems=problems).report
    finally:
        target.close()


@pytest.mark.slow  # 29 raw dumps analysed: the full run's
@pytest.mark.parametrize("name", RAW_EXITS)
def test_without_the_images_an_exits_caller_is_named_only_as_far_as_the_walk_confirmed_it(name):
    """Without python3X.dll's image a word on the stack that points into it may be a global's
    address (`_PyRuntime`), not a return address: such a caller is said to be unconfirmed,
    the verdict is not high, and nothing is built on it (how Python got there); a walk that
    never got past the way out says where it stopped."""
    got = raw_report_without_images(name)
    end, verdict = got.ending, got.verdict
    assert end is not None and end.exit_code == ENDINGS[name]["ending"]["exit_code"]
    crashing = next(t for t in got.threads if t.is_crashing)
    trust = {f.index: f.trust for f in crashing.frames}
    if end.caller_frame is None:
        assert "called by a frame the walk could not reach (it stops at " in verdict.headline
        assert verdict.confidence == "medium"
    elif trust.get(end.caller_frame) == "scan":
        assert f"{end.caller} (unconfirmed: a word found by stack scanning)" in verdict.headline
        assert verdict.confidence == "medium" and "from Python" not in verdict.headline
        assert any("unconfirmed: its module's code was not at hand" in e for e in verdict.evidence)
    else:
        assert "unconfirmed" not in verdict.headline
    if end.caller_frame is None or trust.get(end.caller_frame) == "scan":
        assert any("--image-path" in s and "confirm who called" in s for s in verdict.next_steps)


@pytest.mark.slow  # 29 raw dumps analysed: the full run's
@pytest.mark.parametrize("name", RAW_EXITS)
def test_an_exits_signature_never_holds_the_way_out(name):
    """Rule 8: the frames start at the ending's caller. A walk that stops inside the way out
    (the C runtime's image not at hand) gives the kind alone, as the same ending with an
    unconfirmed caller does, not `EXIT(3) | ntdll.dll!RtlExitUserProcess | ...`."""
    signature = raw_report_without_images(name).signature
    assert signature is not None and signature.kind.startswith(("EXIT", "ABORT", "FATAL_PYTHON_ERROR"))
    assert not any(word in element for element in signature.frames for word in WAY_OUT), signature.text


@pytest.mark.slow  # 29 raw dumps analysed: the full run's
@pytest.mark.parametrize("name", RAW_EXITS)
def test_with_no_image_at_all_an_exit_stop_is_said_to_be_most_likely_a_debuggers(name):
    """No image at all, not even ntdll.dll's: the breakpoint at frame 0 has no name, so the
    exit cannot be read. The first step says what a breakpoint there most often is, and
    which image would tell (here Wine's folder: the dump says it ran under Wine)."""
    from dumpkit.commands.inputs import open_target

    target, problems = open_target(str(SAMPLES / "endings" / ENDINGS[name]["file"]))
    try:
        got = analyze(target, Options(image_paths=[], use_recorded_paths=False), problems=problems).report
    finally:
        target.close()
    assert got.ending is None and got.verdict.headline.startswith("0x80000003 breakpoint in ntdll.dll+0x")
    first = got.verdict.next_steps[0]
    assert first.startswith("Frame 0 is in ntdll.dll, whose image is not here: a breakpoint there is most often")
    assert "the exit code" in first and "Wine's own DLLs are in the Wine installation's PE DLL folder" in first
