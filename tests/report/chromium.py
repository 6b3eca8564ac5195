"""Debian's headless Chromium, driven over the DevTools protocol on a pipe (no driver, no
download, no network): load a page at a given width, measure it, screenshot it.

Used by tests/report/test_html_pictures.py, and as a script that writes the screenshots
shown in the README:

    python tests/report/chromium.py      # docs/images/*.png from the sample dumps
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent.parent

# Everything that could reach a network or phone home is off; the machine has none and
# Chromium must not try.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-extensions",
    "--disable-default-apps",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
)


def chromium_path() -> Optional[str]:
    """The Chromium binary, or None: Debian's /usr/bin/chromium, or $DUMPKIT_CHROMIUM."""
    found = os.environ.get("DUMPKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return found if found and os.access(found, os.X_OK) else None


class ChromiumError(RuntimeError):
    pass


class Chromium:
    """One headless browser; `page(html_path, width)` loads a file and returns a Page.
    Messages are JSON, NUL-terminated, on fds 3 (to Chromium) and 4 (from it)."""

    def __init__(self, binary: str, timeout: float = 60.0) -> None:
        self._profile = tempfile.mkdtemp(prefix="dumpkit-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # the child expects its ends as fds 3 and 4
        fds = {3: to_child_r, 4: from_child_w}
        self._proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=lambda: _dup_to(fds),
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._timeout = timeout
        self._next_id = 0
        self._buffer = b""
        self._events: List[Dict[str, Any]] = []

    # -- protocol -------------------------------------------------------------------
    def _read_message(self) -> Dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_child], [], [], self._timeout)
            if not ready:
                raise ChromiumError(f"no answer from Chromium in {self._timeout:.0f} s")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise ChromiumError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: Optional[Dict[str, Any]] = None, session: Optional[str] = None) -> Any:
        self._next_id += 1
        msg: Dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def wait_event(self, method: str, session: str) -> Dict[str, Any]:
        for i, e in enumerate(self._events):
            if e.get("method") == method and e.get("sessionId") == session:
                return self._events.pop(i)
        while True:
            e = self._read_message()
            if e.get("method") == method and e.get("sessionId") == session:
                return e
            self._events.append(e)

    # -- pages ----------------------------------------------------------------------
    def page(self, path: Path, width: int, height: int = 900) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=session)
        self.send("Network.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        self.send("Page.navigate", {"url": Path(path).resolve().as_uri()}, session=session)
        self.wait_event("Page.loadEventFired", session)
        requests = [
            e["params"]["request"]["url"]
            for e in self._events
            if e.get("sessionId") == session and e.get("method") == "Network.requestWillBeSent"
        ]
        self._events = [e for e in self._events if e.get("sessionId") != session]
        return Page(self, session, target, width, tuple(requests))

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (ChromiumError, OSError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _dup_to(fds: Dict[int, int]) -> None:
    """In the child: the pipe ends onto fds 3 and 4 (via high copies, should an end
    already sit on 3 or 4)."""
    import fcntl

    high = {target_fd: fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for target_fd, fd in fds.items()}
    for target_fd, fd in high.items():
        os.dup2(fd, target_fd)


class Page:
    def __init__(self, browser: Chromium, session: str, target: str, width: int, requests: Tuple[str, ...]) -> None:
        self.browser = browser
        self.session = session
        self.target = target
        self.width = width
        self.requests = requests  # every URL the page asked for while loading (itself included)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (returned by value)."""
        result = self.browser.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=self.session
        )
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression[:60]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def screenshot(self, out: Path, clip_height: Optional[int] = None) -> Tuple[int, int]:
        """A PNG of the page (its full height, or its top `clip_height` pixels): (width, height)."""
        full = int(self.evaluate("document.documentElement.scrollHeight"))
        height = min(full, clip_height) if clip_height else full
        shot = self.browser.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1},
            },
            session=self.session,
        )
        Path(out).write_bytes(base64.b64decode(shot["data"]))
        return self.width, height

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})


# --------------------------------------------------------------------------- the README's screenshots

# (sample, what to show): "glance" = the verdict and the stack pictures, "page" = all of it
SCREENSHOTS = (("recursion_cycle3.dmp", "glance"), ("big_frame.dmp", "glance"), ("null_deref.dmp", "page"))
SHOT_WIDTH = 1100


def write_screenshots(out_dir: Path) -> List[Path]:
    """docs/images/<sample>.png: each report as Chromium draws it at SHOT_WIDTH px."""
    sys.path.insert(0, str(ROOT))
    from dumpkit.engine import Options, analyze
    from dumpkit.problems import Problems
    from dumpkit.report.html import render_html
    from dumpkit.sources.minidump import open_dump

    binary = chromium_path()
    if binary is None:
        raise SystemExit("chromium not installed (apt-get install chromium)")
    os.chdir(ROOT)  # the page names the dump by its path from the repository root
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp, Chromium(binary) as browser:
        for name, part in SCREENSHOTS:
            problems = Problems()  # the run's, as `dumpkit analyze` makes it
            target = open_dump(f"sample_dumps/{name}", problems)
            report = analyze(target, Options(image_paths=["sample_dumps/bin"]), problems=problems).report
            page_path = Path(tmp) / f"{name}.html"
            page_path.write_text(render_html(report), encoding="utf-8")
            page = browser.page(page_path, SHOT_WIDTH)
            # the glance ends where the Evidence heading starts
            end = page.evaluate(
                "(() => { const h = [...document.querySelectorAll('h2')].find(e => e.textContent === 'Evidence');"
                " return h ? Math.ceil(h.getBoundingClientRect().top + window.scrollY) - 8 : null })()"
            )
            out = out_dir / (name.split(".")[0] + ".png")
            page.screenshot(out, clip_height=end if part == "glance" and end else None)
            page.close()
            written.append(out)
    return written


if __name__ == "__main__":
    for path in write_screenshots(ROOT / "docs" / "images"):
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KiB")
