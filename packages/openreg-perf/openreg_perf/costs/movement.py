"""Kernels that mostly move memory: embedding and indexing, pooling, copies, the optimizers' multi-tensor
kernels, torch.compile's fused kernels, and the views and allocations that cost nothing."""

from __future__ import annotations

import math

from .call import SCALAR_TYPES, Cost, Tensor, _Args, _bytes, _cost, broadcast, element_size
from .pointwise import FLOPS_PER_ELEMENT, TRANSCENDENTALS_PER_ELEMENT
from .products import _per_dim
from .registry import rule, rule_for_prefix, rule_otherwise

# ---------------------------------------------------------------------------------- embedding, index

@rule("embedding")
def _embedding(name: str, args: _Args) -> Cost:
    """embedding(weight [V, D], indices): read the indices and the rows they pick, write those rows."""
    weight, indices = args.tensor("weight"), args.tensor("indices")
    rows = indices.numel * weight.shape[-1] * element_size(weight.dtype)
    return _cost("index", 0, indices.nbytes + rows, rows, weight)


@rule("embedding_dense_backward", "embedding_backward")
def _embedding_backward(name: str, args: _Args) -> Cost:
    """embedding_dense_backward(grad [..., D], indices, num_weights, ...): zero a [V, D] gradient,
    then add each grad row into the row its index names."""
    grad, indices = args.tensor("grad_output") or args.tensor("grad"), args.tensor("indices")
    num_weights = args.value("num_weights", 0)
    table = num_weights * grad.shape[-1] * element_size(grad.dtype)
    return _cost("index", grad.numel, grad.nbytes + indices.nbytes + grad.nbytes, table + grad.nbytes, grad)


@rule("index_select")
def _index_select(name: str, args: _Args) -> Cost:
    """index_select(self, dim, index [n]): the result is self with size n along dim."""
    source, index = args.tensor("self"), args.tensor("index")
    dim = args.value("dim", 0) % max(1, len(source.shape))
    picked = source.numel // max(1, source.shape[dim] if source.shape else 1) * index.numel
    picked_bytes = picked * element_size(source.dtype)
    return _cost("index", 0, index.nbytes + picked_bytes, picked_bytes, source)


@rule("gather")
def _gather(name: str, args: _Args) -> Cost:
    """gather(self, dim, index): the result has the index's shape."""
    source, index = args.tensor("self"), args.tensor("index")
    picked_bytes = index.numel * element_size(source.dtype)
    return _cost("index", 0, index.nbytes + picked_bytes, picked_bytes, source)


@rule("scatter", "scatter_add", "scatter_reduce")
def _scatter(name: str, args: _Args) -> Cost:
    """scatter, scatter_add, scatter_reduce (self, dim, index, src|value, ...): each index position
    writes one element (reading it first when it accumulates); out-of-place also copies self."""
    target, index, source = args.tensor("self"), args.tensor("index"), args.tensor("src")
    touched = index.numel * element_size(target.dtype)
    accumulates = "add" in name or "reduce" in name
    read = index.nbytes + (touched if source is not None else 0) + (touched if accumulates else 0)
    written = touched
    if not name.endswith("_"):
        read, written = read + target.nbytes, written + target.nbytes
    return _cost("index", index.numel if accumulates else 0, read, written, target)


@rule("index", "_unsafe_index")
def _index(name: str, args: _Args) -> Cost:
    """index(self, indices): the result is the broadcast index shape followed by the unindexed dims."""
    source = args.tensor("self")
    indices = args.tensor_list("indices") or ([args.tensor("indices")] if args.tensor("indices") else [])
    if not indices:  # indices not recorded (flat profiler events): price like a copy of self
        return _cost("index", 0, source.nbytes, source.nbytes, source, known=False)
    index_shape = broadcast(*(index.shape for index in indices))
    picked = math.prod(index_shape) * math.prod(source.shape[len(indices):])
    picked_bytes = picked * element_size(source.dtype)
    return _cost("index", 0, _bytes(indices) + picked_bytes, picked_bytes, source)


