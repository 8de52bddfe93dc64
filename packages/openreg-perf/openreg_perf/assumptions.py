"""openreg_perf.assume: the sizes a program's data would decide, stated for timing-only mode.

    with openreg_perf.simulate("h100-sxm", execute=False) as run:
        with openreg_perf.assume(selected=1 / experts):
            y = moe_layer(x)      # torch.where(chosen == e): 1 / experts of the (tokens, top_k) choices
    print(run.summary())          # lists every assumption made
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

# LITERALINCLUDE START: ASSUMED_SELECTIONS_NOTE
# Note [Assumed selections]
# In timing-only mode nothing is computed, so an operator whose output size depends on the values it
# reads has no size to give, and torch-openreg refuses it: nonzero, with what PyTorch builds on it
# (torch.where(condition), argwhere, indexing and assigning through a boolean mask), and
# masked_select. Inside assume(selected=f) such an operator on an openreg tensor takes the stated
# fraction f of its candidates as selected instead, through PyTorch's fixed-size nonzero_static, so the
# rest of the program runs on the shapes that data would give it, and the recording prices the
# operators that ran. The fraction is of the candidates, the mask's elements: routing that is uniform
# over E experts selects 1/E of a (tokens, top_k) tensor of chosen experts for each, and k/E of a
# (tokens,) mask that says whether a token goes to an expert at all.
# Which elements count as selected is not stated: their values, like every value in this mode, were
# never computed. Each assumption is kept (ASSUMED), and simulate()'s summary lists its region's.
# Outside timing-only mode the data decides, and assume() changes nothing.
# LITERALINCLUDE END: ASSUMED_SELECTIONS_NOTE


@dataclasses.dataclass(frozen=True)
class Assumption:
    """One data-dependent size stated: the operator, the shape of its candidates (the mask's or
    condition's) and how many of them were taken as selected."""

    operator: str
    candidates: tuple[int, ...]
    selected: int


ASSUMED: list[Assumption] = []  # every assumption this process made, in order; simulate() reads its region's


@contextmanager
def assume(*, selected: float) -> Iterator[None]:
    """Within the block, in timing-only mode, an operator whose output size depends on the data takes
    the fraction `selected` (0 to 1) of its candidates as selected (Note [Assumed selections])."""
    if isinstance(selected, bool) or not isinstance(selected, (int, float)) or not 0 <= selected <= 1:
        raise ValueError(f"selected must be a fraction between 0 and 1, not {selected!r}")
    from ._selections import AssumedSelections  # imports torch: importing openreg_perf must not (devices_for)

    with AssumedSelections(float(selected)):
        yield
