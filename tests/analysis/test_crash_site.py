"""What `analyze` says about where a crash happened, on the sample dumps (their manifests
record the truth) and the real third-party dumps: the crash signature, the blamed frame,
the code around the faulting IP, the faulting module, the process and its command line."""

from __future__ import annotations

import re

import pytest

from dumpkit.analysis.signature import RULES
from dumpkit.engine import Options, analyze
from tests.support.samples import (
    analyse_file,
    SAMPLE_BIN,
    python_manifest,
    real_dump,
    real_dumps,
    sample_facts,
    sample_path,
)

_REPORTS: dict = {}


def _report(path):
    key = str(path)
    if key not in _REPORTS:
        _REPORTS[key] = analyse_file(key, Options(image_paths=[str(SAMPLE_BIN)]))
    return _REPORTS[key]


SAMPLES = [
    "big_frame.dmp",
    "fastfail_abort.dmp",
    "fastfail_gs.dmp",
    "gp_misaligned_sse.dmp",
    "gp_wild_pointer.dmp",
    "heap_oob.dmp",
    "illegal_instruction.dmp",
    "null_deref.dmp",
    "recursion_cycle3.dmp",
    "recursion_one.dmp",
    "tf_env_abort.dmp",
    "tree_free.dmp",
]
ELEMENT = re.compile(r"^(recursion\(.+\)|[a-z0-9_.-]+![^|]+|[a-z0-9_.-]+\+0x[0-9a-f]+|\?)$")


# --------------------------------------------------------------------------- signature
@pytest.mark.parametrize("name", SAMPLES)
def test_signature_names_the_crash_by_its_first_meaningful_frames(name):
    facts = sample_facts(name)
    sig = _report(sample_path(name)).signature
    assert sig is not None and sig.rules == RULES and sig.text == " | ".join((sig.kind,) + sig.frames)
    chain = [c["function"] for c in facts["call_chain"]]
    if facts.get("cycle_functions"):
        members = {
            f"{c['module'].lower()}!{c['function']}"
            for c in facts["call_chain"]
            if c["function"] in facts["cycle_functions"]
        }
        assert sig.frames[0].startswith("recursion(") and all(m in sig.frames[0] for m in members)
        below = [c for c in facts["call_chain"] if c["function"] not in facts["cycle_functions"]]
        assert sig.frames[1] == f"{below[0]['module'].lower()}!{below[0]['function']}"
    else:
        # the stack probe and the fail-fast reporter are how the crash was raised, not where
        first = next(f for f in chain if f not in ("___chkstk_ms", "report_gsfailure"))
        assert sig.frames[0].endswith(f"!{first}"), (sig.text, chain)
    assert len(sig.frames) == 3
    assert "0x" not in sig.text  # no address: the samples' frames all have names


def test_the_same_crash_written_three_ways_has_one_signature(plain):
    """recursion_one as dbghelp wrote it out of process, normalised, and in process by a
    vectored handler: one bug, one line."""
    sigs = {
        _report(sample_path("recursion_one.dmp")).signature.text,
        _report(sample_path("recursion_one.normalized.dmp")).signature.text,
        _report(plain(sample_path("recursion_one.selfdump.dmp.xz"))).signature.text,
    }
    assert sigs == {
        "STACK_OVERFLOW | recursion(opkernels.dll!visit) | tfhost.exe!run_scenario | tfhost.exe!op_worker_main"
    }


def test_a_cycle_is_one_element_whichever_member_was_on_top():
    """recursion_cycle3 died in `expand`; a run dying one call later has `reduce` on top and
    a different partial repetition below: the element is the same."""
    from dataclasses import replace

    report = _report(sample_path("recursion_cycle3.dmp"))
    crash = next(t for t in report.threads if t.is_crashing)
    from dumpkit.analysis.signature import crash_signature

    shifted = crash.frames[1:]  # as if the stack had run out one frame earlier
    cycle = replace(
        crash.cycles[0], functions=crash.cycles[0].functions[1:] + crash.cycles[0].functions[:1], first_frame=1
    )
    other = crash_signature(report.crash, replace(crash, frames=shifted, cycles=(cycle,)))
    assert other is not None and other.text == report.signature.text
    assert report.signature.frames[0] == "recursion(opkernels.dll!expand > opkernels.dll!reduce > opkernels.dll!visit)"


