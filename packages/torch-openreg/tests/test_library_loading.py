"""Windows has no rpath: openreg_runtime and torch_openreg each add their library folder to the DLL search path
before importing their extension (os.add_dll_directory, as torch does for its own), so the extensions and the
layers' libraries find libopenreg and libtorch_openreg. Checked here with a stand-in for Windows'
os.add_dll_directory that records each folder and which extensions were loaded when it was added."""

import json

RECORD_THE_FOLDERS = """
import json, os, sys
added = []
def add_dll_directory(folder):
    loaded = [name for name in ("openreg_runtime._C", "torch_openreg._C") if name in sys.modules]
    added.append((os.path.normpath(folder), loaded))
    return folder
os.add_dll_directory = add_dll_directory
import torch, openreg_runtime, torch_openreg
torch.ones(1, device="openreg")
print(json.dumps({"added": added, "runtime": openreg_runtime.get_library_dir(),
                  "core": torch_openreg.get_library_dir()}))
"""


def test_each_package_adds_its_library_folder_before_it_loads_its_extension(python):
    found = json.loads(python.run(RECORD_THE_FOLDERS).stdout)
    added = dict(found["added"])
    assert list(added) == [found["runtime"], found["core"]], found
    assert added[found["runtime"]] == [], "openreg_runtime's folder is added before openreg_runtime._C loads"
    assert added[found["core"]] == ["openreg_runtime._C"], "torch_openreg's folder before torch_openreg._C loads"