@rule("index_put", "_index_put_impl")
def _index_put(name: str, args: _Args) -> Cost:
    """index_put_, _index_put_impl_ (self, indices, values, accumulate): each value lands on one place."""
    target, values = args.tensor("self"), args.tensor("values")
    indices = args.tensor_list("indices")
    accumulate = bool(args.value("accumulate"))
    read = _bytes(indices) + values.nbytes + (values.nbytes if accumulate else 0)
    written = values.nbytes
    if not name.endswith("_"):
        read, written = read + target.nbytes, written + target.nbytes
    return _cost("index", values.numel if accumulate else 0, read, written, target, known=bool(indices))


@rule("index_add")
def _index_add(name: str, args: _Args) -> Cost:
    """index_add(self, dim, index, source, alpha): source rows added into the rows index names."""
    target, index, source = args.tensor("self"), args.tensor("index"), args.tensor("source")
    read, written = index.nbytes + 2 * source.nbytes, source.nbytes  # source, and the rows it lands on
    if not name.endswith("_"):
        read, written = read + target.nbytes, written + target.nbytes
    return _cost("index", source.numel, read, written, target)


@rule("topk", "sort")
def _select_in_order(name: str, args: _Args) -> Cost:
    """topk(self, k, dim, ...), sort(self, dim, ...): read self, write k values and their int64 indices a
    slice (sort keeps the whole slice). A radix select makes a few passes over on-chip data: one compare
    an element a pass, log2 of the slice's length passes, and one read from memory."""
    source = args.tensor("self")
    dim = args.value("dim", -1) % max(1, len(source.shape))
    length = source.shape[dim] if source.shape else 1
    kept = args.value("k", length) if name == "topk" else length
    written = source.numel // max(1, length) * kept * (element_size(source.dtype) + element_size("long int"))
    return _cost("reduction", source.numel * max(1, math.ceil(math.log2(max(2, length)))), source.nbytes,
                 written, source)


@rule("histc")
def _histc(name: str, args: _Args) -> Cost:
    """histc(self, bins, min, max): read self, add each element into its bin (an atomic add on chip)."""
    source = args.tensor("self")
    return _cost("reduction", source.numel, source.nbytes, args.value("bins", 100) * element_size(source.dtype),
                 source)


@rule("nonzero_static")
def _nonzero_static(name: str, args: _Args) -> Cost:
    """nonzero_static(self, size, fill_value): read self, write size positions of self.dim() int64 each."""
    source = args.tensor("self")
    written = args.value("size", 0) * max(1, len(source.shape)) * element_size("long int")
    return _cost("index", source.numel, source.nbytes, written, source)


# ------------------------------------------------------------------------------------------ pooling

def _pool_output(source: Tensor, args: _Args) -> tuple[tuple[int, ...], int]:
    """Output shape and window size of max_pool2d / avg_pool2d (self, kernel_size, stride, padding,
    [dilation,] ceil_mode ...): PyTorch's formula, stride defaulting to the kernel."""
    spatial = len(source.shape) - 2 if len(source.shape) == 4 else len(source.shape) - 1
    kernel = _per_dim(args.value("kernel_size"), spatial, 1)
    stride = _per_dim(args.value("stride") or list(kernel), spatial, 1)
    padding = _per_dim(args.value("padding"), spatial, 0)
    dilation = _per_dim(args.value("dilation"), spatial, 1)  # average pooling has none
    ceil = bool(args.value("ceil_mode"))
    rounding = math.ceil if ceil else math.floor
    out = tuple(rounding((size + 2 * p - d * (k - 1) - 1) / st) + 1 for size, k, st, p, d in
                zip(source.shape[-spatial:], kernel, stride, padding, dilation, strict=True))
    return (*source.shape[:-spatial], *out), math.prod(kernel)


@rule("max_pool2d_with_indices", "max_pool2d", "avg_pool2d")
def _pool(name: str, args: _Args) -> Cost:
    """max_pool2d_with_indices / avg_pool2d: read the input once, one comparison or addition per window
    element; write the output (and max pooling's int64 indices)."""
    source = args.tensor("self")
    shape, window = _pool_output(source, args)
    out = Tensor(shape, source.dtype)
    written = out.nbytes + (out.numel * element_size("long int") if "max" in name else 0)
    return _cost("reduction", out.numel * window, source.nbytes, written, source)


