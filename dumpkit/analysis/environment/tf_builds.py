"""TensorFlow's published, tested Windows GPU build configurations.

Source: tensorflow.org, "Build from source on Windows" -> "Tested build configurations" ->
"GPU" (https://www.tensorflow.org/install/source_windows#gpu; the page's source is
tensorflow/docs `site/en/install/source_windows.md`). Rows 2.0.0-2.5.0 and 1.x were read from
that file in the tensorflow/docs repository (commit bfde3c23); rows 2.6.0-2.10.0 are the
later revision of the same table as published on tensorflow.org and quoted verbatim by
several independent pages (they agree with each other).

The table stops at 2.10.0 on purpose: "TensorFlow 2.10 was the last TensorFlow release that
supported GPU on native-Windows. Starting with TensorFlow 2.11, you will need to install
TensorFlow in WSL2, or install tensorflow-cpu and, optionally, try the
TensorFlow-DirectML-Plugin" (tensorflow.org/install/pip, "Windows Native").

Values are as published, with one normalisation: the page writes CUDA "10", "9" and "8" for
10.0, 9.0 and 8.0 (what those wheels load: cudart64_100.dll, cudart64_90.dll,
cudart64_80.dll), stored here as "10.0", "9.0", "8.0". A cuDNN entry with a major version
only ("7", "6") means any minor of that major was accepted.

Data only: no logic beyond small lookups used by `dumpkit.analysis.environment`.
"""

from __future__ import annotations

from typing import Optional, Tuple
from dumpkit.records import record

SOURCE = "tensorflow.org/install/source_windows, Tested build configurations (Windows GPU)"

LAST_NATIVE_WINDOWS_GPU = (2, 10)  # TF 2.11+ has no CUDA build for native Windows


@record
class TFBuild:
    package: str  # as the table names it: "tensorflow_gpu"
    version: str  # "2.10.0"
    python: Tuple[str, str]  # oldest and newest tested Python, e.g. ("3.7", "3.10")
    compiler: str
    build_tools: str
    cudnn: str  # "8.1", or a major only ("7")
    cuda: str  # "11.2"

    @property
    def key(self) -> Tuple[int, int]:
        major, minor = self.version.split(".")[:2]
        return int(major), int(minor)

    @property
    def label(self) -> str:
        return f"{self.package}-{self.version}"


def _b(version: str, py: str, compiler: str, tools: str, cudnn: str, cuda: str) -> TFBuild:
    lo, _, hi = py.partition("-")
    return TFBuild("tensorflow_gpu", version, (lo, hi or lo), compiler, tools, cudnn, cuda)


# Newest first, as on the page.
WINDOWS_GPU_BUILDS: Tuple[TFBuild, ...] = (
    _b("2.10.0", "3.7-3.10", "MSVC 2019", "Bazel 5.1.1", "8.1", "11.2"),
    _b("2.9.0", "3.7-3.10", "MSVC 2019", "Bazel 5.0.0", "8.1", "11.2"),
    _b("2.8.0", "3.7-3.10", "MSVC 2019", "Bazel 4.2.1", "8.1", "11.2"),
    _b("2.7.0", "3.7-3.9", "MSVC 2019", "Bazel 3.7.2", "8.1", "11.2"),
    _b("2.6.0", "3.6-3.9", "MSVC 2019", "Bazel 3.7.2", "8.1", "11.2"),
    _b("2.5.0", "3.6-3.9", "MSVC 2019", "Bazel 3.7.2", "8.1", "11.2"),
    _b("2.4.0", "3.6-3.8", "MSVC 2019", "Bazel 3.1.0", "8.0", "11.0"),
    _b("2.3.0", "3.5-3.8", "MSVC 2019", "Bazel 3.1.0", "7.6", "10.1"),
    _b("2.2.0", "3.5-3.8", "MSVC 2019", "Bazel 2.0.0", "7.6", "10.1"),
    _b("2.1.0", "3.5-3.7", "MSVC 2019", "Bazel 0.27.1-0.29.1", "7.6", "10.1"),
    _b("2.0.0", "3.5-3.7", "MSVC 2017", "Bazel 0.26.1", "7.4", "10.0"),
    _b("1.15.0", "3.5-3.7", "MSVC 2017", "Bazel 0.26.1", "7.4", "10.0"),
    _b("1.14.0", "3.5-3.7", "MSVC 2017", "Bazel 0.24.1-0.25.2", "7.4", "10.0"),
    _b("1.13.0", "3.5-3.7", "MSVC 2015 update 3", "Bazel 0.19.0-0.21.0", "7.4", "10.0"),
    _b("1.12.0", "3.5-3.6", "MSVC 2015 update 3", "Bazel 0.15.0", "7.2", "9.0"),
    _b("1.11.0", "3.5-3.6", "MSVC 2015 update 3", "Bazel 0.15.0", "7", "9.0"),
    _b("1.10.0", "3.5-3.6", "MSVC 2015 update 3", "Cmake v3.6.3", "7", "9.0"),
    _b("1.9.0", "3.5-3.6", "MSVC 2015 update 3", "Cmake v3.6.3", "7", "9.0"),
    _b("1.8.0", "3.5-3.6", "MSVC 2015 update 3", "Cmake v3.6.3", "7", "9.0"),
    _b("1.7.0", "3.5-3.6", "MSVC 2015 update 3", "Cmake v3.6.3", "7", "9.0"),
    _b("1.6.0", "3.5-3.6", "MSVC 2015 update 3", "Cmake v3.6.3", "7", "9.0"),
    _b("1.5.0", "3.5-3.6", "MSVC 2015 update 3", "Cmake v3.6.3", "7", "9.0"),
    _b("1.4.0", "3.5-3.6", "MSVC 2015 update 3", "Cmake v3.6.3", "6", "8.0"),
    _b("1.3.0", "3.5-3.6", "MSVC 2015 update 3", "Cmake v3.6.3", "6", "8.0"),
    _b("1.2.0", "3.5-3.6", "MSVC 2015 update 3", "Cmake v3.6.3", "5.1", "8.0"),
    _b("1.1.0", "3.5", "MSVC 2015 update 3", "Cmake v3.6.3", "5.1", "8.0"),
    _b("1.0.0", "3.5", "MSVC 2015 update 3", "Cmake v3.6.3", "5.1", "8.0"),
)


def build_for(major: int, minor: int) -> Optional[TFBuild]:
    """The tested row for TensorFlow major.minor (patch releases share their .0 row)."""
    for b in WINDOWS_GPU_BUILDS:
        if b.key == (major, minor):
            return b
    return None


def cudart_dll_tag(cuda: str) -> str:
    """The digits in the runtime DLL name a build of this CUDA version loads:
    10.1 -> "101" (cudart64_101.dll), 9.0 -> "90"; every CUDA 11.x ships and loads
    cudart64_110.dll (NVIDIA kept the 11.0 name for minor-version compatibility); from
    CUDA 12 the name carries the major only (cudart64_12.dll)."""
    major, _, minor = cuda.partition(".")
    if int(major) >= 12:
        return major
    if int(major) == 11:
        return "110"
    return f"{major}{minor or '0'}"