def test_thread_start_frames_never_pad_a_signature():
    """big_frame's thread starts in kernel32!BaseThreadInitThunk four frames down; a run
    whose crash sat two frames higher would have brought it into the first three."""
    from dataclasses import replace

    from dumpkit.analysis.signature import crash_signature

    report = _report(sample_path("big_frame.dmp"))
    crash = next(t for t in report.threads if t.is_crashing)
    names = [f.symbol or "" for f in crash.frames]
    start = next(i for i, n in enumerate(names) if n.lower().startswith("kernel32.dll!basethreadinitthunk"))
    short = tuple(f for f in crash.frames if f.index in (0, 1) or f.index >= start)
    sig = crash_signature(report.crash, replace(crash, frames=short))
    assert sig is not None and sig.frames == ("opkernels.dll!conv_big_kernel",), sig.text


def test_windows_build_specific_rvas_stay_out_of_signatures():
    """Breakpad's crashme crashes near the bottom of its stack: rules v1 ended their lines
    with kernel32.dll+0x13677 | ntdll.dll+0x39d42, offsets that move with every Windows
    update. The same crash in crashme must not split by the patch level of the machine."""
    sig = _report(real_dump("breakpad/read_av_non_null.dmp")).signature
    assert sig is not None and sig.text == "ACCESS_VIOLATION | crashme.exe+0x1098", sig.text
    assert sig.text == _report(real_dump("breakpad/read_av_clobber_write.dmp")).signature.text
    on_stack = _report(real_dump("breakpad/exec_av_on_stack.dmp")).signature
    assert on_stack is not None and on_stack.text == "ACCESS_VIOLATION | ?"


def test_a_stack_overflow_signature_starts_at_the_recursion_not_where_the_stack_ran_out():
    """Breakpad's stack_exhaustion overflowed in crashme.exe+0xa637, called from the
    recursion's last repetition: where the guard page happened to be hit, not the cause."""
    report = _report(real_dump("breakpad/stack_exhaustion.dmp"))
    crash = next(t for t in report.threads if t.is_crashing)
    assert crash.cycles and crash.cycles[0].first_frame > 0  # frames above the recursion exist
    sig = report.signature
    assert sig is not None and sig.frames[0] == "recursion(crashme.exe+0xa6a7)", sig.text


PY_OVERFLOWS = [d for d in python_manifest() if d.get("expected_class") == "recursion"]


@pytest.mark.parametrize("facts", PY_OVERFLOWS, ids=[d["file"] for d in PY_OVERFLOWS])
@pytest.mark.slow
def test_python_recursions_group_by_what_recursed_whatever_ran_out_of_stack(facts, python_report):
    """repr() of a self-nesting list ran out of stack inside PyUnicode_New on one run; the
    signature names the repr recursion, and a full-memory dump of the same program says
    the same line as its minidump."""
    sig = python_report(facts).signature
    assert sig is not None and sig.kind == "STACK_OVERFLOW" and sig.frames[0].startswith("recursion("), sig.text
    twin = facts["file"].replace(".dmp.xz", "_full.trimmed.dmp.xz")
    partner = next((d for d in python_manifest() if d["file"] == twin), None)
    if partner is not None:
        assert python_report(partner).signature.text == sig.text