@rule("max_pool2d_with_indices_backward", "avg_pool2d_backward")
def _pool_backward(name: str, args: _Args) -> Cost:
    """max_pool2d_with_indices_backward (grad_output, self, ..., indices) / avg_pool2d_backward
    (grad_output, self, ...): write a gradient of self's size, reading grad_output (and the indices)."""
    grad, source = args.tensor("grad_output"), args.tensor("self")
    indices = args.tensor("indices")
    read = grad.nbytes + (indices.nbytes if indices is not None else 0)
    return _cost("reduction", grad.numel, read, source.numel * element_size(grad.dtype), grad)


@rule("_adaptive_avg_pool2d", "adaptive_avg_pool2d")
def _adaptive_average(name: str, args: _Args) -> Cost:
    """_adaptive_avg_pool2d (self, output_size): each output the mean of its window of the input."""
    source = args.tensor("self")
    size = list(args.value("output_size", [1, 1]))
    out = Tensor((*source.shape[: len(source.shape) - len(size)], *size), source.dtype)
    return _cost("reduction", source.numel, source.nbytes, out.nbytes, source)


@rule("_adaptive_avg_pool2d_backward")
def _adaptive_average_backward(name: str, args: _Args) -> Cost:
    """_adaptive_avg_pool2d_backward (grad_output, self): spread each gradient over its window."""
    grad, source = args.tensor("grad_output"), args.tensor("self")
    return _cost("reduction", source.numel, grad.nbytes, source.numel * element_size(grad.dtype), grad)


# ------------------------------------------------------------------------------------------- copies

@rule("copy")
def _copy(name: str, args: _Args) -> Cost:
    """copy_(self, src): read src in its dtype, write self in its own."""
    target, source = args.tensor("self"), args.tensor("src")
    return _cost("copy", 0, source.nbytes, target.nbytes, source)


@rule("_to_copy", "to", "type_as")
def _to_copy(name: str, args: _Args) -> Cost:
    """_to_copy / to / type_as (self, dtype or other, ...): a cast, or a plain copy when no dtype is given.
    `to` and `type_as` into the tensor's own dtype return self and run nothing (a change of device shows
    up as their _to_copy and copy_ children)."""
    source, other = args.tensor("self"), args.tensor("other")
    dtype = SCALAR_TYPES.get(args.value("dtype"), source.dtype)
    if name == "type_as" and other is not None:
        dtype = other.dtype
    if name in ("to", "type_as") and dtype == source.dtype:
        return _free(name, args)
    return _cost("copy", 0, source.nbytes, source.numel * element_size(dtype), source)


@rule("_copy_from", "_copy_from_and_resize")
def _copy_from(name: str, args: _Args) -> Cost:
    """_copy_from(self, dst, non_blocking): copy_ as a backend implements it, source first."""
    source, target = args.tensor("self"), args.tensor("dst")
    return _cost("copy", 0, source.nbytes, target.nbytes, source)


@rule("cat")
def _cat(name: str, args: _Args) -> Cost:
    """cat(tensors, dim): read every tensor once, write them side by side."""
    parts = args.tensor_list("tensors")
    if not parts:
        return _default(name, args)
    return _cost("copy", 0, _bytes(parts), _bytes(parts), parts[0])


@rule("arange")
def _arange(name: str, args: _Args) -> Cost:
    """arange(end) / arange(start, end[, step]) ...: write one element per step; the dtype follows the
    bounds (int64 unless one is a float)."""
    bounds = start, end, step = args.value("start", 0), args.value("end"), args.value("step", 1)
    if not all(isinstance(number, int | float) and not isinstance(number, bool) for number in bounds):
        return _default(name, args)
    count = max(0, math.ceil((end - start) / step)) if step else 0
    dtype = "float" if any(isinstance(b, float) for b in bounds) else "long int"
    written = Tensor((count,), dtype)
    return _cost("elementwise", count, 0, written.nbytes, written)


@rule("nll_loss_forward", "nll_loss", "nll_loss2d_forward")
def _nll_loss(name: str, args: _Args) -> Cost:
    """nll_loss_forward(self, target, weight, reduction, ignore_index): read one score per row and the
    targets; write the loss (per row without reduction) and the total weight."""
    scores, target = args.tensor("self"), args.tensor("target")
    rows = target.numel if target else 1
    written = (rows if args.value("reduction") == 0 else 1) * element_size(scores.dtype) + element_size(scores.dtype)
    return _cost("reduction", rows, rows * element_size(scores.dtype) + (target.nbytes if target else 0), written,
                 scores)


