"""The built docs site in headless Chromium: no console errors, nothing scrolls sideways at phone and desktop
width, every image loads, every internal link and anchor resolves (the API pages' highlighted-source links
included); screenshots of the landing page, a study page and the viewer at both widths kept for review.

The site is the one a docs session has just built (``KERNBENCH_DOCS_HTML``): ``nox -s docs`` (the full site,
screenshots under ``out/docs-screenshots/``) or ``nox -s docs_check``, one of the default sessions CI runs (the
site without study runs, gallery runs or the links page's run, screenshots under ``out/docs-check/``; ADR 0036).
``KERNBENCH_DOCS_SCREENSHOTS`` names the folder. Without a built site the tests build one themselves into a
temporary folder, which takes minutes: they are marked ``slow``, so the plain test run leaves them out. They
skip where Sphinx and its extensions are not installed, and (like the viewer's tests, :mod:`tests.browser`)
where Chromium is absent unless ``KERNBENCH_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import subprocess
import sys
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from .browser import console_errors, start_driver, wait_ready

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
#: The pages checked in the browser: the landing page, the quickstart (the README's page), a study page and the
#: validation page (the widest tables of the site).
PAGES = {"landing": "index.html", "quickstart": "readme.html", "study": "studies/allreduce.html",
         "validation": "validation.html"}
#: Viewport widths in CSS pixels: a phone and a desktop.
WIDTHS = {"phone": 390, "desktop": 1400}
HEIGHTS = {"phone": 844, "desktop": 900}
#: Screenshots kept for review: page and width (the viewer's are taken by its own test below).
SHOTS = tuple((page, width) for page in ("landing", "study", "validation") for width in WIDTHS)
DOC_DEPS = ("sphinx", "myst_parser", "furo", "sphinx_copybutton", "sphinx_design", "sphinx_gallery")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The folder of the built HTML site."""
    given = os.environ.get("KERNBENCH_DOCS_HTML")
    if given:
        path = Path(given).resolve()
        assert (path / "index.html").is_file(), f"KERNBENCH_DOCS_HTML={given} holds no built site (index.html)"
        return path
    absent = [m for m in DOC_DEPS if importlib.util.find_spec(m) is None]
    if absent:
        pytest.skip(f"the docs build needs {', '.join(absent)}: run `python3 -m nox -s docs`")
    out = tmp_path_factory.mktemp("docs-html")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "docs",
                           str(out)], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stderr[-4000:]}"
    return out


@pytest.fixture(scope="module")
def server(site):
    """The site served over HTTP on a free local port (as a reader's browser would see it)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    d = start_driver(tmp_path_factory.mktemp("chromium-profile"))
    yield d
    d.quit()


def _open(driver, url: str, width: int, height: int) -> None:
    """Load ``url`` in a viewport of ``width`` × ``height`` CSS pixels (a phone-like viewport below 600 px)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
    driver.get("about:blank")
    driver.get(url)
    deadline = time.time() + 20
    while driver.execute_script("return document.readyState") != "complete":
        assert time.time() < deadline, f"{url} did not finish loading"
        time.sleep(0.05)
    driver.execute_script("return document.fonts ? document.fonts.ready : null")


#: Elements wider than the viewport that are not inside a box that scrolls or clips them.
OVERFLOWING_JS = """
const w = document.documentElement.clientWidth;
const clipped = (el) => {
  for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
    const s = getComputedStyle(p);
    if (['auto', 'scroll', 'hidden', 'clip'].includes(s.overflowX)) return true;
  }
  return false;
};
const out = [];
for (const el of document.body.querySelectorAll('*')) {
  const r = el.getBoundingClientRect();
  if (r.width === 0 || getComputedStyle(el).position === 'fixed') continue;
  if ((r.right > w + 1 || r.left < -1) && !clipped(el)) {
    out.push(el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).split(' ').join('.') : '') +
             ' right=' + Math.round(r.right));
  }
}
return out.slice(0, 10);
"""


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("page", list(PAGES))
def test_page_fits_loads_and_logs_no_error(driver, server, page, width):
    _open(driver, server + PAGES[page], WIDTHS[width], HEIGHTS[width])
    errors = console_errors(driver)
    assert errors == [], f"{PAGES[page]} at {WIDTHS[width]} px logged console errors: {errors}"
    scroll, client = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert scroll <= client, (f"{PAGES[page]} scrolls sideways at {WIDTHS[width]} px ({scroll} > {client}); "
                              f"wide elements: {driver.execute_script(OVERFLOWING_JS)}")
    broken = driver.execute_script(
        "return [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
    assert broken == [], f"{PAGES[page]}: images that did not load: {broken}"
    shots = os.environ.get("KERNBENCH_DOCS_SCREENSHOTS")
    if shots and (page, width) in SHOTS:
        Path(shots).mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(Path(shots) / f"{page}-{WIDTHS[width]}.png"))


