"""Stream capture and graphs: work queued on a capturing stream is recorded,
not run; a graph launches it again as a whole; calls that would wait for the
capture fail and invalidate it, and the stream stays usable."""

import ctypes
import functools
import gc
import threading
import weakref

import openreg_runtime as ort
import pytest

pytestmark = pytest.mark.sanitizer_safe


class Counter:
    """A kernel body that counts its runs (a class, so tests can weakref it)."""

    def __init__(self, log: list, label: str) -> None:
        self.log = log
        self.label = label

    def __call__(self) -> None:
        self.log.append(self.label)


def end_capture_expecting_invalidated(stream: int, reason: str) -> None:
    with pytest.raises(ort.Error) as failure:
        ort.stream_end_capture(stream)
    assert failure.value.name == "orErrorStreamCaptureInvalidated"
    assert reason in str(failure.value)
    ort.get_last_error()


def capture(stream: int, body, mode: int = ort.orStreamCaptureModeGlobal) -> int:
    ort.stream_begin_capture(stream, mode)
    body()
    return ort.stream_end_capture(stream)


def test_captured_work_is_recorded_then_replayed_in_order(res):
    s = res.stream()
    log = []
    graph = capture(s, lambda: [ort.launch_kernel(s, Counter(log, name), name) for name in ("a", "b", "c")])
    ort.stream_synchronize(s)
    assert log == []  # recorded, not run
    assert ort.graph_get_node_count(graph) == 3
    exec_ = ort.graph_instantiate(graph)
    try:
        for _ in range(3):
            ort.graph_launch(exec_, s)
        ort.stream_synchronize(s)
        assert log == ["a", "b", "c"] * 3
    finally:
        ort.graph_exec_destroy(exec_)
        ort.graph_destroy(graph)


def test_replay_copies_the_current_contents_of_captured_memory(res):
    s = res.stream()
    dev = res.malloc(256)
    pinned = res.malloc_host(256)
    host = (ctypes.c_ubyte * 256).from_address(pinned)

    def body():
        ort.memset_async(dev + 128, 9, 128, s)
        ort.memcpy_async(pinned, dev, 256, ort.orMemcpyDeviceToHost, s)

    ort.memset(dev, 1, 256)
    graph = capture(s, body)
    exec_ = ort.graph_instantiate(graph)
    try:
        ort.graph_launch(exec_, s)
        ort.stream_synchronize(s)
        assert list(host) == [1] * 128 + [9] * 128
        ort.memset(dev, 5, 128)  # new contents of the graph's input
        ort.graph_launch(exec_, s)
        ort.stream_synchronize(s)
        assert list(host) == [5] * 128 + [9] * 128
    finally:
        ort.graph_exec_destroy(exec_)
        ort.graph_destroy(graph)


def test_is_capturing_reports_none_active_invalidated(res):
    s = res.stream()
    assert ort.stream_is_capturing(s) == "none"
    ort.stream_begin_capture(s)
    assert ort.stream_is_capturing(s) == "active"
    with pytest.raises(ort.Error):
        ort.stream_synchronize(s)
    assert ort.stream_is_capturing(s) == "invalidated"
    end_capture_expecting_invalidated(s, "orStreamSynchronize waits for the capturing stream")
    assert ort.stream_is_capturing(s) == "none"


@pytest.mark.parametrize("forbidden", ["stream_synchronize", "stream_query", "event_record", "stream_wait_event"])
def test_waiting_for_the_capturing_stream_fails_and_leaves_it_usable(res, forbidden):
    s = res.stream()
    e = res.event()
    log = []
    calls = {
        "stream_synchronize": lambda: ort.stream_synchronize(s),
        "stream_query": lambda: ort.stream_query(s),
        "event_record": lambda: ort.event_record(e, s),
        "stream_wait_event": lambda: ort.stream_wait_event(s, e),
    }
    ort.event_record(e, res.stream())
    ort.stream_begin_capture(s)
    ort.launch_kernel(s, Counter(log, "captured"), "captured")
    with pytest.raises(ort.Error) as failure:
        calls[forbidden]()
    assert failure.value.name == "orErrorStreamCaptureUnsupported"
    assert "is capturing" in str(failure.value)
    # Later work on the invalidated capture is refused too.
    with pytest.raises(ort.Error) as later:
        ort.launch_kernel(s, Counter(log, "late"), "late")
    assert later.value.name == "orErrorStreamCaptureInvalidated"
    end_capture_expecting_invalidated(s, "waits for the capturing stream")
    ort.launch_kernel(s, Counter(log, "after"), "after")
    ort.stream_synchronize(s)
    assert log == ["after"]  # the discarded capture never ran


def test_copies_from_pageable_memory_cannot_be_captured(res):
    s = res.stream()
    dev = res.malloc(64)
    pageable = ctypes.create_string_buffer(64)
    ort.stream_begin_capture(s)
    with pytest.raises(ort.Error) as failure:
        ort.memcpy_async(dev, ctypes.addressof(pageable), 64, ort.orMemcpyHostToDevice, s)
    assert failure.value.name == "orErrorStreamCaptureUnsupported"
    assert "pageable" in str(failure.value)
    end_capture_expecting_invalidated(s, "pinned memory")


