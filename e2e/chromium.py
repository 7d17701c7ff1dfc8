"""Headless Chromium (Debian's `chromium` package) driven over the DevTools protocol.

A test opens a page and asks it questions in JavaScript (`Page.evaluate`), so it can wait for
the page to change by itself, as a person watching it would. Chromium missing is a failure,
never a skip: the web view is only tested here.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import websocket  # websocket-client, which the kubernetes client depends on

from queuectl.testenv.ports import free_ports

INSTALL = "install Debian's chromium package (apt-get install chromium)"


def find_chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(f"chromium is not on PATH: {INSTALL}; the web view's tests need it")
    return found


class Page:
    """One tab, through its DevTools websocket."""

    def __init__(self, ws_url: str) -> None:
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.ids = itertools.count(1)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able)."""
        call_id = next(self.ids)
        params = {"expression": expression, "returnByValue": True}
        self.ws.send(json.dumps({"id": call_id, "method": "Runtime.evaluate", "params": params}))
        while True:
            answer = json.loads(self.ws.recv())
            if answer.get("id") == call_id:
                break
        result = answer.get("result") or {}
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return (result.get("result") or {}).get("value")

    def text(self) -> str:
        return str(self.evaluate("document.body ? document.body.innerText : ''") or "")

    def wait(self, what: str, check: Callable[[Page], Any], timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            got = check(self)
            if got:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the page says:\n{self.text()}")
            time.sleep(0.5)

    def close(self) -> None:
        self.ws.close()


class Chromium:
    def __init__(self, profile: Path) -> None:
        (self.port,) = free_ports(1)
        self.log = profile / "chromium.log"
        argv = [
            find_chromium(),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-proxy-server",
            f"--remote-debugging-port={self.port}",
            f"--user-data-dir={profile / 'profile'}",
            "about:blank",
        ]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 30
        while not self._json("/json/version"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"chromium did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)

    def _json(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as r:
                return json.loads(r.read())
        except OSError:
            return None

    def open(self, url: str) -> Page:
        target = self._json(f"/json/new?{url}", method="PUT")
        assert target, f"chromium opened no tab for {url}"
        return Page(target["webSocketDebuggerUrl"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[Chromium]:
    browser = Chromium(profile)
    try:
        yield browser
    finally:
        browser.stop()
