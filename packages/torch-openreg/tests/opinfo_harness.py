"""Runs PyTorch's OpInfo sample inputs on openreg and on the CPU and compares them.

Shared by tests/test_opinfo.py (the expected-to-pass list, under pytest) and
tools/opinfo_coverage.py (the coverage report over the whole op_db). Not a
test module: pytest collects only ``test_*.py``; both load this file by path
(tests run with --import-mode=importlib, and tools/ is not a package).

An *entry* is one OpInfo (``name`` or ``name.variant``, as PyTorch's test
ids spell it), one dtype and one mode:

* ``forward``: the first N sample inputs (``op.sample_inputs_func`` on the
  CPU, seeded before each sample) are copied twice - to openreg and, as the
  reference, to the CPU (``move_sample``: every tensor in input, args and
  kwargs, through lists, tuples and dicts, with its whole storage, strides
  and offset; a ``device='cpu'`` kwarg of factory samples becomes openreg).
  The op runs on both; the outputs, after the sample's
  ``output_process_fn_grad`` (which PyTorch uses to make e.g. SVD's signs
  comparable), must agree - tensors under ``torch.testing.assert_close``
  with the dtype's default tolerances (or the OpInfo's own
  toleranceOverride/precisionOverride where it declares one), containers
  element by element, other values with ==.
* ``backward`` (float32, ``op.supports_autograd`` only): the same with
  ``requires_grad=True``; the gradients of the sum of every differentiable
  output (real and imaginary parts for complex ones) with respect to every
  input tensor that requires grad must agree the same way.

``Outcome.fallbacks`` is torch.openreg.fallback_counts() over the openreg
run (reset before it, read after synchronising): empty means the entry ran
on dedicated kernels and the device executor only.

Exclusions, all decided by PyTorch's OpInfo, none by a list of ours:

* values are not compared, only output structure, shapes and dtypes, when
  the OpInfo marks the output random or undefined (``unchecked_reason``:
  its test_compare_cpu skip, or wrapper_set_seed); the reason is kept in
  ``Outcome.unchecked``;
* a tensor that the sample function puts on the CPU whatever the device
  under test (tensor_split's indices, index_put's CPU index) stays on the
  CPU (``host_tensors``);
* a sample whose CPU reference run raises is skipped (``Outcome.skipped``);
  an entry none of whose samples could be compared is ``untested``, not a
  pass, so it never enters the expected-to-pass list.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import torch

DEVICE = "openreg"
# Samples per entry: the first N that the OpInfo yields for a fixed seed.
DEFAULT_SAMPLES = 3
SEED = 1234
FORWARD_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# Ops without float32 on the CPU (integer- or complex-only ops) are exercised
# in the first of these they support, so that every OpInfo runs somewhere.
SUBSTITUTE_DTYPES = (torch.int64, torch.int32, torch.complex64, torch.bool, torch.uint8,
                     torch.int16, torch.int8, torch.float64, torch.complex128)
MODES = ("forward", "backward")
HERE = Path(__file__).resolve().parent
EXPECTED_FILE = HERE / "opinfo_expected_to_pass.txt"


# ------------------------------------------------------------------ op_db


_OPS: dict[str, object] | None = None


def op_table() -> dict[str, object]:
    """Every OpInfo of ``op_db`` by full name (``name`` or ``name.variant``)."""
    global _OPS
    if _OPS is None:
        from torch.testing._internal.common_methods_invocations import op_db

        table = {}
        for op in op_db:
            name = full_name(op)
            assert name not in table, f"two OpInfos named {name}"
            table[name] = op
        _OPS = table
    return _OPS


def full_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"not a dtype: {name}")
    return dtype


# ---------------------------------------------------------------- entries


@dataclasses.dataclass(frozen=True, order=True)
class Entry:
    """One line of the expected-to-pass list: ``op dtype [backward]``."""

    op: str
    dtype: str = "float32"
    mode: str = "forward"

    def __str__(self) -> str:
        return f"{self.op} {self.dtype}" + (" backward" if self.mode == "backward" else "")

    @staticmethod
    def parse(line: str) -> Entry:
        """``op`` alone means ``op float32`` (forward); ``op dtype backward`` the gradients."""
        words = line.split()
        if not 1 <= len(words) <= 3 or (len(words) == 3 and words[2] not in MODES):
            raise ValueError(f"expected 'op [dtype [backward]]', got {line!r}")
        entry = Entry(*words)
        parse_dtype(entry.dtype)
        return entry


def default_dtypes(op, extra_dtypes: bool = True) -> list[torch.dtype]:
    """float32 (or a substitute, see SUBSTITUTE_DTYPES), then float16 and
    bfloat16 where the OpInfo supports them on the CPU."""
    supported = op.supported_dtypes("cpu")
    wanted = FORWARD_DTYPES if extra_dtypes else FORWARD_DTYPES[:1]
    dtypes = [d for d in wanted if d in supported]
    if torch.float32 not in supported:
        substitute = next((d for d in SUBSTITUTE_DTYPES if d in supported), None)
        if substitute is None and supported:
            substitute = sorted(supported, key=str)[0]
        if substitute is not None:
            dtypes.insert(0, substitute)
    return dtypes


def entries_for(op, dtypes: Iterable[torch.dtype] | None = None, backward: bool = True) -> list[Entry]:
    """The entries an OpInfo offers: forward per dtype, backward in float32."""
    name = full_name(op)
    chosen = default_dtypes(op) if dtypes is None else [d for d in dtypes if d in op.supported_dtypes("cpu")]
    entries = [Entry(name, dtype_name(d)) for d in chosen]
    if backward and op.supports_autograd and torch.float32 in op.supported_dtypes("cpu"):
        entries.append(Entry(name, "float32", "backward"))
    return entries


def read_expected(path: Path = EXPECTED_FILE) -> list[Entry]:
    entries = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            entries.append(Entry.parse(line))
    return entries


EXPECTED_HEADER = """\
# OpInfo entries that pass on openreg: tests/test_opinfo.py runs every line
# and each must pass (no xfail). This list only grows: an entry is added
# when it starts passing (tools/opinfo_coverage.py --write-expected adds the
# passing entries and never removes one), and a change that makes an entry
# fail is a regression to fix, not a line to delete.
#
# Format, one per line, sorted: <op>[.<variant>] [<dtype> [backward]]
#   <op>[.<variant>]  the OpInfo as PyTorch's test ids name it
#   <dtype>           default float32
#   backward          gradients (float32) instead of forward outputs
"""


def write_expected(entries: Iterable[Entry], path: Path = EXPECTED_FILE) -> None:
    lines = sorted({str(e) for e in entries})
    path.write_text(EXPECTED_HEADER + "".join(f"{line}\n" for line in lines))


# -------------------------------------------------------- moving samples


def _rebuild(container, items: list):
    if isinstance(container, list):
        return items
    if hasattr(container, "_fields"):  # namedtuple
        return type(container)(*items)
    if type(container) is tuple:
        return tuple(items)
    try:  # torch.return_types structseq and other tuple subclasses
        return type(container)(items)
    except TypeError:
        return tuple(items)


def map_tensors(value, fn: Callable[[torch.Tensor], object]):
    """``value`` with ``fn`` applied to every tensor inside it (through lists,
    tuples, named tuples and dicts); anything else is returned as it is."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return _rebuild(value, [map_tensors(v, fn) for v in value])
    if isinstance(value, Mapping):
        return {k: map_tensors(v, fn) for k, v in value.items()}
    return value


