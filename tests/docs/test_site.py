"""The documentation site: built strictly, every page in the nav, the public API in the
reference, and looked at in a real headless Chromium.

Needs the ``docs`` extra (mkdocs, Material, mkdocstrings) and Debian's ``chromium``; ``make
test`` installs both.  Without them the tests skip and say why.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
pytest.importorskip("material", reason="mkdocs-material is not installed (the docs extra)")
pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings[python] is not installed")

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The modules the API reference documents, and the page each is on.
API_PAGES = {
    "agent_latency": "api/agent_latency",
    "agent_latency.budget": "api/budget",
    "agent_latency.report": "api/report",
    "agent_latency.simulator": "api/simulator",
}


class _Loader(yaml.SafeLoader):
    """mkdocs.yml may use mkdocs' ``!ENV``/``!relative`` tags: read them as plain values."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def mkdocs_build(config: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)],
        cwd=cwd, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    result = mkdocs_build(ROOT / "mkdocs.yml", out, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def nav_pages(nav: object) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from nav_pages(value)


@contextlib.contextmanager
def serving(directory: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1, as ``make docs`` would show it."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    # --no-sandbox: the tests run as root in CI, where Chromium's sandbox refuses to start.
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--no-first-run", f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120)


class TestStrictBuild:
    """The site builds with --strict, and --strict does fail on a broken link."""

    def test_builds_every_page(self, site: Path):
        config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
        for page in nav_pages(config["nav"]):
            html = page.removesuffix(".md")
            html = html.removesuffix("index") if html.endswith("index") else html + "/"
            assert (site / html / "index.html").is_file(), page

    def test_broken_link_fails_the_build(self, tmp_path: Path):
        copy = tmp_path / "repo"
        copy.mkdir()
        for name in ("mkdocs.yml", "CONTRIBUTING.md", "CHANGELOG.md"):
            shutil.copy(ROOT / name, copy / name)
        shutil.copytree(DOCS, copy / "docs")
        (copy / "src").symlink_to(ROOT / "src")
        index = copy / "docs" / "index.md"
        index.write_text(index.read_text() + "\nSee [the missing page](no-such-page.md).\n")
        result = mkdocs_build(copy / "mkdocs.yml", tmp_path / "site", copy)
        assert result.returncode != 0
        assert "no-such-page.md" in result.stdout + result.stderr


class TestNavAndReference:
    """Every page is reachable, and every public name has its reference entry."""

    def test_every_docs_page_is_in_the_nav(self):
        config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
        in_nav = set(nav_pages(config["nav"]))
        on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
        assert on_disk - in_nav == set(), "docs pages missing from mkdocs.yml's nav"

    @pytest.mark.parametrize("module", sorted(API_PAGES))
    def test_public_api_is_in_the_reference(self, site: Path, module: str):
        html = (site / API_PAGES[module] / "index.html").read_text()
        ids = set(re.findall(r'id="([^"]+)"', html))
        public = [n for n in importlib.import_module(module).__all__ if not n.startswith("__")]
        missing = [n for n in public if f"{module}.{n}" not in ids]
        assert missing == [], f"{module}: not in docs/{API_PAGES[module]}.md"

    def test_pages_link_rather_than_name_files(self):
        # A plain "docs/x.md" is not checked by --strict; a Markdown link [..](x.md) is.
        named = {str(p.relative_to(ROOT)): re.findall(r"\bdocs/[\w./-]+\.md\b", p.read_text())
                 for p in DOCS.rglob("*.md")}
        assert {page: refs for page, refs in named.items() if refs} == {}

    def test_readme_has_no_relative_links(self):
        # README.md is the package's description on a package index: a link relative to the
        # repository leads nowhere there.
        links = re.findall(r"\]\(([^)]+)\)", (ROOT / "README.md").read_text())
        assert [link for link in links if not link.startswith(("https://", "http://"))] == []

    def test_docs_stand_on_their_own(self):
        # The design notes the docs grew from are not shipped: no page may defer to them.
        pages = [*DOCS.rglob("*.md"), ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
        deferring = [str(p.relative_to(ROOT)) for p in pages
                     if re.search(r"\b(DESIGN|FACTS)\.md\b", p.read_text())]
        assert deferring == [], "pages that refer to notes outside the repository"


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
class TestInChromium:
    """The built site, served on 127.0.0.1, renders in headless Chromium with content."""

    @pytest.mark.parametrize(("page", "expected"), [
        ("", ["agent-latency", "Getting started", "output generation"]),
        ("api/agent_latency/", ["agent_latency.instrument", "BudgetSpanProcessor"]),
    ])
    def test_page_renders(self, site: Path, tmp_path: Path, page: str, expected: list[str]):
        # AGENT_LATENCY_DOCS_SHOTS=DIR keeps the screenshots, to look at them.
        shots = Path(os.environ.get("AGENT_LATENCY_DOCS_SHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        shot = shots / (page.strip("/").replace("/", "_") or "index")
        with serving(site) as base:
            dom = chromium("--dump-dom", f"{base}/{page}", profile=tmp_path / "p1")
            png = chromium("--window-size=1280,1000", f"--screenshot={shot}.png",
                           f"{base}/{page}", profile=tmp_path / "p2")
        assert dom.returncode == 0, dom.stderr[-2000:]
        text = re.sub(r"<[^>]+>", " ", dom.stdout)
        for words in expected:
            assert words in text, words
        # Material's JavaScript ran (it builds the search box) and the theme's CSS is in use.
        assert "md-search" in dom.stdout
        assert png.returncode == 0, png.stderr[-2000:]
        self.assert_has_content(Path(f"{shot}.png"))

    @staticmethod
    def assert_has_content(png: Path) -> None:
        image = pytest.importorskip("PIL.Image").open(png).convert("RGB")
        assert image.size == (1280, 1000)
        grey = image.convert("L").histogram()
        dark = sum(grey[:100])  # text and headings
        colours = len(image.resize((320, 250)).getcolors(maxcolors=320 * 250))
        assert dark > 0.005 * sum(grey), f"{png.name}: almost no text drawn"
        assert colours > 50, f"{png.name}: {colours} colours: a blank or unstyled page"
