"""Fixtures of the PE tests: the synthetic sample image (tests/support/synth_pe.py), read from a
file and from memory, and where the sample program binaries and the mingw-w64 tools are."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dumpkit.pe import PEImage

from tests.support.synth_pe import make_sample_image

REPO = Path(__file__).resolve().parent.parent.parent
SAMPLE_BIN = REPO / "sample_dumps" / "bin"
SAMPLE_FILES = sorted(SAMPLE_BIN.glob("*.exe")) + sorted(SAMPLE_BIN.glob("*.dll")) if SAMPLE_BIN.is_dir() else []
GCC = shutil.which("x86_64-w64-mingw32-gcc")
WINDRES = shutil.which("x86_64-w64-mingw32-windres")
OBJDUMP = shutil.which("x86_64-w64-mingw32-objdump")


@pytest.fixture(scope="module")
def sample():
    return make_sample_image()


@pytest.fixture(scope="module")
def sample_file(sample, tmp_path_factory):
    return sample.write(tmp_path_factory.mktemp("synth") / "synth.dll")


@pytest.fixture(params=["file", "memory"])
def img(request, sample, sample_file):
    """The sample image read from its file, then as a process maps it."""
    if request.param == "file":
        image = PEImage.from_file(sample_file)
    else:
        image = PEImage.from_memory(sample.reader(), sample.image_base)
    yield image
    image.close()
