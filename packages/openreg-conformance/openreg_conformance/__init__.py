"""openreg-conformance: the contracts of PyTorch's PrivateUse1 mechanism, as
tests any accelerator backend runs by name.

    python -m openreg_conformance --device NAME [--groups ...] [--report out.json] [--junit out.xml]

Each group (groups.py) is one file of the suite (suite/test_GROUP.py),
written against what PyTorch defines (torch.accelerator, torch.Stream and
torch.Event, the caching allocator's statistics, torch.amp, torch.compile,
torch.distributed, ...), never against one backend's internals. Required
groups must pass; a capability-gated group runs when the backend registers
the feature and is otherwise skipped with the reason (capabilities.py). The
runner (runner.py) gives each file a timeout, retries failures to tell
consistent ones from flaky ones, and writes the report of PyTorch's
out-of-tree runner (run_openreg_tests.py) with more beside it (report.py).
The pytest plugin (plugin.py) gives a vendor's own tests the same fixtures.

Depends on torch and pytest only.
"""

from openreg_conformance.groups import GROUPS, Group

__all__ = ["GROUPS", "Group", "__version__"]

__version__ = "0.1.0"