def tensors_in(value) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    map_tensors(value, lambda t: found.append(t))
    return found


def _copy_to(t: torch.Tensor, device: str) -> torch.Tensor:
    """A copy of ``t`` on ``device``: the whole storage is copied and the
    same view (sizes, strides, storage offset) taken of it, so that
    non-contiguous, expanded and partial views (as_strided.partial_views
    reads outside its input's elements) arrive as they are. A leaf that
    requires grad if ``t`` does."""
    with torch.no_grad():
        source = t.detach()
        if source.layout != torch.strided or source.is_conj() or source.is_neg() or source.is_quantized:
            copy = source.to(device)
        else:
            size = source.untyped_storage().nbytes() // source.element_size()
            if source.is_contiguous() and source.storage_offset() == 0 and source.numel() == size:
                copy = source.to(device, copy=True)
            else:
                flat = torch.empty(0, dtype=source.dtype).set_(source.untyped_storage(), 0, (size,), (1,))
                copy = flat.to(device, copy=True).as_strided(source.size(), source.stride(),
                                                             source.storage_offset())
                copy = copy.detach()  # not a view made under no_grad: in-place ops stay allowed
    if t.requires_grad:
        copy.requires_grad_(True)
    return copy


def _map_devices(kwargs: Mapping, device: str) -> dict:
    """Factory samples name their device in kwargs ('cpu'): retarget them."""
    out = {}
    for key, value in kwargs.items():
        if key == "device" and (value == "cpu" or value == torch.device("cpu")):
            value = device
        out[key] = value
    return out


