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
