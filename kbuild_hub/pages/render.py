"""Templates and Markdown for the pages. Every value reaches HTML through Jinja2's autoescaping;
a card's Markdown is rendered with raw HTML off (markdown-it) and sanitised again (nh3: only
http(s) and mailto links), so a card, a file name or a repo id can never inject markup."""

from __future__ import annotations

import nh3
from jinja2 import Environment, PackageLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup
from starlette.templating import Jinja2Templates

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
_SCHEMES = {"http", "https", "mailto"}


def markdown(text: str | None) -> Markup:
    if not text:
        return Markup("")
    # a card's YAML front matter (kbuild's cards carry one) is metadata, not prose
    if text.startswith("---\n") and "\n---\n" in text[4:]:
        text = text[4:].split("\n---\n", 1)[1]
    return Markup(nh3.clean(_MARKDOWN.render(text), url_schemes=_SCHEMES, link_rel="noopener noreferrer nofollow"))


def size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.1f} us" if value < 1 else f"{value:.2f} ms"


_ENV = Environment(loader=PackageLoader("kbuild_hub.pages", "templates"), autoescape=select_autoescape(default=True),
                   trim_blocks=True, lstrip_blocks=True)
_ENV.filters.update(markdown=markdown, size=size, ms=ms)
TEMPLATES = Jinja2Templates(env=_ENV)


def page(name: str, **context) -> str:
    return TEMPLATES.get_template(name).render(**context)