def generate_samples(op, device: str, dtype: torch.dtype, requires_grad: bool, samples: int) -> list:
    """The first ``samples`` sample inputs of ``op``: what ``op.sample_inputs``
    yields, seeded before each sample as it does, but without its
    TrackedInputIter wrapper, which calls inspect.stack() on creation: slow,
    and the frames it keeps form reference cycles through the caller's frame
    that keep the caller's device tensors alive until the next gc.collect()."""
    from torch.testing._internal.common_utils import set_rng_seed

    set_rng_seed(SEED)
    generator = iter(op.sample_inputs_func(op, device, dtype, requires_grad))
    out = []
    for _ in range(samples):
        try:
            out.append(next(generator))
        except StopIteration:
            break
        set_rng_seed(SEED + len(out))
    return out


def host_tensors(op, dtype: torch.dtype, samples: int, requires_grad: bool) -> list[list[bool]] | None:
    """Per sample, per tensor (in ``tensors_in`` order): whether the sample
    function puts it on the CPU whatever the device under test (tensor_split's
    indices, index_put's CPU index, narrow's start). Found by generating the
    same samples for the meta device: what is not on meta then was placed
    on the CPU on purpose. None if that cannot be told (generation on meta
    fails or yields different samples): then every tensor moves."""
    try:
        probes = generate_samples(op, "meta", dtype, requires_grad, samples)
    except Exception:
        return None
    flags = []
    for probe in probes:
        tensors = tensors_in((probe.input, probe.args, probe.kwargs))
        flags.append([t.device.type == "cpu" for t in tensors])
    return flags


def move_sample(sample, device: str, keep_on_cpu: list[bool] | None = None):
    """(input, args, kwargs) of ``sample`` with every tensor copied to
    ``device`` (but those flagged in ``keep_on_cpu``, which are copied and
    stay on the CPU) and a 'device' kwarg naming the CPU renamed."""
    position = itertools.count()

    def fn(t: torch.Tensor) -> torch.Tensor:
        i = next(position)
        return _copy_to(t, "cpu" if keep_on_cpu and keep_on_cpu[i] else device)

    moved = map_tensors((sample.input, list(sample.args), dict(sample.kwargs)), fn)
    return moved[0], moved[1], _map_devices(moved[2], device)


# ------------------------------------------------------------- comparing


def _tolerance_overrides(op, dtype: torch.dtype) -> list[tuple[float, float]]:
    """(atol, rtol) pairs the OpInfo declares for this dtype: bare
    toleranceOverride/precisionOverride decorators, and DecorateInfos aimed
    at TestCommon.test_compare_cpu (or at every test)."""
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo

    found = []
    for decorator in op.decorators:
        candidates = [decorator]
        if isinstance(decorator, DecorateInfo):
            if not decorator.is_active("TestCommon", "test_compare_cpu", DEVICE, dtype, {}):
                continue
            candidates = decorator.decorators
        for candidate in candidates:
            if isinstance(candidate, toleranceOverride) and dtype in candidate.d:
                found.append((candidate.d[dtype].atol, candidate.d[dtype].rtol))
            elif isinstance(candidate, precisionOverride) and dtype in candidate.d:
                found.append((candidate.d[dtype], 0.0))
    return found


def tolerance(op, dtype: torch.dtype) -> tuple[float, float] | None:
    """None: assert_close's defaults for the dtype. Otherwise the larger of
    those defaults and the OpInfo's override, per component."""
    overrides = _tolerance_overrides(op, dtype)
    if not overrides:
        return None
    from torch.testing._comparison import default_tolerances

    rtol, atol = default_tolerances(dtype)
    return max([atol] + [a for a, _ in overrides]), max([rtol] + [r for _, r in overrides])


def _compare_cpu_skip(op, dtype: torch.dtype) -> str | None:
    """The reason the OpInfo gives for skipping TestCommon.test_compare_cpu
    at this dtype, or None."""
    from torch.testing._internal.opinfo.core import DecorateInfo

    for decorator in op.decorators:
        if not isinstance(decorator, DecorateInfo):
            continue
        if decorator.test_name != "test_compare_cpu":
            continue
        if not decorator.is_active("TestCommon", "test_compare_cpu", DEVICE, dtype, {}):
            continue
        for fn in decorator.decorators:
            if "skip" in getattr(fn, "__qualname__", ""):
                cells = [c.cell_contents for c in (fn.__closure__ or ())]
                return next((c for c in cells if isinstance(c, str)), "skipped")
    return None


