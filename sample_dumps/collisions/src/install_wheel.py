"""Install Windows wheels into a scratch copy of python.org's embeddable CPython, as pip would.

pip is not run under Wine: each wheel is unzipped the way pip lays a wheel out on Windows,
`NAME.data/data/...` into the interpreter's folder (sys.prefix: where `msvc-runtime` puts
msvcp140.dll and `intel-openmp` puts Library\\bin\\libiomp5md.dll), `NAME.data/scripts/...`
into Scripts, `NAME.data/purelib|platlib/...` and everything else into Lib\\site-packages.
The `python3X._pth` of the copy gets `Lib\\site-packages` and `import site` (the embeddable
build ships with site disabled). `--target DIR` lays a wheel out as `pip install --target DIR`
does (package folders straight into DIR, no site change). Prints one JSON line per wheel
(name, version, file, sha256, the DLLs/.pyds it installed, relative to the folder, each
with its name inside the wheel) and
appends the same lines to FOLDER/.wheels.jsonl, which src/facts.py reads to say which file of
which wheel each module of a dump is.

Usage: install_wheel.py PYTHON_DIR WHEEL...  |  install_wheel.py --target DIR WHEEL...
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sys
import zipfile


def enable_site(prefix: str) -> None:
    for pth in glob.glob(os.path.join(prefix, "python3*._pth")):
        with open(pth, encoding="utf-8") as f:
            lines = [ln.rstrip("\r\n") for ln in f]
        lines = [ln for ln in lines if ln.strip() not in ("#import site", "import site")]
        if "Lib\\site-packages" not in lines:
            lines.append("Lib\\site-packages")
        lines.append("import site")
        with open(pth, "w", encoding="utf-8", newline="\r\n") as f:
            f.write("\n".join(lines) + "\n")


def install(prefix: str, wheel: str, target: bool = False) -> dict:
    site = prefix if target else os.path.join(prefix, "Lib", "site-packages")
    files = []
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith("/"):
                continue
            parts = name.split("/")
            if parts[0].endswith(".data") and len(parts) > 2:
                scheme, rest = parts[1], parts[2:]
                base = {"data": prefix, "scripts": os.path.join(prefix, "Scripts")}.get(scheme, site)
            else:
                rest, base = parts, site
            dest = os.path.join(base, *rest)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with z.open(name) as src, open(dest, "wb") as out:
                out.write(src.read())
            files.append((os.path.relpath(dest, prefix).replace(os.sep, "\\"), name))
    with open(wheel, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    base = os.path.basename(wheel)
    return {"wheel": base, "name": base.split("-")[0], "version": base.split("-")[1],
            "sha256": sha, "files": len(files),
            "pe_files": {p: member for p, member in sorted(files)
                         if p.lower().endswith((".dll", ".pyd"))}}


def main(argv: list) -> int:
    if len(argv) < 1:
        print(__doc__)
        return 2
    target = argv[0] == "--target"
    if target:
        argv = argv[1:]
    prefix = argv[0]
    os.makedirs(prefix, exist_ok=True)
    if not target:
        enable_site(prefix)
    for wheel in argv[1:]:
        line = json.dumps(install(prefix, wheel, target))
        print(line)
        with open(os.path.join(prefix, ".wheels.jsonl"), "a", encoding="utf-8") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
