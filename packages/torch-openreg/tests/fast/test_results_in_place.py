"""Results allocated in the device outputs' memory (ResultsInPlace.cpp, Note
[Results written straight into device memory]): the CPU convolution has no
out= form, so its results are allocated where the device outputs are, which
saves the copy into them. Every call must match the CPU whether or not the
result landed in place, and no device memory may ever reach the scratch
allocator's cache."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torch_openreg._C as _C

# (input, weight, padding). Sizes are large enough for the scratch allocator
# (64 KiB and up). With 16 channels oneDNN computes into a same-sized blocked
# temporary before the plain result; with 8 it does not.
CONVOLUTIONS = {
    "blocked temporary of the result's size": ((1, 16, 128, 128), (16, 16, 3, 3), 1),
    "no temporary of the result's size": ((4, 3, 64, 64), (8, 3, 3, 3), 1),
    "1x1": ((2, 16, 64, 64), (16, 16, 1, 1), 0),
}


@pytest.fixture(autouse=True)
def _one_thread_per_kernel():
    """Which thread runs a kernel (the worker, or a waiting host with its
    team) changes how oneDNN allocates, so a plan learns each apart (Note
    [The threads of a kernel]); these tests count what one plan learns, so
    every kernel keeps to one thread, as deterministic algorithms make it."""
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)


def counts_during(fn):
    before = _C._testing.results_in_place_counts()
    result = fn()
    torch.openreg.synchronize()
    after = _C._testing.results_in_place_counts()
    return result, {name: after[name] - before[name] for name in after}


def operands(input_shape, weight_shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(input_shape, generator=generator), torch.randn(weight_shape, generator=generator)


@pytest.mark.parametrize("case", list(CONVOLUTIONS))
def test_convolution_results_land_in_place_from_the_second_call(case):
    input_shape, weight_shape, padding = CONVOLUTIONS[case]
    image, kernel = operands(input_shape, weight_shape)
    expected = F.conv2d(image, kernel, padding=padding)
    device_image, device_kernel = image.to("openreg"), kernel.to("openreg")
    for call in range(3):
        result, counts = counts_during(lambda: F.conv2d(device_image, device_kernel, padding=padding))
        torch.testing.assert_close(result.cpu(), expected, rtol=0, atol=0)
        assert result.stride() == expected.stride()
        assert counts["in_place"] + counts["copied"] == 1
        if call > 0:  # the first call teaches where the result is allocated
            assert counts == {"in_place": 1, "copied": 0}


def test_backward_gradients_match_the_cpu_and_land_in_place():
    input_shape, weight_shape, padding = CONVOLUTIONS["blocked temporary of the result's size"]
    image, kernel = operands(input_shape, weight_shape)
    image.requires_grad_(), kernel.requires_grad_()
    F.conv2d(image, kernel, padding=padding).square().sum().backward()
    device_image = image.detach().to("openreg").requires_grad_()
    device_kernel = kernel.detach().to("openreg").requires_grad_()
    for call in range(3):
        device_image.grad = device_kernel.grad = None
        _, counts = counts_during(
            lambda: F.conv2d(device_image, device_kernel, padding=padding).square().sum().backward())
        # The weight's gradient sums over 16K products, on one thread here
        # and split across the CPU's threads there: it rounds apart.
        torch.testing.assert_close(device_image.grad.cpu(), image.grad)
        torch.testing.assert_close(device_kernel.grad.cpu(), kernel.grad, rtol=1e-3, atol=1e-3)
        if call > 0:
            assert counts["in_place"] >= 2  # forward result and input gradient (the weight's is under 64 KiB)


def test_gradients_of_equal_size_never_overwrite_each_other():
    # The input and the weight (so their gradients) are both 64 KiB: the CPU
    # kernel's allocations of that size may land in either output's memory.
    image, kernel = operands((1, 128, 16, 8), (128, 128, 1, 1), seed=3)
    image.requires_grad_(), kernel.requires_grad_()
    F.conv2d(image, kernel).sin().sum().backward()
    device_image = image.detach().to("openreg").requires_grad_()
    device_kernel = kernel.detach().to("openreg").requires_grad_()
    for _ in range(3):
        device_image.grad = device_kernel.grad = None
        F.conv2d(device_image, device_kernel).sin().sum().backward()
        torch.testing.assert_close(device_image.grad.cpu(), image.grad)
        torch.testing.assert_close(device_kernel.grad.cpu(), kernel.grad)


def test_shapes_that_alternate_each_keep_what_they_learned():
    cases = [CONVOLUTIONS["blocked temporary of the result's size"], CONVOLUTIONS["no temporary of the result's size"]]
    prepared = []
    for input_shape, weight_shape, padding in cases:
        image, kernel = operands(input_shape, weight_shape)
        prepared.append((image.to("openreg"), kernel.to("openreg"), padding, F.conv2d(image, kernel, padding=padding)))
    for _round in range(3):
        for device_image, device_kernel, padding, expected in prepared:
            result = F.conv2d(device_image, device_kernel, padding=padding)
            torch.testing.assert_close(result.cpu(), expected, rtol=0, atol=0)
    _, counts = counts_during(lambda: [F.conv2d(i, k, padding=p) for i, k, p, _ in prepared])
    assert counts == {"in_place": 2, "copied": 0}


def test_a_result_laid_out_unlike_its_output_is_copied_and_the_output_no_longer_lent():
    # conv2d of a channels-last input: the CPU's convolution returns a
    # channels-last result, openreg allocates the contiguous output that
    # PyTorch's fake tensors give an overrideable convolution.
    input_shape, weight_shape, padding = CONVOLUTIONS["1x1"]
    image, kernel = operands(input_shape, weight_shape)
    image = image.contiguous(memory_format=torch.channels_last)
    expected = F.conv2d(image, kernel, padding=padding)
    device_image, device_kernel = image.to("openreg"), kernel.to("openreg")
    for call in range(3):
        lent_before = _C._testing.scratch_stats()["lent_count"]
        result, counts = counts_during(lambda: F.conv2d(device_image, device_kernel, padding=padding))
        torch.testing.assert_close(result.cpu(), expected, rtol=0, atol=0)
        assert result.is_contiguous() and not expected.is_contiguous()
        assert counts == {"in_place": 0, "copied": 1}
        if call > 0:  # learned: lending this output cannot save the copy
            assert _C._testing.scratch_stats()["lent_count"] == lent_before


def test_lent_device_memory_never_enters_the_scratch_cache():
    input_shape, weight_shape, padding = CONVOLUTIONS["1x1"]
    image, kernel = operands(input_shape, weight_shape)
    device_image, device_kernel = image.to("openreg"), kernel.to("openreg")
    torch.openreg.synchronize()
    baseline = torch.openreg.memory_allocated()
    results = [F.conv2d(device_image, device_kernel, padding=padding) for _ in range(8)]
    torch.openreg.synchronize()
    stats = _C._testing.scratch_stats()
    assert stats["lent_count"] > 0
    assert stats["lent_in_use_count"] == 0  # every lent block was given back at its kernel's end
    assert stats["in_use_bytes"] == 0
    # Freeing the cache frees its blocks with the C library: a device block
    # among them would crash here.
    torch.openreg.empty_cache()
    expected = F.conv2d(image, kernel, padding=padding)
    for index in range(len(results)):
        torch.testing.assert_close(results[index].cpu(), expected, rtol=0, atol=0)
    del results
    torch.openreg.synchronize()
    assert torch.openreg.memory_allocated() == baseline


@pytest.mark.parametrize("order", [[0, 1], [1, 0]])
def test_a_result_in_another_outputs_memory_is_moved_out_before_stores(order):
    # computeIntoForTesting lends the first 64 KiB allocation outputs[0]'s
    # memory. With order [1, 0] that is result 1: storing result 0 into
    # outputs[0] first would destroy it, unless it is moved out first.
    outputs = [torch.empty(1 << 14, device="openreg") for _ in range(2)]
    _C._testing.compute_into_for_testing(outputs, order)
    torch.openreg.synchronize()
    for index, output in enumerate(outputs):
        assert torch.equal(output.cpu(), torch.full((1 << 14,), float(index + 1)))
