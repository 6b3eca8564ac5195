"""The CPU: its name, and whether it has AVX / AVX2 / AVX-512, from what the dump records
(PF_* processor-feature bits, the XSTATE mask the OS enabled, CPUID on x86 dumps)."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from dumpkit.target import PROCESSOR_ARCHITECTURE_INTEL, X86_FAMILY, SystemInfo


# IsProcessorFeaturePresent numbers (winnt.h; learn.microsoft.com "IsProcessorFeaturePresent
# function"). On AMD64 dumps, MINIDUMP_SYSTEM_INFO.Cpu.OtherCpuInfo.ProcessorFeatures[0] has
# bit N set when IsProcessorFeaturePresent(N) was true for the writer (dbghelp, and Wine's
# dbghelp, loop over the bits). x86 dumps record CPUID instead (vendor, leaf 1 EAX and EDX).
PF_SSSE3 = 36


PF_SSE4_1 = 37


PF_SSE4_2 = 38


PF_AVX = 39


PF_AVX2 = 40


PF_AVX512F = 41


PF_ERMS = 42


# MISC_INFO_5 XStateData.EnabledFeatures bits (XSTATE_* in winnt.h).
XSTATE_LEGACY_FP = 0


XSTATE_LEGACY_SSE = 1


XSTATE_AVX = 2  # "GSSE": the upper halves of the YMM registers


XSTATE_AVX512_MASK = 0b111 << 5  # opmask, ZMM_Hi256, Hi16_ZMM


FEATURES = ("AVX", "AVX2", "AVX512F")


_PF_BIT = {"AVX": PF_AVX, "AVX2": PF_AVX2, "AVX512F": PF_AVX512F}


SRC_PF = "PF_* processor-feature bits (IsProcessorFeaturePresent)"


SRC_XSTATE = "XSTATE mask in MiscInfo (state the OS enabled)"


def cpu_features(
    system: Optional[SystemInfo], xstate: Optional[int]
) -> Tuple[Dict[str, Optional[bool]], Dict[str, str], str]:
    """(feature -> True/False/None, feature -> source sentence, one-line summary).

    Rules, strongest first:
    * AMD64 PF bits. A set bit is proof. A clear bit is proof of absence only when the
      writer is known to fill that part of the mask: Windows sets PF 36..41 (SSSE3 ..
      AVX512F) together from Windows 10 2004 on, and leaves all of them clear before (the
      real 14393/17134 dumps here have Haswell/Broadwell CPUs, which have AVX2, and no bit
      36+). So "no AVX bit" means "no AVX" only when SSSE3/SSE4.x bits are present. Wine 8.0
      fills 36..40 but never 41 (newer Wine fills 41 and 42 together), so under Wine a
      clear AVX512F bit counts only when the ERMS bit (42) shows the newer code wrote it.
    * XSTATE EnabledFeatures (MISC_INFO_5): AVX state enabled => the CPU has AVX and the OS
      uses it; bits 5-7 enabled => AVX-512 (every AVX-512 CPU has AVX512F). A clear bit
      proves nothing: breakpad's tiny-exe-with-cet-xsave.dmp (a Tiger Lake CPU, which has
      AVX) records 0x8000000000000803, evidently the features of the captured context only.
      The mask never says anything about AVX2.
    * x86 dumps record CPUID leaf 1 EDX only; AVX is a leaf 1 ECX bit (and AVX2/AVX512F are
      leaf 7), so they cannot show any of the three.
    """
    feats: Dict[str, Optional[bool]] = dict.fromkeys(FEATURES)
    sources: Dict[str, str] = {}
    if system is None:
        return feats, sources, "no SystemInfo stream in the dump"
    reason_unknown = "nothing in the dump shows it"
    if system.is_x64 and system.cpu_vendor is None and system.processor_features[0]:
        pf = system.processor_features[0]
        wine = system.wine_version is not None
        knows_block = bool(pf & ((1 << PF_SSSE3) | (1 << PF_SSE4_1) | (1 << PF_SSE4_2)))
        knows_512 = bool(pf & (1 << PF_ERMS)) if wine else knows_block
        for name, bit in _PF_BIT.items():
            if pf >> bit & 1:
                feats[name] = True
                sources[name] = f"{SRC_PF}: bit {bit} set"
            elif knows_512 if name == "AVX512F" else knows_block:
                feats[name] = False
                sources[name] = f"{SRC_PF}: bit {bit} clear while the writer fills bits 36+"
        if not knows_block:
            reason_unknown = (
                "the PF_* mask has no SSSE3/SSE4 bits (36-38), so this writer/OS "
                "does not report PF 39-41 and a clear bit means nothing"
            )
    elif system.processor_architecture == PROCESSOR_ARCHITECTURE_INTEL and system.cpu_vendor:
        reason_unknown = (
            "x86 dump: it records CPUID leaf 1 EDX only, and AVX is in ECX "
            "(AVX2/AVX-512 in leaf 7), which minidumps do not record"
        )
    if xstate is not None and xstate & 0b11 == 0b11:  # x87 and SSE are always on: sane mask
        if feats["AVX"] is None and xstate >> XSTATE_AVX & 1:
            feats["AVX"] = True
            sources["AVX"] = f"{SRC_XSTATE}: AVX state bit 2 set (0x{xstate:x})"
        if feats["AVX512F"] is None and xstate & XSTATE_AVX512_MASK == XSTATE_AVX512_MASK:
            feats["AVX512F"] = True
            sources["AVX512F"] = f"{SRC_XSTATE}: AVX-512 state bits 5-7 set (0x{xstate:x})"
    for name in FEATURES:
        if feats[name] is None:
            sources.setdefault(name, f"unknown: {reason_unknown}")
    by_source: Dict[str, List[str]] = {}
    for n in FEATURES:
        by_source.setdefault(sources[n].split(":")[0] if feats[n] is not None else "", []).append(n)
    unknown = by_source.pop("", [])
    if not by_source:
        summary = f"unknown: {reason_unknown}"
    elif not unknown and len(by_source) == 1:
        summary = next(iter(by_source))
    else:
        summary = "; ".join(f"{src} for {', '.join(ns)}" for src, ns in by_source.items())
        if unknown:
            summary += f"; {', '.join(unknown)} unknown"
    return feats, sources, summary


# Families only AMD (or Hygon, 0x18) uses today; Intel uses 6 and 15 and has announced
# others, so no vendor is inferred from any other family.
_AMD_FAMILIES = {
    0x15: "Bulldozer family",
    0x16: "Jaguar family",
    0x17: "Zen/Zen+/Zen 2",
    0x19: "Zen 3/Zen 4",
    0x1A: "Zen 5",
}


def cpu_name(system: SystemInfo) -> str:
    n = system.number_of_processors
    procs = f", {n} logical processor{'s' if n != 1 else ''}" if n else ""
    if system.cpu_vendor and system.cpuid_version:
        fam, model, step = system.cpu_family, system.cpu_model, system.cpu_stepping
        return (
            f"{system.cpu_vendor} family {fam} model {model} stepping {step} (CPUID 0x{system.cpuid_version:x}){procs}"
        )
    if system.processor_architecture in X86_FAMILY and system.processor_level:
        # Windows' ProcessorLevel is the (display) family, ProcessorRevision model<<8|stepping.
        fam = system.processor_level
        model, step = system.processor_revision >> 8, system.processor_revision & 0xFF
        if fam in _AMD_FAMILIES:
            vendor = (
                f"AMD {_AMD_FAMILIES[fam]}: the dump does not record the vendor, but only AMD uses family 0x{fam:x}"
            )
        else:
            vendor = "vendor not recorded"
        return f"{system.arch_name}, family {fam} model {model} stepping {step} ({vendor}){procs}"
    return f"{system.arch_name}{procs}"
