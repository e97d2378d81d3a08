"""A minimal DevTools-protocol client for Debian's headless ``chromium`` over ``--remote-debugging-pipe``.

The pipe (fd 3 in, fd 4 out, NUL-terminated JSON) needs no port, so nothing listens on the
network; every wait is bounded by a deadline and the browser dies with the test. Used to load a
page, collect console errors, exceptions and requests, evaluate DOM checks and take a
screenshot. In CI (``CI=true``) a missing chromium fails; elsewhere the tests skip saying what
to install.
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--remote-debugging-pipe",
         "--window-size=1280,2000"]


def chromium_or_skip() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; .ci/run must apt-get install chromium")
        pytest.skip("headless Chromium not found: apt-get install chromium")
    return found


class Browser:
    """One headless Chromium, one page, driven over the DevTools pipe."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="ot-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire() -> None:  # runs in the child: fd 3 reads commands, fd 4 writes replies
            # Move both ends above 4 first (either may already be fd 3 or 4), then place them;
            # dup2 makes the copies inheritable, which os.pipe's ends are not.
            high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen([chromium_or_skip(), *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(f"{domain}.enable", session=True)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: bool = False) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)

    def load(self, url: str) -> None:
        """Navigate to ``url`` and wait for its load event; the events seen (errors, requests) start afresh."""
        self.events = []
        self.call("Page.navigate", {"url": url}, session=True)
        deadline = time.monotonic() + self.timeout
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            self.events.append(self._read_message(deadline))

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        return result["result"].get("value")

    def screenshot(self) -> bytes:
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        return base64.b64decode(data)

    def viewport(self, width: int, height: int = 900) -> None:
        """Lay the page out ``width`` CSS pixels wide (a phone below 600: touch, no scrollbars)."""
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}, session=True)

    def emulate(self, *, media: str = "", dark: bool = False) -> None:
        """Emulate a media type (``print``; "" for the screen) and the dark colour-scheme preference."""
        scheme = "dark" if dark else "light"
        self.call("Emulation.setEmulatedMedia",
                  {"media": media, "features": [{"name": "prefers-color-scheme", "value": scheme}]}, session=True)

    def full_screenshot(self, max_height: int = 6000) -> bytes:
        """The whole page (down to ``max_height`` pixels) as a PNG, at the current viewport's width."""
        width, height = self.evaluate("[document.documentElement.clientWidth, document.documentElement.scrollHeight]")
        clip = {"x": 0, "y": 0, "width": width, "height": min(height, max_height), "scale": 1}
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip},
                         session=True)["data"]
        return base64.b64decode(data)

    def errors(self) -> list[dict[str, Any]]:
        """Console errors, uncaught exceptions, error log entries and JavaScript dialogs seen so far."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown" or e["method"] == "Page.javascriptDialogOpening":
                out.append(e)
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(e)
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(e)
        return out

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self.profile, ignore_errors=True)


def png_pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Decode a PNG into (width, height, rows of raw RGB bytes), with Pillow (a real decoder: a
    screenshot of the whole report is millions of pixels)."""
    from PIL import Image

    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(png)) as image:
        rgb = image.convert("RGB")
        width, height = rgb.size
        data = rgb.tobytes()
    stride = width * 3
    return width, height, [data[y * stride:(y + 1) * stride] for y in range(height)]


def file_url(path: Path) -> str:
    return path.resolve().as_uri()
