"""One libopenreg per process: loading get_library_path() with ctypes after
importing the bindings reaches the very same simulator."""

import ctypes
import os
import threading

import openreg_runtime as ort
import pytest

# Not sanitizer_safe: tools/sanitize.py deliberately swaps in another
# libopenreg through LD_LIBRARY_PATH, which is exactly what this file checks
# cannot happen by accident.


@pytest.fixture(scope="module")
def lib():
    library = ctypes.CDLL(ort.get_library_path())
    library.orGetDevice.argtypes = [ctypes.POINTER(ctypes.c_int)]
    library.orGetDeviceCount.argtypes = [ctypes.POINTER(ctypes.c_int)]
    library.orStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    library.orStreamDestroy.argtypes = [ctypes.c_void_p]
    library.orEventQuery.argtypes = [ctypes.c_void_p]
    library.orMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    library.orFree.argtypes = [ctypes.c_void_p]
    library.orGetLastErrorMessage.restype = ctypes.c_char_p
    library.orGetErrorName.restype = ctypes.c_char_p
    for name in ("orGetDevice", "orGetDeviceCount", "orStreamCreate", "orStreamDestroy",
                 "orEventQuery", "orMalloc", "orFree", "orPeekAtLastError"):
        getattr(library, name).restype = ctypes.c_int
    return library


def mapped_libopenreg_files() -> set[tuple[str, str]]:
    files = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.basename(parts[5]).startswith("libopenreg"):
                files.add((parts[4], parts[5]))  # (inode, path)
    return files


def test_exactly_one_libopenreg_is_mapped(lib):
    files = mapped_libopenreg_files()
    assert len(files) == 1, files
    (_, path), = files
    assert os.path.realpath(path) == os.path.realpath(ort.get_library_path())
    assert os.path.isfile(ort.get_library_path())
    assert os.path.dirname(ort.get_library_path()) == ort.get_library_dir()


def test_current_device_is_shared(lib):
    ort.set_device(1)
    device = ctypes.c_int(-1)
    assert lib.orGetDevice(ctypes.byref(device)) == 0
    assert device.value == 1
    ort.set_device(0)
    assert lib.orGetDevice(ctypes.byref(device)) == 0
    assert device.value == 0
    count = ctypes.c_int()
    assert lib.orGetDeviceCount(ctypes.byref(count)) == 0
    assert count.value == ort.get_device_count()


def test_stream_created_through_ctypes_works_in_bindings(lib):
    handle = ctypes.c_void_p()
    assert lib.orStreamCreate(ctypes.byref(handle)) == 0
    s = handle.value
    try:
        assert ort.stream_get_device(s) == 0
        ran = threading.Event()
        ort.launch_kernel(s, ran.set, "via_ctypes_stream")
        ort.stream_synchronize(s)
        assert ran.is_set()
        e = ort.event_create()
        ort.event_record(e, s)
        ort.event_synchronize(e)
        assert lib.orEventQuery(ctypes.c_void_p(e)) == 0
        ort.event_destroy(e)
    finally:
        assert lib.orStreamDestroy(ctypes.c_void_p(s)) == 0
    with pytest.raises(ort.Error):
        ort.stream_query(s)


def test_memory_and_errors_are_shared(lib):
    before = ort.mem_get_info()[0]
    ptr = ctypes.c_void_p()
    assert lib.orMalloc(ctypes.byref(ptr), 4096) == 0
    assert ort.pointer_get_attributes(ptr.value)["type"] == "device"
    assert ort.mem_get_info()[0] == before - 4096
    ort.free(ptr.value)
    # The bindings' failure is this thread's last error in the same library.
    assert lib.orFree(ptr) == ort.orErrorInvalidDevicePointer
    with pytest.raises(ort.Error):
        ort.set_device(8)
    assert lib.orPeekAtLastError() == ort.orErrorInvalidDevice
    assert b"invalid openreg device index 8" in lib.orGetLastErrorMessage()
    assert lib.orGetErrorName(4) == b"orErrorInvalidDevice"
    assert ort.mem_get_info()[0] == before
