"""Delay-load failures (0xC06D007E, 0xC06D007F) on the real dumps of sample_dumps/endings:
python.org's CPython under Wine calling an extension module (gpuext.pyd, mingw-w64) whose
/DELAYLOAD CUDA DLLs are missing or too old. The truth is the folder's manifest: the
DelayLoadInfo as src/facts.py read it with its own minidump and PE readers, and the facts
the program printed before the call. The bundles (sample_dumps/bundles) hold the memory and
image pages the analysis reads, so the tests run on any machine."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from typing import Dict

import pytest

from dumpkit.analysis.delayload import delay_load_failure
from dumpkit.commands.inputs import open_target
from dumpkit.engine import Options, analyze
from dumpkit.target import Module
from tests.analysis.test_endings_dumps import BUNDLES, ENDINGS, report
from tests.support.samples import SAMPLES

DELAY_LOADS = sorted(name for name, fact in ENDINGS.items() if "delay_load" in fact)


def test_the_endings_folder_has_both_kinds_of_delay_load_failure():
    codes = {ENDINGS[name]["exception_code_hex"] for name in DELAY_LOADS}
    assert codes == {"0xC06D007E", "0xC06D007F"}


@pytest.mark.parametrize("name", DELAY_LOADS)
def test_the_verdict_names_the_dll_the_function_and_the_error_the_helper_recorded(name):
    fact = ENDINGS[name]
    truth, marker = fact["delay_load"], fact["marker"]
    r = report(name)
    assert r.verdict.kind == "delay_load" and r.verdict.confidence == "high"
    got = r.crash.delay_load
    assert got is not None
    assert (got.info_address, got.dll, got.function, got.last_error) == (
        truth["info_address"],
        truth["dll_name"],
        truth["procedure_name"],
        truth["dwLastError"],
    )
    assert got.importer == truth["importer"] and got.slot_address == truth["ppfn"]
    # what the program said it was about to call, and what it expected to be missing
    assert (got.dll, got.function) == (marker["dll"], marker["function"])
    assert got.dll in r.verdict.headline and got.function in r.verdict.headline
    assert "from Python through the extension module gpuext.pyd" in r.verdict.headline
    assert any(f"DelayLoadInfo, on thread {fact['crash_thread_tid']}'s stack" in e for e in r.verdict.evidence)


@pytest.mark.parametrize("name", DELAY_LOADS)
def test_the_caller_of_the_import_slot_is_blamed_and_starts_the_signature(name):
    """The frames above the call are the helper and its thunk, linked into gpuext.pyd: the
    blame and the signature start at the extension's function the Python code called."""
    fact, r = ENDINGS[name], report(name)
    got = r.crash.delay_load
    python_name = fact["marker"]["call"].split("(")[0].split(".")[-1]  # gpuext.cudnn_version() -> cudnn_version
    assert got.caller is not None and got.caller.startswith("gpuext.pyd!") and python_name in got.caller
    assert r.blame is not None and (r.blame.frame_index, r.blame.function) == (got.caller_frame, got.caller)
    assert {p.role for p in r.blame.skipped} == {"the delay-load helper"}
    # rule 11: the interpreter below the extension is one element, whatever the Python (3.10
    # nests two C frames per Python call, which read as a recursion) and the call's depth
    assert r.signature is not None and r.signature.frames == (got.caller, "python")


def test_a_missing_dll_is_grouped_by_its_name_and_told_where_loadlibrary_looks():
    r = report("delayload_dll_py312")
    assert r.signature.kind == "DELAYLOAD_MOD_NOT_FOUND(cudnn64_8.dll)"
    assert r.verdict.headline.startswith(
        "cudnn64_8.dll, delay-loaded by gpuext.pyd, could not be loaded (error 126: it, or a DLL it needs, was not "
        "found) when gpuext.pyd!gpuext_cudnn_version first called cudnnGetVersion"
    )
    assert r.crash.delay_load.loaded is None
    steps = " ".join(r.verdict.next_steps)
    assert "PATH" in steps and "os.add_dll_directory" in steps and "a DLL it needs" in steps


def test_a_missing_function_names_the_dll_that_was_loaded_instead():
    fact = ENDINGS["delayload_proc_py310"]["delay_load"]["hmodCur_module"]
    r = report("delayload_proc_py310")
    got = r.crash.delay_load
    assert (got.loaded, got.loaded_version) == (fact["path"], fact["file_version"])
    assert r.signature.kind == "DELAYLOAD_PROC_NOT_FOUND(cudart64_110.dll!cudaMallocAsync)"
    assert f"cudart64_110.dll (loaded from {fact['path']}) has no function cudaMallocAsync" in r.verdict.headline
    assert any(fact["path"] in s for s in r.verdict.next_steps)


