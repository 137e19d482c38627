"""Serve a built site on 127.0.0.1 and map docs pages to the URLs they are built at.

Pages are discovered from ``docs/`` (for test parametrization) and checked against the
built site, so a page added by anyone is tested without editing a list.
"""

from __future__ import annotations

import contextlib
import html
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import mdfences

LANGS = ("en", "zh")


@dataclass(frozen=True)
class PagePair:
    """One page in both languages: ``en`` and ``zh`` are URL paths relative to the site root."""

    md: Path  # the English markdown file

    @property
    def en(self) -> str:
        return mdfences.page_url(self.md)

    @property
    def zh(self) -> str:
        return "zh/" + self.en

    def url(self, lang: str) -> str:
        return self.en if lang == "en" else self.zh

    def md_for(self, lang: str) -> Path:
        return self.md if lang == "en" else self.md.with_name(self.md.stem + ".zh.md")

    @property
    def id(self) -> str:
        return self.en or "home"


def page_pairs(docs_dir: Path = mdfences.DOCS_DIR) -> list[PagePair]:
    return [PagePair(en) for en, _ in mdfences.page_pairs(docs_dir)]


def built_page_urls(site: Path) -> set[str]:
    """Every HTML page of the built site, as a URL path (``guide/x/``), 404 page excluded."""
    urls = set()
    for page in site.rglob("index.html"):
        rel = page.parent.relative_to(site).as_posix()
        urls.add("" if rel == "." else rel + "/")
    return urls


ARTICLE = re.compile(r'<article class="md-content__inner[^"]*">(.*?)</article>', re.S)
TAG = re.compile(r"<[^>]+>")


def article_text(site: Path, url: str) -> str:
    """The visible text of a built page's article (what the search index holds)."""
    page = site / url / "index.html"
    match = ARTICLE.search(page.read_text(encoding="utf-8"))
    return html.unescape(TAG.sub(" ", match[1])) if match else ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# http.server, plus the response header with which a server tells linkchecker it may be
# checked at full speed (otherwise it waits 0.1-0.6 s between two requests to one host).
SERVER = """
import functools, http.server, socket, sys
class Server(http.server.ThreadingHTTPServer):
    def server_bind(self):
        # Several pytest-xdist workers serve the same built site on the port its site_url
        # names: the kernel hands each connection to one of them.
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()
class Handler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        self.send_header("LinkChecker", "full speed")
        super().end_headers()
    def log_message(self, *args):
        pass
handler = functools.partial(Handler, directory=sys.argv[2])
Server(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
"""


@contextlib.contextmanager
def serve(directory: Path, port: int | None = None) -> Iterator[str]:
    """A static file server on 127.0.0.1 at ``port`` (default: a free one); yields the base URL."""
    port = port or free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port), str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(base, timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"http.server did not start on {base}") from None
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
