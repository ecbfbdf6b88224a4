"""The viewer of `slidestream serve` (assets/viewer/, docs/serve.md) in headless Chromium.

Starts ``target/release/slidestream serve DIR --port 0`` (``SLIDESTREAM_CLI`` names another
binary) on a temporary directory holding copies of two shared test slides and an unopenable
TIFF, opens ``/`` in headless Chromium driven by selenium through the system chromedriver
(``/usr/bin/chromedriver``, Debian's ``chromium-driver``: given to selenium explicitly, so
selenium-manager never runs and nothing is downloaded) and checks that

* the page loads its first screen of tiles (``document.body.dataset.ready``) and the screenshot
  shows tissue (H&E pink and purple pixels, not a blank view);
* the slide list, the load errors, the properties panel and the associated images are those of
  ``/slides.json`` and ``/slides/{id}/info.json``;
* zooming (button, double-click, mouse wheel) asks for tiles of finer Deep Zoom levels and
  dragging asks for tiles that came into view, every one of them a tile in view at the level
  drawn (Resource Timing entries of the page), none failing;
* the tissue-mask overlay paints the mask's blue over the tissue;
* the slide id in the URL hash opens that slide, and clicking the list sets the hash;
* the browser console holds no error.

The screenshot of the first screen with the tissue overlay on is written to pytest's temporary
directory and, when ``docs/images/viewer.png`` is missing or ``SLIDESTREAM_UPDATE_SCREENSHOT=1``,
to that file (the README shows it; it is not rewritten on every run so that test runs leave the
tree clean).

Skipped when chromium, chromedriver, selenium or the slidestream binary is missing (CI installs
them all: scripts/setup-system.sh, scripts/requirements-test.txt, scripts/test-all.sh).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest

from _serve_helpers import CLI, ROOT, TESTDATA, TIMEOUT, Server
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOT = ROOT / "docs" / "images" / "viewer.png"
SLIDES = ("CMU-1-Small-Region.svs", "tcga-cr-7395-01a-01-ts1.svs")
WINDOW = (1280, 800)


def _missing() -> str | None:
    if not os.path.isfile(CHROMIUM) or not os.access(CHROMIUM, os.X_OK):
        return "chromium not installed (apt-get install chromium chromium-driver; scripts/setup-system.sh)"
    if not os.access(CHROMEDRIVER, os.X_OK):
        return f"{CHROMEDRIVER} missing (apt-get install chromium-driver; scripts/setup-system.sh)"
    if not CLI.is_file():
        return f"{CLI} missing (cargo build --release -p slidestream)"
    for name in SLIDES:
        if not (TESTDATA / name).is_file():
            return f"test slide {TESTDATA / name} missing"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))



@pytest.fixture(scope="module")
def served(tmp_path_factory):
    d = tmp_path_factory.mktemp("served")
    for name in SLIDES:
        shutil.copyfile(TESTDATA / name, d / name)
    # Opens as no slide: must show under "errors" when the server lists it there.
    shutil.copyfile(TESTDATA / "unopenable.tiff", d / "unopenable.tiff")
    srv = Server(d)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def driver():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (scripts/requirements-test.txt)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--force-device-scale-factor=1",
        "--hide-scrollbars",
        # Local traffic only: no component updates, safe browsing, sync or metrics.
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--no-first-run",
        "--metrics-recording-only",
        "--disable-features=Translate,OptimizationHints,MediaRouter",
    ):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(TIMEOUT)
    drv.set_script_timeout(TIMEOUT)
    try:
        # The viewport itself WINDOW[0] x WINDOW[1] (the window size includes no chrome when
        # headless, but make sure).
        drv.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False},
        )
        yield drv
    finally:
        drv.quit()


# ---------- helpers ----------


def _state(drv) -> dict:
    return drv.execute_script("return Object.assign({}, window.viewerState)")


def _wait(drv, cond, what: str, timeout: float = TIMEOUT):
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout:
        last = cond()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; viewerState={_state(drv)}")


def _wait_idle(drv, before_requested: int | None = None, until=None) -> dict:
    """Waits until the view has every wanted tile, after at least one new request when
    ``before_requested`` is given, in a state where ``until(state)`` holds when given."""

    def ok():
        s = _state(drv)
        if before_requested is not None and s["tilesRequested"] <= before_requested:
            return None
        if until is not None and not until(s):
            return None
        return s if s["idle"] else None

    return _wait(drv, ok, "the view's tiles")


def _open(drv, url: str) -> dict:
    drv.get("about:blank")  # a new document even when only the hash differs
    drv.get(url)
    _wait(drv, lambda: drv.execute_script("return document.body.dataset.ready") == "1", "document.body.dataset.ready")
    drv.execute_script("performance.setResourceTimingBufferSize(100000)")
    return _wait_idle(drv)


def _tile_requests(drv) -> list[tuple[str, int, int, int]]:
    """(slide id, level, col, row) of every Deep Zoom tile the page fetched."""
    names = drv.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    out = []
    for n in names:
        m = re.search(r"/deepzoom/([^/]+)_files/(\d+)/(\d+)_(\d+)\.(?:jpeg|png)$", urllib.parse.urlsplit(n).path)
        if m:
            out.append((m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))))
    return out


def _view_pixels(drv) -> np.ndarray:
    """The slide view (the #view element) of a screenshot, as an RGB array."""
    from PIL import Image

    png = drv.get_screenshot_as_png()
    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    r = drv.execute_script(
        "const r = document.getElementById('view').getBoundingClientRect();"
        "return [r.left, r.top, r.right, r.bottom].map(Math.round)"
    )
    return img[r[1] : r[3], r[0] : r[2]]


def _tissue_fraction(px: np.ndarray) -> float:
    """Fraction of H&E-stained pixels: pink to purple (red and blue above green by 25+),
    neither white nor black."""
    p = px.astype(np.int16)
    r, g, b = p[..., 0], p[..., 1], p[..., 2]
    stained = (r - g > 25) & (b - g > 10) & (p.max(axis=-1) > 60) & (p.min(axis=-1) < 215)
    return float(stained.mean())


def _mask_blue_fraction(px: np.ndarray) -> float:
    """Fraction of pixels tinted by the tissue mask's (0, 160, 255) at alpha 110/255: blue well
    above red and green above red (H&E pink and purple have red above green)."""
    p = px.astype(np.int16)
    r, g, b = p[..., 0], p[..., 1], p[..., 2]
    return float(((b - r > 40) & (g - r > 0)).mean())


def _severe(entries: list[dict]) -> list[dict]:
    return [e for e in entries if e.get("level") == "SEVERE"]


def _tiles_in_view(drv, dzi: dict, level: int) -> set[tuple[int, int]]:
    """The tiles of ``level`` that the current view shows (computed from the page's centre and
    scale, independently of the viewer's own code)."""
    v = drv.execute_script(
        "const r = document.getElementById('view').getBoundingClientRect();"
        "return [r.width, r.height, window.viewerState.cx, window.viewerState.cy, window.viewerState.scale]"
    )
    w, h, cx, cy, scale = v
    f = 2.0 ** (level - dzi["max_level"])
    ts = dzi["tile_size"]
    lw, lh = dzi["levels"][level]
    cols, rows = -(-lw // ts), -(-lh // ts)
    x0, x1 = (cx - w / 2 / scale) * f, (cx + w / 2 / scale) * f
    y0, y1 = (cy - h / 2 / scale) * f, (cy + h / 2 / scale) * f
    c0, c1 = max(0, int(x0 // ts)), min(cols - 1, int(x1 // ts))
    r0, r1 = max(0, int(y0 // ts)), min(rows - 1, int(y1 // ts))
    return {(c, r) for c in range(c0, c1 + 1) for r in range(r0, r1 + 1)}


def _dzi(served: Server, sid: str) -> dict:
    text = served.get(f"/deepzoom/{sid}.dzi").decode()
    ts = int(re.search(r'TileSize="(\d+)"', text).group(1))
    w = int(re.search(r'Width="(\d+)"', text).group(1))
    h = int(re.search(r'Height="(\d+)"', text).group(1))
    levels = [(w, h)]
    while levels[-1] != (1, 1):
        lw, lh = levels[-1]
        levels.append((max(1, -(-lw // 2)), max(1, -(-lh // 2))))
    levels.reverse()
    return {"tile_size": ts, "levels": levels, "max_level": len(levels) - 1}


# ---------- tests ----------


def test_first_screen_shows_tissue(served, driver, tmp_path_factory):
    listing = served.json("/slides.json")
    ids = [s["id"] for s in listing["slides"]]
    assert sorted(ids) == sorted(SLIDES), listing
    st = _open(driver, served.url)
    assert st["slide"] == ids[0]
    assert st["tilesLoaded"] > 0 and st["tileErrors"] == 0, st
    # The hash names the slide opened.
    assert urllib.parse.urlsplit(driver.current_url).fragment == ids[0]
    px = _view_pixels(driver)
    assert px.shape[0] > 400 and px.shape[1] > 600, px.shape
    frac = _tissue_fraction(px)
    # CMU-1-Small-Region fitted in the view: its tissue covers about a fifth of the view.
    assert frac > 0.05, f"only {frac:.3f} of the view is stained tissue"
    assert (px.min(axis=-1) < 200).mean() > 0.05, "the view is blank"
    (tmp_path_factory.getbasetemp() / "viewer-first-screen.png").write_bytes(driver.get_screenshot_as_png())
    # Every tile the first screen fetched is one of the slide's, of a level the viewer drew.
    req = _tile_requests(driver)
    assert req and all(r[0] == ids[0] for r in req), req
    assert len(req) == st["tilesRequested"], (len(req), st)
    assert not _severe(driver.get_log("browser"))


def test_panels(served, driver):
    listing = served.json("/slides.json")
    _open(driver, served.url)
    page = driver.execute_script(
        "return {"
        " slides: [...document.querySelectorAll('#slides a')].map(a => a.dataset.id),"
        " names: [...document.querySelectorAll('#slides a')].map(a => a.firstChild.textContent),"
        " current: [...document.querySelectorAll('#slides a.current')].map(a => a.dataset.id),"
        " errors: [...document.querySelectorAll('#errors li')].map(li => li.firstChild.textContent),"
        " props: [...document.querySelectorAll('#props tr')].map(tr => [tr.cells[0].textContent, tr.cells[1].textContent]),"
        " summary: Object.fromEntries([...document.querySelectorAll('#summary tr')].map(tr => [tr.cells[0].textContent, tr.cells[1].textContent])),"
        "}"
    )
    assert page["slides"] == [s["id"] for s in listing["slides"]]
    assert page["names"] == [s["name"] for s in listing["slides"]]
    assert page["errors"] == [e["name"] for e in listing["errors"]]
    sid = listing["slides"][0]["id"]
    assert page["current"] == [sid]
    info = served.json(f"/slides/{sid}/info.json")
    assert dict(page["props"]) == {k: str(v) for k, v in info["properties"].items()}
    assert page["summary"]["name"] == info["name"]
    assert page["summary"]["vendor"] == (info["vendor"] or "unknown")
    # The associated images, each loaded (a thumbnail of its JPEG).
    names = sorted(info["associated"])
    assert names, "the test slide has associated images"

    def loaded():
        imgs = driver.execute_script(
            "return [...document.querySelectorAll('#associated img')].map(i => [i.alt, i.complete, i.naturalWidth, i.naturalHeight, i.src])"
        )
        return imgs if all(i[1] and i[2] > 0 for i in imgs) else None

    imgs = _wait(driver, loaded, "the associated images")
    assert sorted(i[0] for i in imgs) == names
    for alt, _, w, h, src in imgs:
        assert [w, h] == info["associated"][alt], (alt, w, h)
        assert urllib.parse.urlsplit(src).path == f"/slides/{sid}/associated/{urllib.parse.quote(alt, safe='')}.jpg"
    assert not _severe(driver.get_log("browser"))


def test_zoom_and_pan_load_new_tiles(served, driver):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
    from selenium.webdriver.common.by import By

    st0 = _open(driver, served.url)
    sid = st0["slide"]
    dzi = _dzi(served, sid)
    assert st0["maxLevel"] == dzi["max_level"]
    view = driver.find_element(By.ID, "view")

    # Mouse wheel (a real wheel event from the WebDriver actions): 300 pixels down zooms out
    # twice, to a coarser level not fetched yet.
    ActionChains(driver).scroll_from_origin(ScrollOrigin.from_element(view), 0, 300).perform()
    st1 = _wait_idle(driver, st0["tilesRequested"])
    assert st1["scale"] == pytest.approx(st0["scale"] / 2)
    assert st1["level"] == st0["level"] - 1
    assert st1["tilesLoaded"] > st0["tilesLoaded"]
    assert {t[1] for t in _tile_requests(driver)} >= {st0["level"], st1["level"]}

    # The zoom-in button: back to the first screen's level (its tiles are loaded: no request),
    # then one level finer.
    driver.find_element(By.ID, "zoom-in").click()
    st2 = _wait_idle(driver, until=lambda s: s["scale"] == pytest.approx(st0["scale"]))
    assert st2["level"] == st0["level"] and st2["tilesRequested"] == st1["tilesRequested"]
    driver.find_element(By.ID, "zoom-in").click()
    st2 = _wait_idle(driver, st2["tilesRequested"])
    assert st2["scale"] == pytest.approx(2 * st0["scale"])
    assert st2["level"] == st0["level"] + 1

    # Double-click: twice again, about the point clicked (the view's centre).
    ActionChains(driver).double_click(view).perform()
    st3 = _wait_idle(driver, st2["tilesRequested"])
    assert st3["scale"] == pytest.approx(2 * st2["scale"])
    assert st3["level"] == st2["level"] + 1
    in_view = _tiles_in_view(driver, dzi, st3["level"])
    fetched = {(c, r) for s, lv, c, r in _tile_requests(driver) if s == sid and lv == st3["level"]}
    assert in_view <= fetched, f"tiles in view not fetched: {sorted(in_view - fetched)}"

    # Drag the slide by (-300, -200): the view moves right and down over the slide, and the tiles
    # that came into view are fetched.
    before = set(_tile_requests(driver))
    ActionChains(driver).move_to_element(view).click_and_hold().move_by_offset(-150, -100).move_by_offset(
        -150, -100
    ).release().perform()
    st4 = _wait_idle(driver, st3["tilesRequested"])
    assert st4["cx"] == pytest.approx(st3["cx"] + 300 / st3["scale"], rel=1e-6)
    assert st4["cy"] == pytest.approx(st3["cy"] + 200 / st3["scale"], rel=1e-6)
    new = set(_tile_requests(driver)) - before
    assert new and all(t[0] == sid and t[1] == st4["level"] for t in new), new
    in_view = _tiles_in_view(driver, dzi, st4["level"])
    fetched = {(c, r) for s, lv, c, r in _tile_requests(driver) if s == sid and lv == st4["level"]}
    assert in_view <= fetched
    # No tile outside the view at the level drawn was fetched: every new one is in view.
    assert {(t[2], t[3]) for t in new} <= in_view
    assert st4["tileErrors"] == 0
    # Each tile was fetched once.
    reqs = _tile_requests(driver)
    assert len(reqs) == len(set(reqs))

    # Zoom out with the button and the keyboard: coarser levels, loaded tiles kept.
    driver.find_element(By.ID, "zoom-out").click()
    st5 = _wait_idle(driver, until=lambda s: s["scale"] == pytest.approx(st4["scale"] / 2))
    assert st5["level"] == st4["level"] - 1
    ActionChains(driver).send_keys("0").perform()
    st6 = _wait_idle(driver, until=lambda s: s["scale"] == pytest.approx(st0["scale"]))
    assert st6["level"] == st0["level"]
    assert st6["tileErrors"] == 0
    assert not _severe(driver.get_log("browser"))


def _save_screenshot(drv, tmp_path_factory) -> None:
    """The README's picture: to pytest's temporary directory, and to docs/images/viewer.png
    when that is missing or SLIDESTREAM_UPDATE_SCREENSHOT=1."""
    png = drv.get_screenshot_as_png()
    (tmp_path_factory.getbasetemp() / "viewer.png").write_bytes(png)
    if os.environ.get("SLIDESTREAM_UPDATE_SCREENSHOT") == "1" or not SCREENSHOT.exists():
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        SCREENSHOT.write_bytes(png)


def test_tissue_overlay(served, driver, tmp_path_factory):
    from selenium.webdriver.common.by import By

    _open(driver, served.url)
    before = _mask_blue_fraction(_view_pixels(driver))
    driver.find_element(By.ID, "tissue").click()
    sid = _state(driver)["slide"]

    def mask_loaded():
        names = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        return any(urllib.parse.urlsplit(n).path == f"/slides/{sid}/tissue.png" for n in names)

    _wait(driver, mask_loaded, "the tissue mask")
    # Wait for the frame that draws it.
    after = _wait(driver, lambda: _mask_blue_fraction(_view_pixels(driver)) or None, "the overlay")
    assert after > before + 0.03, (before, after)
    _save_screenshot(driver, tmp_path_factory)
    driver.find_element(By.ID, "tissue").click()
    _wait(driver, lambda: _mask_blue_fraction(_view_pixels(driver)) <= before + 0.005, "the overlay to go")
    assert not _severe(driver.get_log("browser"))


def test_hash_opens_slide(served, driver):
    from selenium.webdriver.common.by import By

    listing = served.json("/slides.json")
    first, second = (s["id"] for s in listing["slides"])
    st = _open(driver, served.url + "#" + second)
    assert st["slide"] == second and st["tileErrors"] == 0
    req = _tile_requests(driver)
    assert req and all(r[0] == second for r in req)
    px = _view_pixels(driver)
    assert _tissue_fraction(px) > 0.02
    # Clicking the first slide in the list opens it and puts its id in the hash.
    driver.find_element(By.CSS_SELECTOR, f'#slides a[data-id="{first}"]').click()
    _wait(driver, lambda: _state(driver)["slide"] == first, "the first slide")
    st = _wait_idle(driver)
    assert urllib.parse.urlsplit(driver.current_url).fragment == first
    assert st["tileErrors"] == 0
    assert any(r[0] == first for r in _tile_requests(driver))
    # Back: the hash goes back to the second slide, which opens again.
    driver.back()
    _wait(driver, lambda: _state(driver)["slide"] == second, "the second slide again")
    _wait_idle(driver)
    assert not _severe(driver.get_log("browser"))
