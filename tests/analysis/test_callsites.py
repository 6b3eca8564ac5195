"""Call-site checks of recursion cycles, on the real sample dumps and on a forged copy.

The forged copy is recursion_one.dmp with every saved return address of `visit -> visit`
swapped for the return address of the other call `visit` makes (`call expand`): the walk
and the function identities stay the same (both addresses are inside `visit`, past its
prologue), so only the call-site check can tell that the chain is not real.
"""

from __future__ import annotations

import json
from pathlib import Path

import capstone
import pytest

from tests.support.samples import SAMPLE_BIN, run_cli, sample_path
from dumpkit.pe import PEImage


def _analyze(dump: Path) -> dict:
    r = run_cli("analyze", dump, "--image-path", SAMPLE_BIN, "--format", "json")
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


def _crash_cycle(report: dict) -> dict:
    crashing = next(t for t in report["threads"] if t["is_crashing"])
    assert crashing["cycles"], "no cycle found"
    return crashing["cycles"][0]


@pytest.mark.parametrize("name", ["recursion_one.dmp", "recursion_cycle3.dmp", "tree_free.dmp"])
def test_real_recursion_calls_are_confirmed(name):
    report = _analyze(sample_path(name))
    cycle = _crash_cycle(report)
    edges = cycle["call_edges"]
    assert len(edges) == cycle["period"]  # one call per member, the same at every repetition
    assert all(e["call"] == "direct" and e["confirmed"] is True for e in edges)
    # each caller -> callee pair is one the sources make (callee first in `functions`)
    members = cycle["functions"]
    for e in edges:
        i = members.index(e["callee"])
        assert e["caller"] == members[(i + 1) % len(members)]
    assert report["verdict"]["confidence"] == "high"
    assert any("lands on the next function's entry" in line for line in report["verdict"]["evidence"])


def _calls_in(image: PEImage, start_rva: int, end_rva: int):
    code = image.read_rva(start_rva, end_rva - start_rva)
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    for insn in md.disasm(code, start_rva):
        if insn.mnemonic == "call" and insn.bytes[0] == 0xE8:
            yield insn.address + insn.size, int(insn.op_str, 16)


def test_forged_recursion_fails_the_call_site_check(tmp_path):
    dump = sample_path("recursion_one.dmp")
    report = _analyze(dump)
    cycle = _crash_cycle(report)
    (edge,) = cycle["call_edges"]
    genuine_ret = int(edge["return_address"], 16)
    visit_entry = int(edge["target"], 16)

    # the other direct call inside visit: its return address is inside visit too
    mod = next(m for m in report["modules"] if m["name"] == "opkernels.dll")
    base = int(mod["base"], 16)
    image = PEImage.from_file(str(SAMPLE_BIN / "opkernels.dll"))
    fn = image.lookup_function(visit_entry - base)
    others = [(ret, tgt) for ret, tgt in _calls_in(image, fn.begin_rva, fn.end_rva) if tgt != fn.begin_rva]
    assert others, "visit has no second direct call to forge with"
    forged_ret, forged_target = base + others[0][0], base + others[0][1]

    data = dump.read_bytes()
    count = data.count(genuine_ret.to_bytes(8, "little"))
    assert count >= 1000  # the recursion's saved return addresses
    forged = tmp_path / "forged.dmp"
    forged.write_bytes(data.replace(genuine_ret.to_bytes(8, "little"), forged_ret.to_bytes(8, "little")))

    out = _analyze(forged)
    fcycle = _crash_cycle(out)
    assert fcycle["functions"] == cycle["functions"]  # the walk alone cannot tell
    assert fcycle["repetitions"] >= cycle["repetitions"] - 1
    bad = [e for e in fcycle["call_edges"] if e["confirmed"] is False]
    assert bad and int(bad[0]["target"], 16) == forged_target
    v = out["verdict"]
    assert v["kind"] == "recursion" and v["confidence"] == "medium"
    assert any("call-site check FAILED" in line and f"{forged_target:#x}" in line for line in v["evidence"])
    assert "ub <return address>" in v["next_steps"][0]
