"""Generate x86-64 GNU assembly for a DLL with N small functions, each with its own
SEH unwind data (`.seh_proc` / `.seh_endproc`), so the linked DLL's exception
directory (.pdata) holds one RUNTIME_FUNCTION per function.

    python gen_bigpdata.py N PARTS OUTDIR

writes OUTDIR/bigpdata_0.s .. bigpdata_{PARTS-1}.s (assembled in parallel, linked in
order: ld concatenates .text and .pdata in command-line order, so the table stays
sorted).

Most functions are leaves that allocate a frame and return; three prologue shapes
rotate so the unwind data is not all identical:
    A: sub $40,%rsp                       (UWOP_ALLOC_SMALL)
    B: push %rbx; sub $32,%rsp            (UWOP_PUSH_NONVOL + ALLOC_SMALL)
    C: push %rsi; push %rdi; sub $0x118,%rsp (two pushes + UWOP_ALLOC_LARGE)
Local labels (.L) keep the 1M functions out of the COFF symbol table.

CHAIN functions spread evenly over the table form the crash path: the exported
`bp_entry` calls chain 0, chain k calls chain k+1 (each with a real frame), and the
last one reads through a NULL pointer. A dump of that crash has a stack that passes
through the whole width of the table, so every frame needs a .pdata lookup in it.
"""

import os
import sys

CHAIN = 16


def chain_indices(n: int):
    return [((k + 1) * n) // (CHAIN + 1) for k in range(CHAIN)]


def leaf(i: int) -> str:
    lab = f".Lf{i}"
    shape = i % 3
    if shape == 0:
        body = "\tsubq\t$40, %rsp\n\t.seh_stackalloc\t40\n\t.seh_endprologue\n\taddq\t$40, %rsp\n\tret\n"
    elif shape == 1:
        body = (
            "\tpushq\t%rbx\n\t.seh_pushreg\t%rbx\n\tsubq\t$32, %rsp\n\t.seh_stackalloc\t32\n"
            "\t.seh_endprologue\n\taddq\t$32, %rsp\n\tpopq\t%rbx\n\tret\n"
        )
    else:
        body = (
            "\tpushq\t%rsi\n\t.seh_pushreg\t%rsi\n\tpushq\t%rdi\n\t.seh_pushreg\t%rdi\n"
            "\tsubq\t$280, %rsp\n\t.seh_stackalloc\t280\n\t.seh_endprologue\n"
            "\taddq\t$280, %rsp\n\tpopq\t%rdi\n\tpopq\t%rsi\n\tret\n"
        )
    return f"\t.seh_proc\t{lab}\n{lab}:\n{body}\t.seh_endproc\n"


def chain_fn(k: int, last: bool) -> str:
    name = f"bp_chain_{k}"
    if last:
        call = "\txorl\t%eax, %eax\n\tmovq\t16(%rax), %rax\n"  # NULL->field: AV reading 0x10
    else:
        call = f"\tcall\tbp_chain_{k + 1}\n"
    return (
        f"\t.globl\t{name}\n\t.seh_proc\t{name}\n{name}:\n"
        "\tpushq\t%rbx\n\t.seh_pushreg\t%rbx\n\tsubq\t$48, %rsp\n\t.seh_stackalloc\t48\n"
        "\t.seh_endprologue\n\tmovq\t%rcx, %rbx\n"
        f"{call}"
        "\taddq\t%rbx, %rax\n\taddq\t$48, %rsp\n\tpopq\t%rbx\n\tret\n\t.seh_endproc\n"
    )


DLLMAIN = (
    "\t.globl\tbp_dllmain\n\t.seh_proc\tbp_dllmain\nbp_dllmain:\n"
    "\t.seh_endprologue\n\tmovl\t$1, %eax\n\tret\n\t.seh_endproc\n"
)

ENTRY = (
    "\t.globl\tbp_entry\n\t.seh_proc\tbp_entry\nbp_entry:\n"
    "\tsubq\t$40, %rsp\n\t.seh_stackalloc\t40\n\t.seh_endprologue\n"
    "\tcall\tbp_chain_0\n\tnop\n\taddq\t$40, %rsp\n\tret\n\t.seh_endproc\n"
)


def main() -> None:
    n, parts, outdir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    os.makedirs(outdir, exist_ok=True)
    chain = {idx: k for k, idx in enumerate(chain_indices(n))}
    bounds = [(p * n) // parts for p in range(parts + 1)]
    for p in range(parts):
        out = []
        out.append("\t.text\n")
        if p == 0:
            out.append(DLLMAIN + ENTRY)
        for i in range(bounds[p], bounds[p + 1]):
            k = chain.get(i)
            out.append(leaf(i) if k is None else chain_fn(k, k == CHAIN - 1))
        if p == 0:
            out.append('\t.section .drectve\n\t.ascii " -export:bp_entry"\n')
        with open(os.path.join(outdir, f"bigpdata_{p}.s"), "w") as f:
            f.write("".join(out))


if __name__ == "__main__":
    main()
