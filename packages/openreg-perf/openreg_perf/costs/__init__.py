"""The cost of one ATen operator call: FLOPs, bytes read and written, and the kind of kernel it is.
One module per family of operators (products, pointwise, movement), each rule registered beside it
(registry.py); call.py has what the rules read and return.

Input is an operator call as torch.profiler records it with record_shapes=True, which is how
torch.openreg.record_activity() describes it too (name, shapes, dtypes, concrete inputs);
output sizes are not recorded, so each rule derives them from the operator's semantics. Not timing
(model.py turns a Cost into seconds) and not capture (which calls to price is the caller's choice).

Conventions. A multiply-add counts 2 FLOPs. Bytes are what the kernel moves to and from device memory,
each operand counted once (caches are the time model's business), at the dtype's element size.
cost_of prices the work a call does: for a composite operator (linear, matmul, conv2d, layer_norm,
scaled_dot_product_attention, zeros, to ...) that is also the work its children report, so a caller
prices either a call or its children, never both. Views and allocations cost nothing: no kernel runs.
"""

from __future__ import annotations

from . import movement, pointwise, products  # noqa: F401  (each registers its rules)
from .call import DTYPES, KINDS, Cost, MatrixShape, OpCall, Tensor, broadcast, element_size, message_bytes, precision_of
from .registry import cost_of

__all__ = ["DTYPES", "KINDS", "Cost", "MatrixShape", "OpCall", "Tensor", "broadcast", "cost_of", "element_size",
           "message_bytes", "precision_of"]
