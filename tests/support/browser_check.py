"""Open a mobiperf HTML page in a real headless Chromium and check it: console errors, every plotly figure
rendered with data, load time, JS heap, and a screenshot. Used by the browser tests and bench/report_bench.py.

Chromium is driven through its DevTools protocol over a websocket (the `websocket-client` package), because
that is what reliably reports console errors and uncaught exceptions as they happen; `--dump-dom` and
`--enable-logging` only give a log to scrape. Nothing here is needed to produce a report.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
LAPTOP_VIEWPORT = (1366, 768)

# Every plotly graph div on the page: does it have traces, and did plotly draw it?
_FIGURES_JS = """
(() => {
  const divs = Array.from(document.querySelectorAll('.js-plotly-plot, .plotly-graph-div'));
  const uniq = Array.from(new Set(divs));
  return JSON.stringify({now: performance.now(), figures: uniq.map(d => ({
    id: d.id, traces: (d.data || []).length, on_first_screen: d.getBoundingClientRect().top < window.innerHeight,
    points: (d._fullData || []).reduce((n, t) => n + ((t.x && t.x.length) || (t.y && t.y.length) || (t.labels && t.labels.length) || 0), 0),
    drawn: !!d.querySelector('.main-svg') && !!d._fullLayout,
    title: (d.layout && d.layout.title && (d.layout.title.text || d.layout.title)) || ''
  }))});
})()
"""


def chromium_available() -> tuple[bool, str]:
    """(True, '') when the browser checks can run, else (False, why)."""
    if not os.path.exists(CHROMIUM):
        return False, f"{CHROMIUM} is absent (apt-get install chromium)"
    try:
        import websocket  # noqa: F401
    except ImportError:
        return False, "the websocket-client Python package is not installed (pip install websocket-client)"
    return True, ""


@dataclass
class PageCheck:
    url: str
    console_errors: list[str] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)
    load_s: float = 0.0            # navigation start -> every figure drawn, by the page's own clock
    first_screen_s: float = 0.0    # navigation start -> the figures of the first screen drawn
    js_heap_bytes: int = 0
    screenshot: Path | None = None
    text: str = ""                 # the page's visible text
    script_result: object = None   # what `script` returned (JSON-decoded), when one was given

    @property
    def undrawn(self) -> list[dict]:
        return [f for f in self.figures if not (f["drawn"] and f["traces"] > 0)]


class _DevTools:
    """The smallest DevTools protocol client: send a command, wait for its reply, keep events."""

    def __init__(self, ws_url: str, timeout: float):
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
        self.timeout = timeout
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.settimeout(self.timeout)
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def poll_events(self, seconds: float) -> None:
        import websocket

        self.ws.settimeout(seconds)
        try:
            while True:
                self.events.append(json.loads(self.ws.recv()))
        except websocket.WebSocketTimeoutException:
            pass

    def close(self) -> None:
        self.ws.close()


def check_page(path: Path, screenshot: Path | None = None, *, timeout: float = 60.0,
               viewport: tuple[int, int] = LAPTOP_VIEWPORT, full_page: bool = True, tiles: int = 0,
               script: str | None = None) -> PageCheck:
    """Load `path` from file:// in headless Chromium and report what a reader would see. With `tiles`, also
    write that many screen-sized screenshots from the top (`<screenshot stem>-<i>.png`), to read at full size.
    `script`, a JavaScript expression evaluated after the figures are drawn (clicks, typing), returns a
    JSON-serialisable value (or a promise of one, awaited) into `script_result`; the screenshot is taken before it
    runs."""
    ok, why = chromium_available()
    if not ok:
        raise RuntimeError(why)
    profile = tempfile.mkdtemp(prefix="mobiperf-reports-chromium-")
    proc = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         "--disable-background-networking", "--disable-dev-shm-usage", "--remote-debugging-port=0",
         "--remote-allow-origins=*", f"--user-data-dir={profile}", f"--window-size={viewport[0]},{viewport[1]}",
         "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port = _devtools_port(Path(profile), proc, timeout)
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page_target = next(t for t in targets if t.get("type") == "page")
        dt = _DevTools(page_target["webSocketDebuggerUrl"], timeout)
        try:
            check = _run_check(dt, Path(path), screenshot, timeout, viewport, full_page, tiles)
            if script is not None:
                value = dt.call("Runtime.evaluate", expression=f"(async () => JSON.stringify(await ({script})))()",
                                returnByValue=True, awaitPromise=True)["result"].get("value")
                check.script_result = None if value is None else json.loads(value)
                dt.poll_events(0.2)
                check.console_errors = _errors(dt.events)
            return check
        finally:
            dt.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)


def _devtools_port(profile: Path, proc: subprocess.Popen, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    port_file = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with status {proc.returncode} before DevTools was up")
        if port_file.exists():
            text = port_file.read_text().split()
            if text:
                return int(text[0])
        time.sleep(0.05)
    raise RuntimeError("chromium did not open its DevTools port in time")


def _run_check(dt: _DevTools, path: Path, screenshot: Path | None, timeout: float, viewport, full_page,
               tiles: int) -> PageCheck:
    url = path.resolve().as_uri()
    check = PageCheck(url)
    for domain in ("Page", "Runtime", "Log", "Performance"):
        dt.call(f"{domain}.enable")
    dt.call("Emulation.setDeviceMetricsOverride", width=viewport[0], height=viewport[1], deviceScaleFactor=1,
            mobile=False)
    t0 = time.monotonic()
    dt.call("Page.navigate", url=url)
    deadline = t0 + timeout
    loaded = False
    while time.monotonic() < deadline:
        dt.poll_events(0.05)
        loaded = loaded or any(e.get("method") == "Page.loadEventFired" for e in dt.events)
        if not loaded:
            continue
        state = _figures_state(dt)
        if not check.first_screen_s and all(f["drawn"] for f in state["figures"] if f["on_first_screen"]):
            check.first_screen_s = state["now"] / 1e3
        if all(f["drawn"] for f in state["figures"]):
            break
    else:
        state = _figures_state(dt)
    check.load_s = state["now"] / 1e3
    check.figures = state["figures"]
    dt.poll_events(0.3)  # late errors (a figure's resize handler) still count
    check.console_errors = _errors(dt.events)
    metrics = {m["name"]: m["value"] for m in dt.call("Performance.getMetrics")["metrics"]}
    check.js_heap_bytes = int(metrics.get("JSHeapUsedSize", 0))
    check.text = dt.call("Runtime.evaluate", expression="document.body.innerText",
                         returnByValue=True)["result"]["value"]
    if screenshot is not None:
        params = {"format": "png"}
        if full_page:
            size = dt.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": viewport[0],
                                                            "height": min(int(size["height"]), 16000), "scale": 1})
        data = dt.call("Page.captureScreenshot", **params)["data"]
        screenshot.write_bytes(base64.b64decode(data))
        check.screenshot = screenshot
        for i in range(tiles):
            clip = {"x": 0, "y": i * viewport[1], "width": viewport[0], "height": viewport[1], "scale": 1}
            data = dt.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)["data"]
            screenshot.with_name(f"{screenshot.stem}-{i}.png").write_bytes(base64.b64decode(data))
    return check


def _figures_state(dt: _DevTools) -> dict:
    return json.loads(dt.call("Runtime.evaluate", expression=_FIGURES_JS, returnByValue=True)["result"]["value"])


def _errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            out.append(f"uncaught: {d.get('exception', {}).get('description') or d.get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append("console.error: " + " ".join(str(a.get("value", a.get("description", "")))
                                                    for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            out.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
    return out