@pytest.mark.parametrize("dump", real_dumps(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_dump_signatures_hold_no_address(dump):
    report = _report(dump)
    sig = report.signature
    if report.crash is None:
        assert sig is None
        return
    assert sig is not None
    assert all(ELEMENT.match(e) for e in sig.frames), sig.frames
    assert not re.search(r"(^|[ (|])0x", sig.text.split(" | ", 1)[-1]), sig.text


# --------------------------------------------------------------------------- blame
@pytest.mark.parametrize(
    "name,index", [("big_frame.dmp", 1), ("fastfail_gs.dmp", 1), ("null_deref.dmp", 0), ("tf_env_abort.dmp", 0)]
)
def test_blame_is_the_first_frame_of_the_programs_own_code(name, index):
    facts = sample_facts(name)
    blame = _report(sample_path(name)).blame
    expected = facts["call_chain"][index]
    assert blame is not None and blame.frame_index == index and blame.named
    assert blame.function == f"{expected['module']}!{expected['function']}"
    assert [p.frame_index for p in blame.skipped] == list(range(index))


def test_blame_passes_over_the_c_runtime_on_a_real_sentry_dump():
    report = _report(real_dump("sentry-native/minidump.dmp"))
    blame = report.blame
    assert blame is not None and blame.module == "sentry_example.exe" and blame.frame_index == 1
    assert [(p.frame_index, p.role) for p in blame.skipped] == [(0, "C/C++ runtime")]
    assert report.crash.module.lower() == "vcruntime140d.dll" and report.crash.module_version == "14.42.34226.3"


def test_blame_of_a_recursion_that_overflowed_is_the_recursion_not_where_it_ran_out():
    """tf.nest.flatten nested too deep (the committed TensorFlow bundle): the last repetition
    ran out of stack in frames found partly by scanning, one of them in TensorFlow's own
    module. Those frames say nothing of the cause (signature rule 6 drops them): blame is
    the recursion, and says how many frames it passed over above it."""
    from tests.support.samples import PY_SAMPLES

    from dumpkit.sources.bundle import open_bundle
    from dumpkit.report.view.report import blame_line

    target = open_bundle(str(PY_SAMPLES / "tf_nest_flatten.dkb"))
    try:
        report = analyze(target, Options(), problems=target.soft_errors).report
    finally:
        target.close()
    crashing = next(t for t in report.threads if t.is_crashing)
    cycle = crashing.cycles[0]
    blame = report.blame
    assert blame is not None and blame.frame_index == cycle.first_frame
    assert blame.function == cycle.functions[0] and blame.module == "_pywrap_tensorflow_internal.pyd"
    assert blame.trust == "unwind_info"
    assert [p.frame_index for p in blame.skipped] == list(range(cycle.first_frame))
    assert {p.role for p in blame.skipped} == {"above the recursion"}
    line = "".join(span.text for span in blame_line(blame))
    assert f"the recursion (above it: {cycle.first_frame} frames where it ran out of stack)" in line


def test_blame_never_lands_outside_every_module():
    report = _report(real_dump("breakpad/exec_av_on_stack.dmp"))  # the IP is on the stack
    assert report.blame is None or report.blame.module is not None


# --------------------------------------------------------------------------- disassembly
@pytest.mark.parametrize("name", ["gp_misaligned_sse.dmp", "gp_wild_pointer.dmp"])
def test_the_faulting_instruction_is_the_one_the_manifest_records(name):
    facts = sample_facts(name)
    code = _report(sample_path(name)).crash.disassembly
    assert code is not None and code.start == "function_entry" and code.note is None
    fault = [i for i in code.instructions if i.faulting]
    # (the manifest's bytes come from objdump, which prints at most 7 a line)
    assert len(fault) == 1 and fault[0].bytes.startswith(facts["fault_instruction"]["bytes"].replace(" ", ""))
    assert fault[0].address == facts["rip"]
    before = [i for i in code.instructions if i.address < fault[0].address]
    # decoded from the function's entry: each instruction ends where the next begins
    chain = before + fault
    assert all(a.address + len(a.bytes) // 2 == b.address for a, b in zip(chain, chain[1:]))


def test_a_fault_on_a_functions_first_instruction_has_nothing_before_it():
    code = _report(sample_path("null_deref.dmp")).crash.disassembly
    assert code.start == "function_entry" and code.instructions[0].faulting
    assert code.instructions[0].text == "mov rax, qword ptr [rcx + 0x10]"


def test_direct_calls_name_their_destination():
    code = _report(sample_path("recursion_cycle3.dmp")).crash.disassembly
    calls = [i for i in code.instructions if i.text.startswith("call 0x")]
    assert calls and calls[0].target_name == "opkernels.dll!reduce"


def test_an_execute_fault_decodes_nothing():
    code = _report(real_dump("breakpad/exec_av_on_stack.dmp")).crash.disassembly
    assert code is not None and code.instructions == () and "execute" in code.note


def test_without_a_function_entry_the_code_before_is_a_guess_that_says_so():
    code = _report(real_dump("breakpad/null_read_av.dmp")).crash.disassembly  # x86, no image
    assert code is not None and code.start == "guessed" and "may be wrong" in code.note
    assert sum(i.faulting for i in code.instructions) == 1


# --------------------------------------------------------------------------- process
def test_the_command_line_comes_from_the_peb_when_the_dump_holds_it():
    p = _report(real_dump("breakpad/tiny-exe-with-cet-xsave.dmp")).process
    assert p.name == "tiny.exe" and p.command_line == '"C:\\src\\crashpad\\tiny.exe" --v=1 --enable-logging=stderr'
    assert p.command_line_missing is None
    electron = _report(real_dump("node-minidump/windows.dmp")).process
    assert electron.name == "electron.exe" and electron.version == "1.4.3.0"
    assert electron.command_line.startswith(
        '"C:\\users\\kevin\\Downloads\\electron-v1.4.3-win32-x64\\electron.exe" --type=renderer'
    )


def test_a_minidump_without_the_peb_says_so():
    report = _report(sample_path("null_deref.dmp"))
    p = report.process
    assert p.name == "tfhost.exe" and p.command_line is None
    assert "no thread environment block" in p.command_line_missing
    assert report.crash.module == "opkernels.dll"


def test_with_no_code_bytes_at_the_ip_the_disassembly_says_so():
    code = _report(real_dump("breakpad/minidump2.dmp")).crash.disassembly  # no image, no code in the dump
    assert code is not None and code.instructions == () and "holds the code at the IP" in code.note


def test_a_stack_probe_without_unwind_data_is_decoded_from_its_symbol():
    """big_frame died in mingw's ___chkstk_ms, a leaf with no .pdata entry: its COFF symbol
    gives the entry, and the probe's touch of the next page is the faulting instruction."""
    report = _report(sample_path("big_frame.dmp"))
    code = report.crash.disassembly
    assert code.start == "symbol" and code.note is None
    fault = [i for i in code.instructions if i.faulting]
    assert len(fault) == 1 and fault[0].text == "or qword ptr [rcx], 0" and fault[0].address == report.crash.address
    chain = [i for i in code.instructions if i.address <= fault[0].address]
    assert len(chain) > 1 and all(a.address + len(a.bytes) // 2 == b.address for a, b in zip(chain, chain[1:]))


def test_a_python_recursion_is_named_without_folders_or_lines_from_its_first_member():
    from dumpkit.analysis.model import PythonCycle, PythonReport, PythonStatus, PythonThreadReport
    from dumpkit.analysis.signature import python_recursion

    def thread(tid, *cycles):
        return PythonThreadReport(tid, 4000, (), 0, cycles=cycles)

    # stack order (callee first), as the Python stack reader gives it; it ran out in `walk`
    big = PythonCycle(("walk (C:\\Users\\ana\\job.py:51)", "visit (C:\\Users\\ana\\job.py:57)"), 2, 1900, 0, 3799)
    small = PythonCycle(("helper (/srv/lib.py:3)",), 1, 10, 3800, 3809)
    report = PythonReport(PythonStatus.READ, "", threads=(thread(7, small, big), thread(9)))
    # the largest recursion, in call order from its alphabetically first member
    assert python_recursion(report, 7) == "visit (job.py) > walk (job.py)"
    # where the stack ran out does not change it
    turned = PythonCycle(tuple(reversed(big.functions)), 2, 1900, 0, 3799)
    assert (
        python_recursion(PythonReport(PythonStatus.READ, "", threads=(thread(7, turned),)), 7)
        == "visit (job.py) > walk (job.py)"
    )
    assert python_recursion(report, 9) is None  # a thread without a recursion
    assert python_recursion(report, 8) is None  # the crashing thread's Python stack is not in the dump
    assert python_recursion(None, 7) is None
