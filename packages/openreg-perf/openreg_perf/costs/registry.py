"""The cost rules by operator name. Each rule registers itself beside its definition (@rule); cost_of
finds the one for a call."""

from __future__ import annotations

import warnings
from collections.abc import Callable

from .call import Cost, OpCall, _Args

Rule = Callable[[str, _Args], Cost]
_BY_NAME: dict[str, Rule] = {}
_BY_PREFIX: dict[str, Rule] = {}
_OTHERWISE: list[Rule] = []


def register(names, cost_rule: Rule) -> None:
    """cost_rule prices the operators named (without "aten::"; an in-place "add_" finds "add")."""
    for name in names:
        if name in _BY_NAME:
            raise ValueError(f"two cost rules for aten::{name}: {_BY_NAME[name].__name__} and {cost_rule.__name__}")
        _BY_NAME[name] = cost_rule


def rule(*names: str) -> Callable[[Rule], Rule]:
    """Registers the function below as the rule of these operators."""
    def registered(cost_rule: Rule) -> Rule:
        register(names, cost_rule)
        return cost_rule
    return registered


def rule_for_prefix(prefix: str) -> Callable[[Rule], Rule]:
    """The rule of every operator whose name starts with prefix and has no rule of its own."""
    def registered(cost_rule: Rule) -> Rule:
        _BY_PREFIX[prefix] = cost_rule
        return cost_rule
    return registered


def rule_otherwise(cost_rule: Rule) -> Rule:
    """The rule of an operator no other rule names."""
    _OTHERWISE[:] = [cost_rule]
    return cost_rule


def cost_of(call: OpCall) -> Cost:
    """FLOPs and bytes of one operator call; the default rule (known=False) for operators without one,
    and, with a warning, for a call its own rule fails on (a defect of the rule, which must not cost the
    user the prediction of their program)."""
    name = call.name.removeprefix("aten::")
    found = _BY_NAME.get(name) or _BY_NAME.get(name.removesuffix("_"))
    if found is None:
        found = next((r for prefix, r in _BY_PREFIX.items() if name.startswith(prefix)), _OTHERWISE[0])
    try:
        return found(name, _Args(call))
    except Exception as error:
        if found is _OTHERWISE[0]:
            raise
        if call.name not in _FAILED:
            _FAILED.add(call.name)
            warnings.warn(f"openreg_perf: the cost rule of {call.name} failed on a call with shapes {call.shapes} "
                          f"({type(error).__name__}: {error}); it is priced by the default rule, as an operator "
                          "without a rule is. Please report it.", RuntimeWarning, stacklevel=2)
        return _OTHERWISE[0](name, _Args(call))


_FAILED: set[str] = set()  # operators whose rule failed, warned about once
