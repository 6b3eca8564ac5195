"""Whether the loaded CUDA / cuDNN / Python fit TensorFlow's tested Windows GPU builds
(`tf_builds`), in sentences a bug report can quote."""

from __future__ import annotations

import re
from typing import List, Optional, Sequence, Tuple

from dumpkit.analysis.environment import tf_builds
from dumpkit.analysis.environment.cuda import CudaStack


def _ver_key(v: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _runs(builds: Sequence[tf_builds.TFBuild]) -> str:
    """Table rows -> "2.5-2.10" style ranges over adjacent rows of the published table."""
    order = list(tf_builds.WINDOWS_GPU_BUILDS)[::-1]  # oldest first
    idx = sorted(order.index(b) for b in builds)
    parts: List[str] = []

    def short(build: tf_builds.TFBuild) -> str:
        return ".".join(build.version.split(".")[:2])

    # runs of consecutive indices: [start, prev]
    start = prev = idx[0] if idx else 0
    for i in idx[1:] + [-1]:
        if i != prev + 1:
            a, b = order[start], order[prev]
            parts.append(short(a) if start == prev else f"{short(a)}-{short(b)}")
            start = i
        prev = i
    return ", ".join(parts) if idx else ""


def _cudnn_fits(table: str, loaded: str) -> Optional[bool]:
    """Table "8.1" accepts 8.1.x; table "7" accepts any 7.x. None when the loaded version is
    too coarse to tell (a major from the file name, "7", against a table "7.6")."""
    t, have = table.split("."), loaded.split(".")
    n = min(len(t), len(have))
    if have[:n] != t[:n]:
        return False
    return True if len(have) >= len(t) else None


def compatibility(cuda: CudaStack, tf_version: Optional[str], python: Optional[str], wine: bool) -> Tuple[str, ...]:
    out: List[str] = []
    rows = tf_builds.WINDOWS_GPU_BUILDS
    src = f"({tf_builds.SOURCE})"
    have_gpu = cuda.runtime_tag is not None or cuda.cudnn_tag is not None
    several = cuda.several
    if several:  # no one pair to check: the runtime collision names each copy and its package
        out.append(
            "Several CUDA runtimes or cuDNN majors are loaded, so no one CUDA / cuDNN pair is checked against "
            f"TensorFlow's tested configurations: which pair a library uses depends on the library {src}."
        )
    # 1. Which TF versions the loaded CUDA / cuDNN fit.
    if cuda.runtime and cuda.cudnn and not several:
        exact = [b for b in rows if b.cuda == cuda.runtime and _cudnn_fits(b.cudnn, cuda.cudnn)]
        maybe = [b for b in rows if b.cuda == cuda.runtime and _cudnn_fits(b.cudnn, cuda.cudnn) is None]
        if exact:
            out.append(
                f"CUDA {cuda.runtime} with cuDNN {cuda.cudnn} is the tested Windows GPU "
                f"configuration of TensorFlow {_runs(exact)} {src}."
            )
        elif maybe:
            out.append(
                f"CUDA {cuda.runtime} with cuDNN {cuda.cudnn}.x is the tested Windows GPU "
                f"configuration of TensorFlow {_runs(maybe)} if the cuDNN is {maybe[0].cudnn} "
                f"(only its major version is known) {src}."
            )
        else:
            by_cuda = [b for b in rows if b.cuda == cuda.runtime]
            by_cudnn = [b for b in rows if _cudnn_fits(b.cudnn, cuda.cudnn) is not False]
            parts = [
                f"CUDA {cuda.runtime} with cuDNN {cuda.cudnn} is not a tested Windows GPU configuration of any TensorFlow release"
            ]
            if by_cuda:
                parts.append(
                    f"CUDA {cuda.runtime} was tested with TensorFlow {_runs(by_cuda)} (cuDNN {by_cuda[0].cudnn})"
                )
            if by_cudnn:
                parts.append(f"cuDNN {cuda.cudnn} fits TensorFlow {_runs(by_cudnn)} (CUDA {by_cudnn[0].cuda})")
            out.append("; ".join(parts) + f" {src}.")
    elif cuda.runtime and not cuda.cudnn_tag and not several:
        by_cuda = [b for b in rows if b.cuda == cuda.runtime]
        out.append(
            f"CUDA {cuda.runtime} is loaded without a cuDNN DLL"
            + (
                f"; TensorFlow {_runs(by_cuda)} was tested with CUDA {cuda.runtime} and cuDNN {by_cuda[0].cudnn} {src}."
                if by_cuda
                else f"; no TensorFlow release lists CUDA {cuda.runtime} for Windows {src}."
            )
        )
    # 2. Which TF builds can load DLLs of these names at all.
    if cuda.runtime_tag and cuda.cudnn_tag and not several:
        loaders = [
            b
            for b in rows
            if tf_builds.cudart_dll_tag(b.cuda) == cuda.runtime_tag and b.cudnn.split(".")[0] == cuda.cudnn_tag
        ]
        if loaders:
            out.append(
                f"By DLL name (cudart64_{cuda.runtime_tag}.dll, cudnn64_{cuda.cudnn_tag}.dll) "
                f"these are what TensorFlow {_runs(loaders)} Windows GPU builds load."
            )
        else:
            out.append(
                f"No native-Windows TensorFlow GPU build loads cudart64_{cuda.runtime_tag}.dll "
                f"together with cudnn64_{cuda.cudnn_tag}.dll; TensorFlow itself did not load this pair."
            )
    # 3. The loaded TF version against its own tested pair and Python range.
    tf_key = _ver_key(tf_version)[:2] if tf_version else None
    row = tf_builds.build_for(*tf_key) if tf_key and len(tf_key) == 2 else None
    if tf_version and row:
        if (cuda.runtime or cuda.cudnn) and not several:
            ok_cuda = cuda.runtime == row.cuda if cuda.runtime else None
            ok_cudnn = _cudnn_fits(row.cudnn, cuda.cudnn) if cuda.cudnn else None
            loaded = ", ".join(
                x
                for x in (f"CUDA {cuda.runtime}" if cuda.runtime else "", f"cuDNN {cuda.cudnn}" if cuda.cudnn else "")
                if x
            )
            if ok_cuda is False or ok_cudnn is False:
                verdict = "do not match"
            elif ok_cudnn is None and cuda.cudnn:
                verdict = "match as far as known (the cuDNN minor version is unknown)"
            else:
                verdict = "match"
            out.append(
                f"TensorFlow {tf_version} was tested on Windows with CUDA {row.cuda} and "
                f"cuDNN {row.cudnn}; the loaded {loaded} {verdict}."
            )
        if python:
            lo, hi = row.python
            pv = _ver_key(python)[:2]
            inside = _ver_key(lo)[:2] <= pv <= _ver_key(hi)[:2]
            out.append(
                f"Python {'.'.join(map(str, pv))} is {'within' if inside else 'OUTSIDE'} "
                f"TensorFlow {'.'.join(map(str, tf_key or ()))}'s tested Python range "
                f"{lo}-{hi}" + ("." if inside else "; that combination was never tested.")
            )
    elif tf_version and tf_key and tf_key > tf_builds.LAST_NATIVE_WINDOWS_GPU:
        if have_gpu:
            out.append(
                f"TensorFlow {tf_version} is loaded together with CUDA DLLs, but TensorFlow "
                f"2.11 and later have no GPU support on native Windows (2.10 was the last); "
                f"TensorFlow does not use these DLLs here. GPU needs WSL2 (or the "
                f"TensorFlow-DirectML-Plugin)" + (" - and this process ran under Wine." if wine else ".")
            )
    # 4. Driver against runtime, when the driver's own strings say what CUDA it supports.
    if cuda.driver_cuda and cuda.runtime:
        if _ver_key(cuda.driver_cuda) >= _ver_key(cuda.runtime):
            out.append(
                f"The NVIDIA driver{f' {cuda.driver}' if cuda.driver else ''} supports CUDA "
                f"up to {cuda.driver_cuda}, enough for the CUDA {cuda.runtime} runtime."
            )
        else:
            out.append(
                f"The NVIDIA driver{f' {cuda.driver}' if cuda.driver else ''} supports CUDA "
                f"only up to {cuda.driver_cuda}, older than the CUDA {cuda.runtime} runtime: "
                f"CUDA calls fail with cudaErrorInsufficientDriver."
            )
    return tuple(out)
