"""Genuine CPython 3.12 and 3.13 with dumpkit installed, as a user has them, for `!tfstack`
on the engine route (tfstack.dll hosting the Python; tests/windbg_host/test_engine_route.py).

Built on the Wine lanes' environment (tests/support/wine: Wine, its prefix, the pykd
wheel's dbgeng.dll and a CPython 3.8 with dumpkit's Windows dependencies unpacked) from
../shared/winpython's python.org embeddable builds, into the lanes' cache (never the work
tree), once per input:
- 3.12 as python.org's embeddable distribution is used: its python312._pth names
  `Lib\\site-packages` and `import site` (tfstack.dll must then leave the home unset, or
  the ._pth would be ignored);
- 3.13 laid out as python.org's installer lays it out (the standard library unzipped into
  `Lib`, the extension modules in `DLLs`, no ._pth), so tfstack.dll names its home;
- in each `Lib\\site-packages`: dumpkit's dependencies (the 3.8 environment's wheels, all
  pure Python or version-independent like capstone's; pykd left out: it exists for 3.9 at
  most) and dumpkit as `pip install -e` leaves it: a `dumpkit-<version>.dist-info` and a
  `.pth` naming this checkout, so what runs is the code under test.

`python -m tests.support.wine.pythons` builds (or finds) them and prints where.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

from tests.support import wine as lane

HERE = Path(__file__).resolve()
SHARED = lane.ROOT.parent / "shared" / "winpython"
VERSIONS = ("3.12", "3.13")
LAYOUTS = {"3.12": "embeddable", "3.13": "installation"}
# the extension modules and their DLLs an installation keeps in DLLs\ (python.exe,
# python3X.dll, python3.dll and the VC runtime stay at the top)
_TOP = ("python.exe", "pythonw.exe", "python3.dll", "vcruntime140.dll", "vcruntime140_1.dll", "LICENSE.txt")


@dataclass(frozen=True)
class Installed:
    version: str
    home: Path  # python.exe's folder: what DUMPKIT_PYTHON or InstallPath names
    layout: str  # "embeddable" or "installation"

    @property
    def minor(self) -> int:
        return int(self.version.split(".")[1])


def _key(env: lane.Env) -> str:
    h = hashlib.sha256()
    for part in (
        env.root.name.encode(),
        (SHARED / "SHA256SUMS.embed").read_bytes(),
        str(lane.ROOT).encode(),
        HERE.read_bytes(),
    ):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def build(env: lane.Env, log=print) -> Dict[str, Installed]:
    """version -> the built Python, built into the cache when not there yet."""
    for version in VERSIONS:
        if not (SHARED / f"cpython-{version}-amd64" / f"python3{version.split('.')[1]}.dll").is_file():
            raise lane.Unavailable(f"no CPython {version} in {SHARED} (../shared/winpython)")
    root = env.root.parent / f"engine-pythons-{_key(env)}"
    if not (root / "ready").is_file():
        work = Path(tempfile.mkdtemp(prefix=f"{root.name}.build-", dir=env.root.parent))
        try:
            log(f"engine-route Pythons: building {root}")
            for version in VERSIONS:
                _make(env, version, work / _folder(version))
            lane.publish(work, root, "ok\n")
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
    return {v: Installed(v, root / _folder(v), LAYOUTS[v]) for v in VERSIONS}


def _folder(version: str) -> str:
    return "py3" + version.split(".")[1]


def _make(env: lane.Env, version: str, dest: Path) -> None:
    minor = version.split(".")[1]
    shutil.copytree(SHARED / f"cpython-{version}-amd64", dest)
    for path in dest.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)  # ../shared is read-only
    site = dest / "Lib" / "site-packages"
    site.mkdir(parents=True)
    if LAYOUTS[version] == "embeddable":
        pth = ["python3%s.zip" % minor, ".", "Lib\\site-packages", "import site"]
        (dest / f"python3{minor}._pth").write_text("\r\n".join(pth) + "\r\n")
    else:
        with zipfile.ZipFile(dest / f"python3{minor}.zip") as z:
            z.extractall(dest / "Lib")
        (dest / f"python3{minor}.zip").unlink()
        (dest / f"python3{minor}._pth").unlink()
        dlls = dest / "DLLs"
        dlls.mkdir()
        for path in list(dest.iterdir()):
            keep = path.name in _TOP or path.name.lower() == f"python3{minor}.dll" or path.is_dir()
            if not keep and path.suffix.lower() in (".pyd", ".dll", ".cat"):
                path.rename(dlls / path.name)
    deps = env.python_dir / "Lib" / "site-packages"
    for item in deps.iterdir():
        if item.name.lower().startswith("pykd"):
            continue
        (shutil.copytree if item.is_dir() else shutil.copy2)(item, site / item.name)
    _install_editable(site)


def _install_editable(site: Path) -> None:
    """What `pip install -e <checkout>` leaves behind, reduced to what matters here."""
    sys.path.insert(0, str(lane.ROOT))
    import dumpkit

    info = site / f"dumpkit-{dumpkit.__version__}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: dumpkit\nVersion: {dumpkit.__version__}\n")
    (info / "INSTALLER").write_text("pip\n")
    (site / "__editable__.dumpkit.pth").write_text(lane.windows_path(lane.ROOT) + "\n")


def main() -> None:
    try:
        built = build(lane.build())
    except lane.Unavailable as e:
        print(f"engine-route Pythons unavailable: {e}")
        sys.exit(2)
    for version, python in built.items():
        print(version, python.layout, python.home)


if __name__ == "__main__":
    main()
