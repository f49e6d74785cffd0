"""CI (`.ci/run`'s docs part): the built site needs nothing from outside it, so it works offline.

    python .ci/offline_site.py [SITE]      # default: site/, what `mkdocs build` writes

Fails, naming file and line, on any script, stylesheet, font, icon or image (or other embedded
resource) the pages or their stylesheets load from an `http://`, `https://` or `//` address.
Links (`<a href>`) may point anywhere: following one is the reader's choice. What scripts load
at run time is not read, with one exception that matters here: mkdocs-material's own script
fetches mermaid from a CDN for a page with a diagram unless the page loads it first, so such a
page must load a mermaid script of the site's own (overrides/main.html does).
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

OUTSIDE = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
# url(...) and @import "..." in stylesheets and style attributes.
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""", re.IGNORECASE)
# The attributes through which a page loads a resource, by tag; `link` only for what it loads.
LOADING = {
    "script": ("src",),
    "img": ("src", "srcset"),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "track": ("src",),
    "iframe": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "input": ("src",),
    "image": ("href", "xlink:href"),
    "use": ("href", "xlink:href"),
}
# Every `link` loads or connects to what it names, except these.
NOT_LOADED = {"alternate", "canonical", "next", "prev", "author", "license", "help", "search"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int, str]] = []
        self._in_style = False
        #: The line of the first mermaid diagram, and whether the page loads its own mermaid.
        self.diagram: int | None = None
        self.mermaid = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "mermaid" in values.get("class", "").split() and self.diagram is None:
            self.diagram = self.getpos()[0]
        if tag == "script" and "mermaid" in values.get("src", "") and not OUTSIDE.match(values["src"]):
            self.mermaid = True
        names = LOADING.get(tag, ())
        if tag == "link" and not set(values.get("rel", "").lower().split()) <= NOT_LOADED:
            names = ("href", "imagesrcset")
        for name in names:
            for address in values.get(name, "").split(","):
                if OUTSIDE.match(address):
                    self.found.append((self.getpos()[0], f"<{tag} {name}={address.strip().split()[0]}>"))
        self._css(values.get("style", ""))
        self._in_style = tag == "style"

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self._css(data)

    def _css(self, text: str) -> None:
        for match in CSS_URL.finditer(text):
            address = match.group(1) or match.group(2)
            if OUTSIDE.match(address):
                self.found.append((self.getpos()[0], f"url({address})"))


def outside_references(site: Path) -> list[str]:
    """Every outside resource the site loads, as `file:line: what`."""
    problems = []
    for path in sorted(site.rglob("*")):
        if path.suffix == ".html":
            page = _Page()
            page.feed(path.read_text(encoding="utf-8", errors="replace"))
            found = page.found
            if page.diagram is not None and not page.mermaid:
                what = "a mermaid diagram, and no mermaid script of the site's own (from a CDN, then)"
                found.append((page.diagram, what))
        elif path.suffix == ".css":
            text = path.read_text(encoding="utf-8", errors="replace")
            found = [
                (text.count("\n", 0, match.start()) + 1, f"url({match.group(1) or match.group(2)})")
                for match in CSS_URL.finditer(text)
                if OUTSIDE.match(match.group(1) or match.group(2))
            ]
        else:
            continue
        problems += [f"{path.relative_to(site)}:{line}: {what}" for line, what in found]
    return problems


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else "site")
    if not (site / "index.html").is_file():
        print(f"error: {site}/index.html not found: build the site first (mkdocs build)", file=sys.stderr)
        return 2
    problems = outside_references(site)
    for problem in problems:
        print(f"error: {problem}: loaded from outside the site", file=sys.stderr)
    pages = sum(1 for _ in site.rglob("*.html"))
    print(f"{site}: {pages} pages, {len(problems)} outside resources", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