def _names_used(fn, depth: int = 0) -> set[str]:
    """Global names a callable (a lambda, a partial, what they close over) refers to."""
    if depth > 3 or fn is None:
        return set()
    code = getattr(fn, "__code__", None)
    if code is None:
        return _names_used(getattr(fn, "func", None), depth + 1)  # functools.partial
    names = set(code.co_names)
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if callable(value):
            names |= _names_used(value, depth + 1)
    return names


def unchecked_reason(op, dtype: torch.dtype) -> str | None:
    """Why this entry's values cannot be compared with the CPU's, as the
    OpInfo says it, or None. Two marks count:

    * the OpInfo skips TestCommon.test_compare_cpu at this dtype (the test
      in which PyTorch compares a device to the CPU): its reason is given
      ("output is non-deterministic" for random and uninitialised outputs,
      float -> integer overflow for long/short, ...);
    * the OpInfo calls the op through ``wrapper_set_seed``, PyTorch's mark
      of an op whose output depends on the random generator (randn, randint,
      alpha_dropout, ...). openreg draws its random numbers from its own
      generator, so such values never equal the CPU's. (That also leaves
      ``item`` and ``feature_alpha_dropout.without_train``, which the OpInfo
      wraps the same way, with structural checks only.)
    """
    reason = _compare_cpu_skip(op, dtype)
    if reason is None and "wrapper_set_seed" in _names_used(op.op):
        reason = "random: the OpInfo runs it under wrapper_set_seed"
    return reason


def to_cpu(value):
    return map_tensors(value, lambda t: t.detach().cpu() if t.device.type == DEVICE else t.detach())


def _assert_close(actual, expected, *, tol: tuple[float, float] | None, path: str):
    atol, rtol = tol if tol is not None else (None, None)
    try:
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
    except AssertionError as error:
        raise AssertionError(f"{path}: {error}") from None