@rule("nll_loss_backward", "nll_loss2d_backward")
def _nll_loss_backward(name: str, args: _Args) -> Cost:
    """nll_loss_backward(grad_output, self, target, ...): write a gradient of self's size (zeros, and one
    element per row), read the targets."""
    scores, target = args.tensor("self"), args.tensor("target")
    return _cost("elementwise", scores.numel, target.nbytes if target else 0, scores.nbytes, scores)


@rule("clone", "contiguous")
def _clone(name: str, args: _Args) -> Cost:
    """clone, contiguous (self): read and write the tensor once."""
    source = args.tensor("self")
    return _cost("copy", 0, source.nbytes, source.nbytes, source)


@rule("item", "_local_scalar_dense")
def _scalar_read(name: str, args: _Args) -> Cost:
    """item / _local_scalar_dense: one element read back to the host."""
    source = args.tensor("self")
    return _cost("copy", 0, element_size(source.dtype), 0, source)


# ---------------------------------------------------------------------------------------- optimizers

@rule_for_prefix("_foreach_")
def _foreach(name: str, args: _Args) -> Cost:
    """_foreach_<op>[_] over TensorLists: the elementwise rule per tensor, summed; in-place ones write
    the first list. _foreach_norm is a reduction to one value per tensor."""
    lists = [args.tensor_list(index) for index in range(len(args)) if args.dtypes[index] == "TensorList"]
    first = lists[0] if lists else []
    op = name.removeprefix("_foreach_").removesuffix("_")
    numel = sum(tensor.numel for tensor in first)
    read = sum(_bytes(tensors) for tensors in lists)
    if op == "norm":
        return _cost("optimizer", 2 * numel, read, len(first) * 4, first[0] if first else None, known=bool(first))
    flops = numel * FLOPS_PER_ELEMENT.get(op, 1)
    return _cost("optimizer", flops, read, _bytes(first), first[0] if first else None, known=bool(first))


@rule("_amp_foreach_non_finite_check_and_unscale")
def _amp_unscale(name: str, args: _Args) -> Cost:
    """GradScaler's unscale (grads, found_inf, inv_scale): every gradient multiplied by inv_scale in place,
    and any element that is not finite noted in found_inf; a multiply and a check per element."""
    grads = args.tensor_list("self")
    numel = sum(tensor.numel for tensor in grads)
    return _cost("optimizer", 2 * numel, _bytes(grads), _bytes(grads), grads[0] if grads else None, known=bool(grads))


@rule("_amp_update_scale")
def _amp_update_scale(name: str, args: _Args) -> Cost:
    """GradScaler's update (scale, growth_tracker, found_inf, ...): one thread reads the three one-element
    tensors and writes the scale and the tracker."""
    scalars = [args.tensor(key) for key in ("self", "growth_tracker", "found_inf")]
    return _cost("optimizer", 2, _bytes(scalars), _bytes(scalars[:2]), scalars[0])


# FLOPs per parameter of one fused step: Adam(W) updates two moments, corrects their bias, takes a
# square root and a division, and decays the weight; SGD with momentum updates one buffer.
ADAM_FLOPS_PER_PARAMETER = 15
SGD_FLOPS_PER_PARAMETER = 4


