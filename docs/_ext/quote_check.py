"""Sphinx extension: the build fails on every problem tools/docs_check.py finds.

It runs the same check (a quoted marker missing or stale, a marker quoted
nowhere) and reports each problem as a build warning, which -W makes an
error. It does not render or rewrite quotes: the pages hold them verbatim.
"""

import importlib.util
import re
import sys
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

ROOT = Path(__file__).resolve().parents[2]
LOCATION = re.compile(r"^(?P<path>[^:\s]+):(?P<line>\d+): (?P<problem>.*)$")
logger = logging.getLogger(__name__)


def load_docs_check():
    """tools/docs_check.py as a module: tools/ is not a package."""
    spec = importlib.util.spec_from_file_location("docs_check", ROOT / "tools" / "docs_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def report_problems(app: Sphinx) -> None:
    root = Path(app.config.quote_check_root)
    problems, quote_count, marker_count = load_docs_check().check(root)
    for problem in problems:
        match = LOCATION.match(problem)
        if match is None:
            logger.warning("quote check: %s", problem)
        else:  # "file:line:" becomes the warning's location, as for any other warning
            location = f"{root / match['path']}:{match['line']}"
            logger.warning("quote check: %s", match["problem"], location=location)
    logger.info("quote check: %d quotes, %d markers, %d problems", quote_count, marker_count,
                len(problems))


def setup(app: Sphinx) -> dict:
    app.add_config_value("quote_check_root", str(ROOT), "env")  # the repository to check
    app.connect("builder-inited", report_problems)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