def test_capture_mode_decides_who_may_wait_for_the_whole_device(res):
    s = res.stream()
    # Global: every thread is refused.
    ort.stream_begin_capture(s, ort.orStreamCaptureModeGlobal)
    refused = []

    def other_thread():
        try:
            ort.device_synchronize()
        except ort.Error as e:
            refused.append(e.name)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join(timeout=20)
    assert refused == ["orErrorStreamCaptureUnsupported"]
    end_capture_expecting_invalidated(s, "orDeviceSynchronize waits for all work")

    # Thread-local: only the capturing thread is refused.
    ort.stream_begin_capture(s, ort.orStreamCaptureModeThreadLocal)
    refused.clear()
    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join(timeout=20)
    assert refused == []
    with pytest.raises(ort.Error):
        ort.memset(res.malloc(64), 0, 64)  # synchronous: waits for the device
    end_capture_expecting_invalidated(s, "orMemset waits for all work")

    # Relaxed: allowed, and the capture goes on.
    graph = capture(s, ort.device_synchronize, ort.orStreamCaptureModeRelaxed)
    assert ort.graph_get_node_count(graph) == 0
    ort.graph_destroy(graph)
    ort.get_last_error()


def test_capture_refusals_name_the_problem(res):
    with pytest.raises(ort.Error) as default:
        ort.stream_begin_capture(ort.device_get_default_stream(0))
    assert default.value.name == "orErrorStreamCaptureUnsupported"
    assert "default stream" in str(default.value)
    s = res.stream()
    with pytest.raises(ort.Error) as not_capturing:
        ort.stream_end_capture(s)
    assert not_capturing.value.name == "orErrorNotPermitted"
    ort.stream_begin_capture(s)
    with pytest.raises(ort.Error) as twice:
        ort.stream_begin_capture(s)
    assert twice.value.name == "orErrorNotPermitted"
    with pytest.raises(ort.Error) as mode:
        ort.stream_begin_capture(res.stream(), 7)
    assert mode.value.name == "orErrorInvalidValue"
    graph = ort.stream_end_capture(s)
    exec_ = ort.graph_instantiate(graph)
    ort.stream_begin_capture(s)
    with pytest.raises(ort.Error) as onto_capturing:
        ort.graph_launch(exec_, s)
    assert onto_capturing.value.name == "orErrorStreamCaptureUnsupported"
    ort.graph_destroy(ort.stream_end_capture(s))
    ort.graph_exec_destroy(exec_)
    ort.graph_destroy(graph)
    for call, handle in ((ort.graph_destroy, graph), (ort.graph_exec_destroy, exec_),
                         (ort.graph_instantiate, graph), (ort.graph_get_node_count, graph)):
        with pytest.raises(ort.Error) as stale:
            call(handle)
        assert stale.value.name == "orErrorInvalidResourceHandle"
    ort.graph_destroy(0)  # null is accepted
    ort.graph_exec_destroy(0)
    ort.get_last_error()


def test_kernel_data_lives_until_the_last_graph_and_launch_are_gone(res):
    s = res.stream()
    log = []
    body = Counter(log, "k")
    alive = weakref.ref(body)
    graph = capture(s, functools.partial(ort.launch_kernel, s, body, "k"))
    del body
    exec_ = ort.graph_instantiate(graph)
    ort.graph_destroy(graph)  # the instantiated graph keeps the nodes
    ort.graph_launch(exec_, s)
    ort.graph_exec_destroy(exec_)  # waits for the launch
    assert log == ["k"]
    gc.collect()
    assert alive() is None


def test_a_discarded_capture_releases_its_kernels(res):
    s = res.stream()
    body = Counter([], "k")
    alive = weakref.ref(body)
    ort.stream_begin_capture(s)
    ort.launch_kernel(s, body, "k")
    del body
    with pytest.raises(ort.Error):
        ort.stream_synchronize(s)
    end_capture_expecting_invalidated(s, "orStreamSynchronize")
    gc.collect()
    assert alive() is None


def test_debug_print_lists_the_operations(res, tmp_path):
    s = res.stream()
    dev = res.malloc(64)
    graph = capture(s, lambda: (ort.launch_kernel(s, lambda: None, "first"), ort.memset_async(dev, 0, 64, s)))
    path = tmp_path / "graph.txt"
    ort.graph_debug_dot_print(graph, str(path))
    ort.graph_destroy(graph)
    lines = path.read_text().splitlines()
    assert lines[0].startswith("openreg graph: 2 operations")
    assert lines[1].startswith("0 kernel first")
    assert lines[2].startswith("1 memset memset") and "bytes=64" in lines[2]
    with pytest.raises(ort.Error):
        ort.graph_debug_dot_print(graph, str(path))
    ort.get_last_error()


def test_graphs_on_both_devices(res):
    results = []
    for device in (0, 1):
        s = res.stream(device=device)
        dev = res.malloc(16, device=device)
        pinned = res.malloc_host(16)
        host = (ctypes.c_ubyte * 16).from_address(pinned)

        def body(s=s, dev=dev, pinned=pinned, device=device):
            ort.memset_async(dev, 10 + device, 16, s)
            ort.memcpy_async(pinned, dev, 16, ort.orMemcpyDeviceToHost, s)

        graph = capture(s, body)
        exec_ = ort.graph_instantiate(graph)
        ort.graph_launch(exec_, s)
        ort.stream_synchronize(s)
        results.append(list(host))
        ort.graph_exec_destroy(exec_)
        ort.graph_destroy(graph)
    assert results == [[10] * 16, [11] * 16]