def test_quickstart_code_blocks_fit_at_desktop_width(driver, server):
    """The README's command blocks are readable without a scrollbar at desktop width, each with a copy button."""
    _open(driver, server + PAGES["quickstart"], WIDTHS["desktop"], HEIGHTS["desktop"])
    blocks = driver.execute_script("""
        return [...document.querySelectorAll('article div.highlight pre')].map(p => [
            p.closest('div[class^="highlight-"]').className, p.scrollWidth, p.clientWidth,
            p.parentElement.querySelectorAll('button.copybtn').length, p.textContent.slice(0, 60)]);""")
    shell = [b for b in blocks if b[0].split()[0] in ("highlight-bash", "highlight-console", "highlight-text")]
    assert len(shell) >= 3, f"expected the quickstart's command blocks, found {blocks}"
    wide = [b for b in shell if b[1] > b[2]]
    assert wide == [], f"command blocks wider than their box at {WIDTHS['desktop']} px: {wide}"
    assert all(b[3] == 1 for b in blocks), f"code blocks without a copy button: {[b for b in blocks if b[3] != 1]}"


def test_phone_landing_shows_the_page_not_the_navigation(driver, server):
    """At phone width the navigation is a drawer behind a button, and the title, pitch and commands come first."""
    _open(driver, server + PAGES["landing"], WIDTHS["phone"], HEIGHTS["phone"])
    state = driver.execute_script("""
        const drawer = document.querySelector('.sidebar-drawer').getBoundingClientRect();
        const toggle = document.querySelector('.mobile-header label.nav-overlay-icon');
        const h1 = document.querySelector('article h1').getBoundingClientRect();
        return {drawerRight: drawer.right, toggle: !!toggle && toggle.getBoundingClientRect().width > 0,
                h1Top: h1.top, cards: document.querySelectorAll('.kb-cards .sd-card').length,
                figures: document.querySelectorAll('.kb-landing img').length};""")
    assert state["drawerRight"] <= 0, f"the navigation drawer is open on the first phone screen: {state}"
    assert state["toggle"], "no navigation button on the phone header"
    assert 0 <= state["h1Top"] < HEIGHTS["phone"] / 3, f"the title is not at the top of the first screen: {state}"
    assert state["cards"] >= 6 and state["figures"] >= 3, f"the landing lost its cards or pictures: {state}"


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    """``kernbench web`` on the default topology, exported as static files and served over HTTP."""
    from kernbench.cli.web import export_viewer
    from kernbench.topology import builtin

    folder = tmp_path_factory.mktemp("viewer")
    export_viewer(builtin(), folder)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
    httpd.shutdown()
    httpd.server_close()


#: The viewer as its screenshots show it: cube 0 of SIP 0 (routers, PHYs and PEs with their names), the route the
#: host-memory intent takes from the IO NoC to an HBM controller, and that controller's details.
VIEWER_VIEW = ("view=cube&sip=0&cube=0&from=sip0.io0.io_noc&to=sip0.cube0.hbm_ctrl.pe5&intent=memory"
               "&node=sip0.cube0.hbm_ctrl.pe5")