def assert_same(actual, expected, *, tol: tuple[float, float] | None, values: bool, path: str = "output"):
    """``actual`` (already on the CPU) equals ``expected``: tensors under
    assert_close, containers element by element, other values with ==."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise AssertionError(f"{path}: expected a tensor, got {type(actual).__name__}")
        if not values:
            if (actual.shape, actual.dtype) != (expected.shape, expected.dtype):
                raise AssertionError(f"{path}: expected {tuple(expected.shape)} {expected.dtype}, "
                                     f"got {tuple(actual.shape)} {actual.dtype}")
            return
        _assert_close(actual, expected, tol=tol, path=path)
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise AssertionError(f"{path}: expected a sequence of {len(expected)}, got {actual!r}"[:300])
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, tol=tol, values=values, path=f"{path}[{i}]")
        return
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping) or set(actual) != set(expected):
            raise AssertionError(f"{path}: expected keys {sorted(expected)}")
        for key in expected:
            assert_same(actual[key], expected[key], tol=tol, values=values, path=f"{path}[{key!r}]")
        return
    if not values:
        return
    if isinstance(expected, float) and isinstance(actual, float) and math.isnan(expected) and math.isnan(actual):
        return
    if isinstance(expected, (int, float, complex)) and not isinstance(expected, bool):
        _assert_close(actual, expected, tol=tol, path=path)
        return
    if actual != expected:
        raise AssertionError(f"{path}: expected {expected!r}, got {actual!r}"[:300])


# ---------------------------------------------------------------- running


@dataclasses.dataclass
class Outcome:
    """What running one entry did.

    status: ``pass``; ``fail`` (openreg raised where the CPU did not, or the
    values differ); ``untested`` (no sample could be compared).
    """

    entry: Entry
    status: str = "untested"
    error_type: str = ""  # exception type, or "Mismatch"
    message: str = ""  # first line of the error
    detail: str = ""  # longer text (traceback or assert_close report)
    fallbacks: dict = dataclasses.field(default_factory=dict)  # aten op -> calls through the CPU fallback
    executor: dict = dataclasses.field(default_factory=dict)  # aten op -> [async, sync] device executor calls
    samples: int = 0  # samples compared
    skipped: int = 0  # samples not compared (CPU raised)
    unchecked: str | None = None  # why values were not compared (the OpInfo's reason)

    @property
    def native(self) -> bool:
        return not self.fallbacks

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["entry"] = str(self.entry)
        return data


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else ""


def _synchronize() -> None:
    for device in range(torch.openreg.device_count()):
        torch.openreg.synchronize(device)


def _recover_device(error: BaseException) -> None:
    """A kernel that failed on a device leaves a sticky error; the simulator
    (unlike a real GPU) can clear it, so the next entry starts clean. Every
    device is reset, whichever one failed (not only the current one); each
    reset first waits for the device's queued work, and nothing else runs
    meanwhile, so no later entry sees results of work skipped while the
    error stood."""
    if "sticky" in str(error):
        import openreg_runtime

        for device in range(torch.openreg.device_count()):
            with torch.openreg.device(device):
                openreg_runtime.device_reset()


def _add_counts(total: dict, counts: Mapping) -> None:
    for name, value in counts.items():
        if isinstance(value, tuple):
            old = total.get(name, [0, 0])
            total[name] = [old[0] + value[0], old[1] + value[1]]
        else:
            total[name] = total.get(name, 0) + value


def _differentiable(outputs) -> list[torch.Tensor]:
    return [t for t in tensors_in(outputs) if t.requires_grad and (t.is_floating_point() or t.is_complex())]


def _run_sample(op, sample, device_sample, backward: bool):
    """Runs the op once (and its backward); returns (outputs or gradients)."""
    inp, args, kwargs = device_sample
    torch.manual_seed(SEED)
    out = op(inp, *args, **kwargs)
    out = sample.output_process_fn_grad(out)
    if not backward:
        return out
    differentiable = _differentiable(out)
    leaves = [t for t in tensors_in((inp, args, kwargs)) if t.requires_grad]
    if not differentiable or not leaves:
        return None
    # torch.view_as_real, not the Tensor.real/.imag getters: a getter keeps
    # the GIL while its op waits for the stream, and a stream worker that
    # frees the last reference to a tensor Python once owned needs the GIL:
    # a deadlock (seen here with view_as_real on the CPU fallback).
    total = sum(torch.view_as_real(t.resolve_conj()).sum() if t.is_complex() else t.sum() for t in differentiable)
    grads = torch.autograd.grad(total, leaves, allow_unused=True)
    return list(grads)


def run_entry(entry: Entry, samples: int = DEFAULT_SAMPLES, op=None) -> Outcome:
    """Runs ``entry`` on openreg and on the CPU; never raises for a failure of
    the op (the Outcome says what happened)."""
    op = op_table()[entry.op] if op is None else op
    dtype = parse_dtype(entry.dtype)
    backward = entry.mode == "backward"
    outcome = Outcome(entry)
    outcome.unchecked = unchecked_reason(op, dtype)
    tol = tolerance(op, dtype)
    try:
        inputs = generate_samples(op, "cpu", dtype, backward, samples)
    except Exception as error:  # the OpInfo cannot make samples here: nothing to test
        outcome.error_type, outcome.message = type(error).__name__, "sample_inputs: " + _first_line(error)
        return outcome
    on_host = host_tensors(op, dtype, samples, backward)
    if on_host is not None and len(on_host) != len(inputs):
        on_host = None
    for index, sample in enumerate(inputs):
        keep = on_host[index] if on_host is not None else None
        if keep is not None and len(keep) != len(tensors_in((sample.input, sample.args, sample.kwargs))):
            keep = None
        # Fresh copies for each side: some ops write their inputs.
        device_sample = move_sample(sample, DEVICE, keep)
        cpu_sample = move_sample(sample, "cpu")
        try:
            expected = _run_sample(op, sample, cpu_sample, backward)
        except Exception:
            outcome.skipped += 1
            continue
        torch.openreg.reset_fallback_counts()
        try:
            actual = _run_sample(op, sample, device_sample, backward)
            _synchronize()
            actual = to_cpu(actual)
        except Exception as error:
            _recover_device(error)
            outcome.status = "fail"
            outcome.error_type, outcome.message = type(error).__name__, _first_line(error)
            outcome.detail = f"sample {index}: {sample.summary() if hasattr(sample, 'summary') else sample}\n" + \
                "".join(traceback.format_exception(error, limit=-8))
            return outcome
        finally:
            _add_counts(outcome.fallbacks, torch.openreg.fallback_counts())
            _add_counts(outcome.executor, torch.openreg.executor_counts())
            torch.openreg.reset_fallback_counts()
        if expected is None and actual is None:
            continue  # nothing differentiable in this sample
        try:
            assert_same(actual, expected, tol=tol, values=outcome.unchecked is None,
                        path="grad" if backward else "output")
        except AssertionError as error:
            outcome.status = "fail"
            outcome.error_type, outcome.message = "Mismatch", _first_line(error)
            outcome.detail = f"sample {index}: {sample}\n{error}"[:4000]
            return outcome
        outcome.samples += 1
    if outcome.samples:
        outcome.status = "pass"
    elif not outcome.message:
        outcome.message = f"no comparable sample ({len(inputs)} generated, {outcome.skipped} raised on the CPU)"
    return outcome