def test_without_the_importers_image_the_names_are_said_to_be_there_and_not_made_up():
    """The raw dump alone (MiniDumpNormal: stacks, no image data): the DelayLoadInfo is
    read, the names it points to lie in gpuext.pyd's image, which is not at hand."""
    target, problems = open_target(str(SAMPLES / "endings" / "delayload_dll_py312.dmp.xz"))
    try:
        r = analyze(target, Options(use_recorded_paths=False), problems=problems).report
    finally:
        target.close()
    got = r.crash.delay_load
    assert r.verdict.kind == "delay_load" and r.verdict.confidence == "medium"
    assert got.dll is None and got.function is None and got.last_error == 126
    assert any("the DLL's name lies at gpuext.pyd+0x8324, in the image of gpuext.pyd" in u for u in got.unread)
    assert r.signature.kind == "DELAYLOAD_MOD_NOT_FOUND"
    assert "--image-path" in r.verdict.next_steps[0] and "gpuext.pyd" in r.verdict.next_steps[0]


def test_the_json_report_carries_the_delay_load_record(tmp_path):
    bundle = BUNDLES / "delayload_proc_py310.dkb"
    if not bundle.exists():
        pytest.skip(f"{bundle} is not here")
    out = subprocess.run(
        [sys.executable, "-m", "dumpkit", "analyze", str(bundle), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(out.stdout)
    d = doc["crash"]["delay_load"]
    assert doc["verdict"]["kind"] == "delay_load"
    assert d["dll"] == "cudart64_110.dll" and d["function"] == "cudaMallocAsync" and d["last_error"] == 127
    assert d["info_address"] == hex(ENDINGS["delayload_proc_py310"]["delay_load"]["info_address"])


@pytest.mark.parametrize(
    "code, name", [("0xC06D007E", "DELAYLOAD_MOD_NOT_FOUND"), ("-1066598273", "DELAYLOAD_PROC_NOT_FOUND")]
)
def test_explain_names_the_delay_load_codes(code, name):
    out = subprocess.run(
        [sys.executable, "-m", "dumpkit", "explain", code], capture_output=True, text=True, check=True
    ).stdout
    assert name in out.splitlines()[0] and "delay-loaded DLL" in out


# ------------------------------------------------------------------ the record's own checks
# The decoder over a DelayLoadInfo written as the helper writes it, for the shapes the two
# dumps do not have: a 32-bit process, an import by ordinal, a record that is not one.

_IMPORTER = Module(name="ext.pyd", path="C:\\ext.pyd", base=0x10000000, size=0x10000)


def _reader(memory: Dict[int, bytes]):
    def read(address: int, size: int) -> bytes:
        for start, data in memory.items():
            if start <= address < start + len(data):
                return data[address - start : address - start + size]
        return b""

    return read


def _module_at(address: int):
    return _IMPORTER if _IMPORTER.contains(address) else None


def test_a_32_bit_delay_load_info_imported_by_ordinal():
    info = struct.pack("<9I", 0x24, 0x10001000, 0x10002000, 0x10003000, 0, 42, 0, 0, 127)
    memory = {0x5000: info, 0x10003000: b"vendor.dll\0"}
    got = delay_load_failure((0x5000,), 4, _reader(memory), _module_at)
    assert (got.dll, got.function, got.ordinal, got.last_error) == ("vendor.dll", None, 42, 127)
    assert got.importer == "ext.pyd" and got.slot_address == 0x10002000 and not got.unread


def test_a_record_of_another_size_is_not_read_as_one():
    info = struct.pack("<I", 0x30) + bytes(0x44)
    got = delay_load_failure((0x5000,), 8, _reader({0x5000: info}), _module_at)
    assert got.dll is None and got.unread == (
        "the DelayLoadInfo at 0x5000 says its size is 0x30, not 0x48: not a delay-load helper's record, left unread",
    )


def test_an_exception_without_its_parameter_says_so():
    got = delay_load_failure((), 8, _reader({}), _module_at)
    assert got.info_address is None and got.unread == ("the exception has no parameter: no DelayLoadInfo to read",)