@pytest.mark.parametrize("width", list(WIDTHS))
def test_viewer_loads_and_is_kept_as_a_screenshot(driver, viewer, width):
    """The viewer the site links to, at phone and desktop width: ready, the route found, no console error, nothing
    wider than the viewport; its screenshot is kept beside the site's (its own tests, tests/test_web_viewer_ux.py,
    check what a user can do at each width)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": WIDTHS[width], "height": HEIGHTS[width], "deviceScaleFactor": 1, "mobile": WIDTHS[width] < 600})
    driver.get("about:blank")
    driver.get(viewer + "#" + VIEWER_VIEW)
    assert wait_ready(driver) == "1", driver.execute_script("return window.KB && KB.errors")
    assert console_errors(driver) == []
    state = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth,"
        " document.getElementById('route-out').getAttribute('data-path'),"
        " document.querySelectorAll('#labels text.short').length, KB.errors]")
    assert state[0] <= state[1], f"the viewer scrolls sideways at {WIDTHS[width]} px ({state[0]} > {state[1]})"
    assert state[2] not in (None, "null") and state[3] > 0 and state[4] == [], state
    shots = os.environ.get("KERNBENCH_DOCS_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(Path(shots) / f"viewer-{WIDTHS[width]}.png"))


def test_dark_mode_toggle(driver, server):
    _open(driver, server + PAGES["study"], WIDTHS["desktop"], HEIGHTS["desktop"])
    before = driver.execute_script("return document.body.dataset.theme")
    driver.execute_script("document.querySelector('.content-icon-container .theme-toggle').click()")
    after = driver.execute_script("return document.body.dataset.theme")
    assert before != after and after in ("auto", "light", "dark"), (before, after)
    assert console_errors(driver) == []


# --------------------------------------------------------------------------- links, without a browser


class _Refs(HTMLParser):
    """Every href/src of a page, and every id and name it defines."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs) -> None:
        a = dict(attrs)
        for key in ("href", "src"):
            if a.get(key) and not (tag == "link" and a.get("rel") in ("preconnect", "dns-prefetch")):
                self.refs.append(a[key])
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])


@functools.cache
def _parse(path: Path) -> _Refs:
    p = _Refs()
    p.feed(path.read_text(encoding="utf-8", errors="replace"))
    return p


def test_every_internal_link_and_image_resolves(site):
    """Every relative href and src of every page names a file of the site, and a #fragment an id on its page:
    the API pages' [source] links and the highlighted sources' [docs] links back included."""
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 50, f"only {len(pages)} pages built"
    broken = []
    for page in pages:
        for ref in _parse(page).refs:
            parts = urlsplit(ref)
            if parts.scheme or parts.netloc or ref.startswith(("mailto:", "javascript:", "data:")):
                continue
            target_url, fragment = parts.path, parts.fragment  # without ?v=… cache busters
            target = (page.parent / unquote(target_url)).resolve() if target_url else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file() or (site not in target.parents and target != site):
                broken.append(f"{page.relative_to(site)}: {ref} (no such file)")
            elif fragment and target.suffix == ".html" and unquote(fragment) not in _parse(target).ids:
                broken.append(f"{page.relative_to(site)}: {ref} (no id {fragment!r} there)")
    assert broken == [], f"{len(broken)} broken internal links:\n" + "\n".join(broken[:40])


def test_validation_page_is_on_the_landing_cards_and_in_the_navigation(site):
    """The validation page is reached from a landing card, the studies index and every page's sidebar."""
    assert "validation.html" in _parse(site / "index.html").refs, "no landing card links the validation page"
    assert "../validation.html" in _parse(site / "studies" / "index.html").refs
    sidebar = (site / "tour.html").read_text(encoding="utf-8").split('class="sidebar-tree"', 1)[1]
    assert 'href="validation.html"' in sidebar.split("</nav>", 1)[0], "the navigation lacks the validation page"


def test_long_pages_have_contents_the_tour_its_diagrams_and_the_gallery_every_example(site):
    """The quickstart, the tour and every API page carry the theme's in-page contents; the tour shows the four
    machine diagrams; the gallery lists every script of examples/, and each shows its figure unless the build
    skipped the gallery runs (KERNBENCH_DOCS_GALLERY=skip: then none does)."""
    for name in ("readme.html", "tour.html", *sorted(p.relative_to(site).as_posix()
                                                     for p in (site / "api").glob("*.html") if p.name != "index.html")):
        text = (site / name).read_text(encoding="utf-8")
        drawer = text.split('class="toc-drawer', 1)[1].split("</aside>", 1)[0]
        assert drawer.count('href="#') >= 3, f"{name} has no in-page contents"
    diagrams = {Path(ref).name for ref in _parse(site / "tour.html").refs if ref.endswith(".svg")}
    assert {"system.svg", "sip.svg", "cube.svg", "pe.svg"} <= diagrams, diagrams
    scripts = sorted(p.stem for p in (REPO / "examples").glob("plot_*.py"))
    assert len(scripts) >= 5
    listed = set(_parse(site / "gallery" / "index.html").refs)
    assert {f"{s}.html" for s in scripts} <= listed, f"the gallery lacks {set(scripts) - listed}"
    ran = {s: any(f"sphx_glr_{s}_" in ref for ref in _parse(site / "gallery" / f"{s}.html").refs) for s in scripts}
    assert all(ran.values()) or not any(ran.values()), f"gallery figures missing: {ran}"
