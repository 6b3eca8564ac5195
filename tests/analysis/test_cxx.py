"""Thrown C++ type from MSVC's ThrowInfo chain. No real dump here has a C++ exception
(mingw's g++ throws through libgcc, not 0xE06D7363), so the structures are laid out in
memory by hand exactly as MSVC's compiler emits them."""

import struct

from dumpkit.analysis.cxx import thrown_types, undecorate_type


def test_thrown_type_follows_throwinfo_to_the_type_descriptors():
    base = 0x7FF700000000
    mem = {}

    def put(va, data):
        for i, b in enumerate(data):
            mem[va + i] = b

    # ThrowInfo at RVA 0x1000: attributes, pmfnUnwind, pForwardCompat, pCatchableTypeArray
    put(base + 0x1000, struct.pack("<IiiI", 0, 0, 0, 0x1100))
    put(base + 0x1100, struct.pack("<iII", 2, 0x1200, 0x1300))  # two catchable types
    put(base + 0x1200, struct.pack("<II", 0, 0x2000))  # properties, pType
    put(base + 0x1300, struct.pack("<II", 0, 0x2100))
    put(base + 0x2000 + 16, b".?AVruntime_error@std@@\0")
    put(base + 0x2100 + 16, b".?AVexception@std@@\0")

    def read(va, n):
        out = bytearray()
        for i in range(n):
            if va + i not in mem:
                break
            out.append(mem[va + i])
        return bytes(out)

    params = (0x19930520, 0x12345678, base + 0x1000, base)
    assert thrown_types(params, read) == ["std::runtime_error", "std::exception"]
    assert thrown_types(params, lambda va, n: b"") == []
    assert thrown_types((0x1, 0, 0, 0), read) == []


def test_undecorate():
    assert undecorate_type(".?AVbad_alloc@std@@") == "std::bad_alloc"
    assert undecorate_type(".?AUStatus@tensorflow@@") == "tensorflow::Status"
    assert (
        undecorate_type(".?AV?$basic_string@DU?$char_traits@D@std@@@std@@")
        == ".?AV?$basic_string@DU?$char_traits@D@std@@@std@@"
    )


def test_a_type_the_dump_cannot_show_is_named_by_the_module_its_throwinfo_lies_in(tmp_path):
    """Issue #32 item 8: a C++ exception whose ThrowInfo lies in a runtime DLL whose data the
    dump does not hold (msvcp140.dll throwing std::out_of_range, say) was 'of a type the dump
    does not show'. Exception parameter 2 is the ThrowInfo's address: the module holding it
    defines the type, and its image would name it. No real dump here has such a throw (the
    public ones hold none, mingw throws through libgcc), so this one is built."""
    import json

    from tests.support.samples import run_cli
    from tests.support.synth_dump import SynthDump, x64_context

    runtime = 0x7FFB10000000
    app = 0x140000000
    d = SynthDump()
    stack = d.memory(0x10000, bytes(0x1000))
    rip = runtime + 0x3F00  # the throw machinery; nothing of it is in the dump
    d.thread(7, context=x64_context(rip=rip, rsp=0x10800), stack=stack)
    d.module("C:\\app\\app.exe", app, 0x10000)
    d.module("C:\\Windows\\System32\\msvcp140.dll", runtime, 0x90000)
    params = (0x19930520, 0x10900, runtime + 0x5C2A8, runtime)
    d.exception(7, 0xE06D7363, rip, params=params, context=x64_context(rip=rip, rsp=0x10800))
    path = d.build().write(tmp_path / "cxx_runtime_throw.dmp")
    r = run_cli("analyze", path, "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert doc["crash"]["cxx_types"] == [] and doc["crash"]["cxx_throw_info"] == "msvcp140.dll+0x5c2a8"
    v = doc["verdict"]
    assert v["kind"] == "cxx_exception"
    assert v["headline"].startswith("Unhandled C++ exception of a type msvcp140.dll defines")
    assert any("msvcp140.dll+0x5c2a8" in e for e in v["evidence"])
    assert "msvcp140.dll's image" in v["next_steps"][0]
