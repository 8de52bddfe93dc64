"""OpenReg's overrides for the conformance kit (python -m openreg_conformance
--device openreg --overrides this file): what a vendor writes for its own
backend. The kit's operators group compares every OpInfo of PyTorch's op_db
with the CPU; these are the operators whose comparison means nothing on
openreg, by reason (skipped with it, and listed in the report).
"""

# LITERALINCLUDE START: CONFORMANCE_OVERRIDES
NOT_COMPARABLE = {
    # openreg's generator is a stream of its own, as CUDA's is: the same seed
    # gives other values than the CPU's (test_random.py checks distributions).
    "random values": [
        "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
        "normal.in_place", "normal.number_mean", "uniform", "rand_like", "randint_like", "randn_like",
        "nn.functional.alpha_dropout", "nn.functional.dropout", "nn.functional.dropout2d",
        "nn.functional.dropout3d", "nn.functional.feature_alpha_dropout.with_train",
        "nn.functional.fractional_max_pool3d", "nn.functional.multi_head_attention_forward",
        "nn.functional.rrelu", "nn.functional.scaled_dot_product_attention",
    ],
    # The values of memory never written are undefined, on any device.
    "uninitialized memory": [
        "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided",
    ],
    # The sample reads storage outside its view, which a copy to the CPU
    # does not carry.
    "storage beyond the view": ["as_strided.partial_views"],
    # openreg registers no sparse kernels (the SparsePrivateUse1 key); the
    # dispatcher refuses, naming the key.
    "sparse layouts": ["sparse.sampled_addmm", "to_sparse"],
}
# LITERALINCLUDE END: CONFORMANCE_OVERRIDES

# LITERALINCLUDE START: CONFORMANCE_WIDER
# Beyond the kit's float32 forward comparison: the half-precision types a
# model trains in, and every operator's gradients.
COMPARED_DTYPES = ("float32", "float16", "bfloat16")
COMPARE_GRADIENTS = True
# LITERALINCLUDE END: CONFORMANCE_WIDER
