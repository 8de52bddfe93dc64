"""The global fallback. With the device executor on (the default), operators
without a kernel run on the device; with it off (OPENREG_DEVICE_EXECUTOR=0 or
set_device_executor_enabled(False)) they take the classic CPU fallback, whose
per-operator counts and 'warn' / 'silent' / 'error' modes are tested here."""

from __future__ import annotations

import warnings

import pytest
import torch


@pytest.fixture(autouse=True)
def classic_fallback():
    # The classic CPU fallback only sees what the executor declines: turn the
    # executor off so that these tests reach it with ordinary operators.
    torch.openreg.set_device_executor_enabled(False)
    yield
    torch.openreg.set_device_executor_enabled(True)


def _fallback_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "openreg has no kernel for" in str(w.message)]


def _counts_for(prefix: str) -> int:
    return sum(n for name, n in torch.openreg.fallback_counts().items() if name.startswith(prefix))


@pytest.mark.parametrize("executor", [False, True], ids=["cpu_fallback", "device_executor"])
def test_ops_without_kernels_match_cpu(executor):
    torch.openreg.set_device_executor_enabled(executor)
    torch.manual_seed(0)
    a, b = torch.randn(6, 5), torch.randn(6, 5)
    m = torch.randn(5, 4)
    ra, rb, rm = a.openreg(), b.openreg(), m.openreg()
    cases = [
        (torch.expm1(ra), torch.expm1(a)),
        (ra + rb, a + b),
        (ra * 2.5 - rb, a * 2.5 - b),
        (ra @ rm, a @ m),
        (ra.sum(dim=1), a.sum(dim=1)),
        (torch.softmax(ra, dim=-1), torch.softmax(a, dim=-1)),
        (torch.cat([ra, rb]), torch.cat([a, b])),
        (ra[rb > 0], a[b > 0]),
        (ra.t()[1:3].exp(), a.t()[1:3].exp()),
        (torch.where(ra > rb, ra, rb), torch.where(a > b, a, b)),
        (ra.argmax(dim=0), a.argmax(dim=0)),
        (ra.to(torch.int32) // 2, a.to(torch.int32) // 2),
    ]
    for result, expected in cases:
        assert result.device == torch.device("openreg", 0)
        assert result.dtype == expected.dtype
        torch.testing.assert_close(result.cpu(), expected)
    # In-place and out= variants write back into the openreg tensor.
    target = ra.clone()
    target.add_(rb).mul_(2)
    torch.testing.assert_close(target.cpu(), (a + b) * 2)
    out = torch.empty(6, 5, device="openreg")
    torch.erfc(ra, out=out)
    torch.testing.assert_close(out.cpu(), torch.erfc(a))
    # On device 1 as well; results stay there.
    on1 = (a.openreg(1) * b.openreg(1)).sum()
    assert on1.device == torch.device("openreg", 1)
    torch.testing.assert_close(on1.cpu(), (a * b).sum())


@pytest.mark.parametrize("executor", [False, True], ids=["cpu_fallback", "device_executor"])
def test_autograd_through_the_fallback(executor):
    torch.openreg.set_device_executor_enabled(executor)
    x = torch.randn(4, 3)
    w = torch.randn(3, 2)
    rx = x.openreg().requires_grad_()
    rw = w.openreg().requires_grad_()
    (rx @ rw).tanh().sum().backward()
    cx, cw = x.clone().requires_grad_(), w.clone().requires_grad_()
    (cx @ cw).tanh().sum().backward()
    assert rx.grad.device == torch.device("openreg", 0)
    torch.testing.assert_close(rx.grad.cpu(), cx.grad)
    torch.testing.assert_close(rw.grad.cpu(), cw.grad)


def test_warn_mode_warns_once_per_operator_and_counts():
    x = torch.randn(8).openreg()
    torch.openreg.reset_fallback_counts()
    torch.openreg.set_fallback_mode("warn")
    assert torch.openreg.get_fallback_mode() == "warn"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.expm1(x)
        torch.expm1(x)
        torch.expm1(x)
    messages = _fallback_warnings(caught)
    assert len(messages) == 1, messages
    assert "aten::expm1" in messages[0]
    assert _counts_for("aten::expm1") == 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.erfc(x)
        torch.expm1(x)
    messages = _fallback_warnings(caught)
    assert len(messages) == 1 and "aten::erfc" in messages[0], messages
    counts = torch.openreg.fallback_counts()
    assert _counts_for("aten::expm1") == 4 and _counts_for("aten::erfc") == 1
    assert all(name.startswith("aten::") and n > 0 for name, n in counts.items())


def test_counts_per_operator_and_reset():
    x = torch.randn(4).openreg()
    torch.openreg.reset_fallback_counts()
    assert torch.openreg.fallback_counts() == {}
    torch.atan2(x, x)
    torch.atan2(x, x)
    torch.lgamma(x)
    counts = torch.openreg.fallback_counts()
    assert _counts_for("aten::atan2") == 2
    assert _counts_for("aten::lgamma") == 1
    assert _counts_for("aten::expm1") == 0
    # Native kernels are not counted.
    x.clone()
    x.to("openreg:1")
    x.cpu()
    torch.empty(3, device="openreg")
    assert torch.openreg.fallback_counts() == counts
    torch.openreg.reset_fallback_counts()
    assert torch.openreg.fallback_counts() == {}
    # The returned dict is a snapshot.
    snapshot = torch.openreg.fallback_counts()
    snapshot["aten::fake"] = 1
    assert "aten::fake" not in torch.openreg.fallback_counts()


def test_reset_makes_warn_mode_warn_again():
    x = torch.randn(4).openreg()
    torch.openreg.set_fallback_mode("warn")
    torch.openreg.reset_fallback_counts()
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.log1p(x)
            torch.log1p(x)
        assert len(_fallback_warnings(caught)) == 1
        torch.openreg.reset_fallback_counts()


def test_silent_mode_does_not_warn_but_counts():
    x = torch.randn(4).openreg()
    torch.openreg.set_fallback_mode("silent")
    torch.openreg.reset_fallback_counts()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = torch.digamma(x)
    assert _fallback_warnings(caught) == []
    assert _counts_for("aten::digamma") == 1
    torch.testing.assert_close(result.cpu(), torch.digamma(x.cpu()))


def test_error_mode_raises_naming_the_operator():
    x = torch.randn(4).openreg()
    torch.openreg.set_fallback_mode("error")
    assert torch.openreg.get_fallback_mode() == "error"
    with pytest.raises(NotImplementedError, match="aten::expm1"):
        torch.expm1(x)
    with pytest.raises(NotImplementedError, match="aten::atan2"):
        torch.atan2(x, x)
    # Dedicated kernels keep working (copies, abs through its DispatchStub).
    assert torch.equal(x.clone().cpu(), x.cpu())
    torch.testing.assert_close(torch.abs(x).cpu(), torch.abs(x.cpu()))
    assert x.to("openreg:1").device.index == 1
    torch.openreg.set_fallback_mode("silent")
    torch.testing.assert_close(torch.expm1(x).cpu(), torch.expm1(x.cpu()))


def test_invalid_mode_is_rejected():
    before = torch.openreg.get_fallback_mode()
    with pytest.raises(ValueError, match="warn"):
        torch.openreg.set_fallback_mode("loud")
    assert torch.openreg.get_fallback_mode() == before


def test_default_mode_is_warn(fresh_facts):
    assert fresh_facts["fallback_mode"] == "warn"


def test_fallback_environment_variable(python):
    facts = python.json("""
        import json, torch
        facts = {"mode": torch.openreg.get_fallback_mode()}
        x = torch.arange(4.0).to("openreg")
        try:
            torch.expm1(x)
            facts["expm1"] = "ran"
        except NotImplementedError as error:
            facts["expm1"] = str(error)
        facts["copy"] = x.cpu().tolist()
        torch.openreg.set_fallback_mode("silent")
        facts["after"] = torch.expm1(x).cpu().tolist() == torch.expm1(x.cpu()).tolist()
        print(json.dumps(facts))
    """, env={"OPENREG_FALLBACK": "error", "OPENREG_DEVICE_EXECUTOR": "0"})
    assert facts["mode"] == "error"
    assert "aten::expm1" in facts["expm1"] and "OPENREG_FALLBACK" in facts["expm1"]
    assert facts["copy"] == [0.0, 1.0, 2.0, 3.0]
    assert facts["after"] is True
