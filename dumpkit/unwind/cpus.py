"""Which step walks which CPU, by the dump's PROCESSOR_ARCHITECTURE."""

from __future__ import annotations

from typing import Dict, Optional

from dumpkit.target import PROCESSOR_ARCHITECTURE_AMD64, PROCESSOR_ARCHITECTURE_INTEL, Target
from dumpkit.unwind.amd64 import Amd64Step
from dumpkit.unwind.walk import StepFactory
from dumpkit.unwind.x86 import X86Step

STEPS: Dict[int, StepFactory] = {PROCESSOR_ARCHITECTURE_AMD64: Amd64Step, PROCESSOR_ARCHITECTURE_INTEL: X86Step}


def step_for(target: Target) -> Optional[StepFactory]:
    """The step for the target's CPU (x64 when the dump does not say), or None when it
    is not one we walk."""
    arch = target.system.processor_architecture if target.system is not None else PROCESSOR_ARCHITECTURE_AMD64
    return STEPS.get(arch)
