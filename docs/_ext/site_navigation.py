"""Sphinx extension: every page is reachable from the navigation, and the
site opens at index.html.

Sphinx warns about a page in no toctree, but not about a toctree that hangs
from a page no toctree reaches (an orphan part), and the guide's start page
is docs/README.md (the page GitHub shows for the folder), which the site
writes as README.html. So:

- after reading, a walk of the toctrees from the root page warns (an error
  under -W) for each page it does not reach;
- after an HTML build, index.html sends the browser to the root page.
"""

from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

INDEX_REDIRECT = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<meta http-equiv="refresh" content="0; url={target}">
<link rel="canonical" href="{target}"></head>
<body><p><a href="{target}">{title}</a></p></body></html>
"""


def pages_in_navigation(root: str, toctree_includes: dict[str, list[str]]) -> set[str]:
    """The pages the toctrees reach from root, root included."""
    reached, waiting = {root}, [root]
    while waiting:
        for child in toctree_includes.get(waiting.pop(), []):
            if child not in reached:
                reached.add(child)
                waiting.append(child)
    return reached


def check_reachable(app: Sphinx, env) -> None:
    reached = pages_in_navigation(app.config.root_doc, env.toctree_includes)
    for page in sorted(env.found_docs - reached):
        logger.warning("page %s is not reachable from the navigation: add it to the toctree of its part's index",
                       page, location=page)


def write_index(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html" or app.config.root_doc == "index":
        return
    target = app.builder.get_target_uri(app.config.root_doc)
    title = app.config.html_title or app.config.project
    Path(app.outdir, "index.html").write_text(INDEX_REDIRECT.format(target=target, title=title))


def setup(app: Sphinx) -> dict:
    app.connect("env-check-consistency", check_reachable)
    app.connect("build-finished", write_index)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
