# Sphinx configuration of the OpenReg integration guide (MyST markdown pages).
# Build it with `python3.11 tools/dev.py docs`; it is not a place for content.

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "OpenReg"
author = "the OpenReg authors"
copyright = "2026, the OpenReg authors"  # as LICENSE (BSD-3-Clause)
root_doc = "README"  # docs/README.md: the page GitHub shows for the folder, and the site's index
extensions = ["myst_parser", "quote_check", "openreg_run", "site_navigation"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
# Links such as runtime/memory.md#capacity-and-out-of-memory resolve to headings.
myst_heading_anchors = 3
# The theme PyTorch's own documentation builds on: a navigation sidebar with
# every page, previous/next links, and a content column wide enough for code.
html_theme = "pydata_sphinx_theme"
html_title = "OpenReg integration guide"
# A part that is one page has no pages to list in the sidebar: it lists the
# page's own sections there instead.
html_sidebars = {page: ["page-toc"] for page in ("troubleshooting", "packaging", "testing-combinations",
                                                  "writing-the-guide")}
html_theme_options = {
    "navigation_depth": 3,
    "show_nav_level": 2,  # each part's pages listed in the sidebar, unfolded
    "show_prev_next": True,
    "secondary_sidebar_items": [],  # the width goes to the article (code, tables)
    # Ten parts: the first six across the top, the rest under "More", so the
    # bar keeps to one row on a 1366-pixel screen.
    "header_links_before_dropdown": 6,
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_static_path = ["_static"]
html_css_files = ["openreg.css"]


class KeepEmptyGlobs(logging.Filter):
    """docs/modules/ fills up as layer packages add their pages: until the first
    one lands, its glob matches nothing, which is not an error. (Sphinx 9.0 logs
    that warning without a type, so suppress_warnings cannot name it.)"""

    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(record, "subtype", None) != "empty_glob"


def setup(app) -> None:
    logging.getLogger("sphinx.sphinx.directives.other").addFilter(KeepEmptyGlobs())