@rule("_fused_adam", "_fused_adamw")
def _fused_adam(name: str, args: _Args) -> Cost:
    """_fused_adam_ / _fused_adamw_ (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
    lr, beta1, beta2, weight_decay, eps, amsgrad, ...): reads params, grads and both moments (and the
    running maxima with amsgrad); writes params and the moments."""
    params, grads, averages, squares, maxima = (args.tensor_list(name) for name in
                                                ("self", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs"))
    amsgrad = bool(args.value("amsgrad"))
    state = [params, averages, squares] + ([maxima] if amsgrad else [])
    read = sum(_bytes(tensors) for tensors in state) + _bytes(grads)
    written = sum(_bytes(tensors) for tensors in state)
    flops = ADAM_FLOPS_PER_PARAMETER * sum(tensor.numel for tensor in params)
    return _cost("optimizer", flops, read, written, params[0] if params else None, known=bool(params))


@rule("_fused_sgd")
def _fused_sgd(name: str, args: _Args) -> Cost:
    """_fused_sgd_ (params, grads, momentum_buffers, weight_decay, momentum, lr, ...): with momentum
    the buffers are read and written too."""
    params, grads, buffers = (args.tensor_list(name) for name in ("self", "grads", "momentum_buffer_list"))
    momentum = bool(args.value("momentum"))
    state = [params] + ([buffers] if momentum else [])
    read = sum(_bytes(tensors) for tensors in state) + _bytes(grads)
    flops = (SGD_FLOPS_PER_PARAMETER if momentum else 2) * sum(tensor.numel for tensor in params)
    written = sum(_bytes(tensors) for tensors in state)
    return _cost("optimizer", flops, read, written, params[0] if params else None, known=bool(params))


# ---------------------------------------------------------------------------------- compiled kernels

# torch.compile's kernels for openreg (Inductor's C++ code generation) are named after the operators
# they fuse, "cpp_fused_add_gelu_mul_sum_0"; torch-openreg describes each launch as a call of that
# name whose arguments are the kernel's buffers.
COMPILED_KERNEL_PREFIX = "cpp_fused_"
_FUSED_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "var", "std", "prod", "argmax", "argmin", "any",
                     "all", "logsumexp"}
_FUSED_NORMS = {"softmax", "norm", "layer", "batch", "group", "rms"}


@rule_for_prefix(COMPILED_KERNEL_PREFIX)
def _compiled_kernel(name: str, args: _Args) -> Cost:
    """One fused group: each of its buffers moved once (Inductor passes outputs after inputs: the last
    buffer is written, the others read), and the arithmetic of the operators its name lists, per
    element of its largest buffer (transcendentals apart). A reduction or a norm in the group makes it
    one of those kernels."""
    tensors = args.tensors()
    if not tensors:
        return _cost("elementwise", 0, 0, 0, None, known=False)
    ops = name.removeprefix(COMPILED_KERNEL_PREFIX).split("_")
    numel = max(tensor.numel for tensor in tensors)
    flops = numel * sum(FLOPS_PER_ELEMENT.get(op, 1) for op in ops if not op.isdigit())
    transcendentals = numel * sum(TRANSCENDENTALS_PER_ELEMENT.get(op, 0) for op in ops)
    kind = "norm" if _FUSED_NORMS & set(ops) else "reduction" if _FUSED_REDUCTIONS & set(ops) else "elementwise"
    read, written = _bytes(tensors[:-1]), tensors[-1].nbytes
    return _cost(kind, flops, read, written, tensors[0], transcendentals=transcendentals)


# ------------------------------------------------------------------------------- free and default

_FREE = {"view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose", "permute", "expand", "expand_as",
         "as_strided", "slice", "select", "unsqueeze", "squeeze", "flatten", "unflatten", "narrow", "alias",
         "detach", "lift_fresh", "view_as", "unbind", "split", "split_with_sizes", "chunk", "diagonal",
         "movedim", "swapaxes", "numpy_T", "mT", "resolve_conj", "resolve_neg", "empty", "empty_like",
         "empty_strided", "new_empty", "new_empty_strided", "resize", "set", "result_type", "size", "stride",
         "is_contiguous", "is_nonzero", "_has_compatible_shallow_copy_type", "record_stream", "unfold"}


@rule(*_FREE)
def _free(name: str, args: _Args) -> Cost:
    """Views and allocations: metadata only, no kernel."""
    first = next(iter(args.tensors()), None)
    return _cost("view", 0, 0, 0, first)


@rule_otherwise
def _default(name: str, args: _Args) -> Cost:
    """Any other operator: read every tensor argument, write what it returned where the recording noted
    it, else as much as the largest argument (the usual same-shaped result; an in-place op writes its
    first argument). No FLOPs counted; known=False."""
    tensors = args.tensors()
    if not tensors:
        return _cost("default", 0, 0, _bytes(args.outputs), None, known=False)
    if args.outputs:
        written = _bytes(args.outputs)
    else:
        written = tensors[0].nbytes if name.endswith("_") else max(tensor.nbytes for tensor in tensors)
    return _cost("default", 0, _bytes(tensors), written, tensors[0], known=False)
