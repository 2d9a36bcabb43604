"""kbuild's pytest plugin for `kbuild test`, loaded with `-p` from the suite's temporary folder.

1. The kernel's package is found in the staged variant before sys.path is searched: pytest runs
   with the kernel's root as its working folder, and `python -m pytest` (and pytest's rootdir
   insertion) put that folder first on sys.path, where a project may keep a source package of the
   same name (flash-mla's `flash_mla/`, which imports a `flash_mla.cuda` that only its own setup.py
   builds). A finder first on sys.meta_path answers that one name from the variant's folder, when
   the suite imports it (after its conftest.py ran, as without kbuild); its submodules follow
   the package's own path. A variant in the zip layout (its package in `<id>.zip`) is imported
   from the archive, as kernels 0.19 imports it.
2. A test that calls Hugging Face's `kernels.get_kernel` without `version=`/`revision=` fails in
   `kernels` >= 0.16 before it reaches the variant (that loader now requires one): such a test is
   reported skipped, saying which call and why, instead of counted as the variant's failure.
3. A `test_*` function of a script (a module with an `if __name__ == "__main__":` block, as
   flash-mla's tests are) that the script calls itself and whose arguments no fixture provides is
   the script's routine, given values pytest does not have: skipped, saying so, not an error.

4. A CPU variant runs with every GPU hidden from the suite ($KBUILD_TEST_GPU_HIDDEN=1). A test
   that then fails because the suite itself asked torch for a GPU (activation's tests put their
   tensors on "cuda:0" whatever the variant) has no CPU path: skipped, saying so, not counted as
   the variant's failure. Where the variant's own code asked for the GPU, the failure stands.

$KBUILD_TEST_PACKAGE names the package, $KBUILD_TEST_PACKAGE_DIR the folder that holds it (a link
to the variant).
"""

import importlib.abc
import importlib.machinery
import os
import re
import sys
import traceback
import zipimport

import pytest

_UNVERSIONED = "version or revision must be specified"


class _VariantFirst:
    """Finds the package under test in the variant's folder, ahead of every sys.path entry."""

    def __init__(self, name: str, folder: str):
        self.name, self.folder = name, folder

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        variant = os.path.join(self.folder, fullname)
        archives = [n for n in os.listdir(variant) if n.endswith(".zip")] if os.path.isdir(variant) else []
        if len(archives) == 1 and not os.path.isfile(os.path.join(variant, "__init__.py")):
            return _zip_spec(fullname, variant, os.path.join(variant, archives[0]))
        return importlib.machinery.PathFinder.find_spec(fullname, [self.folder])


class _ZipInit(importlib.abc.Loader):
    """The `__init__.py` at the root of a zip layout's `<id>.zip` (edition 6's build-layout = "zip")."""

    def __init__(self, archive: str):
        self.archive, self.importer = archive, zipimport.zipimporter(archive)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(self.importer.get_code("__init__"), module.__dict__)


def _zip_spec(name: str, variant: str, archive: str):
    """As kernels 0.19 imports a zip layout variant: the package's code from the archive, its
    submodules from the variant folder (the library beside the archive), then from the archive."""
    spec = importlib.machinery.ModuleSpec(name, _ZipInit(archive), origin=os.path.join(archive, "__init__.py"),
                                          is_package=True)
    spec.submodule_search_locations = [variant, archive]
    spec.has_location = True
    return spec


if os.environ.get("KBUILD_TEST_PACKAGE") and os.environ.get("KBUILD_TEST_PACKAGE_DIR"):
    sys.meta_path.insert(0, _VariantFirst(os.environ["KBUILD_TEST_PACKAGE"], os.environ["KBUILD_TEST_PACKAGE_DIR"]))


def _unversioned_get_kernel(excinfo, root):
    """(file, line) of the suite's call into `kernels` that raised for want of a version, or None:
    the innermost frame of the traceback that lies in the kernel's own folder (`root`)."""
    if excinfo is None or not excinfo.errisinstance(ValueError) or _UNVERSIONED not in str(excinfo.value):
        return None
    frames = traceback.extract_tb(excinfo.tb)
    if not any(f"{os.sep}kernels{os.sep}" in f.filename for f in frames):
        return None
    own = [f for f in frames if _inside(f.filename, root)]
    return (own[-1].filename, own[-1].lineno) if own else None


def _inside(path, root) -> bool:
    path = os.path.realpath(path)
    return path.startswith(os.path.realpath(str(root)) + os.sep) and f"{os.sep}site-packages{os.sep}" not in path


def _reason() -> str:
    try:
        from importlib.metadata import version
        release = f" {version('kernels')}"
    except Exception:
        release = ""
    return (f"calls Hugging Face's kernels.get_kernel without version= or revision=, which kernels{release} "
            "refuses before loading anything: not a failure of the variant under test")


def _as_skip(report, where):
    path = os.path.relpath(where[0]) if os.path.isabs(where[0]) else os.path.normpath(where[0])
    report.outcome = "skipped"
    report.longrepr = (path, where[1], "Skipped: " + _reason())


def _script_function(item, call) -> str | None:
    """Why `item` is a script's routine rather than a test, or None."""
    if call.when != "setup" or call.excinfo is None or type(call.excinfo.value).__name__ != "FixtureLookupError":
        return None
    try:
        source = item.path.read_text(errors="replace")
    except OSError:
        return None
    if not re.search(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", source, re.M):
        return None
    name = getattr(item, "originalname", item.name)
    if not re.search(rf"^(?!\s*def\s).*\b{re.escape(name)}\(", source, re.M):
        return None  # the script never calls it: a test with a fixture missing, an error like any other
    missing = getattr(call.excinfo.value, "argname", "?")
    return (f"{item.path.name} is a script: {item.name} needs '{missing}', which its __main__ block passes and no "
            "fixture provides (run the script against the variant to use it)")


# torch's words when asked for a device it does not see (CUDA hidden or absent, ROCm, a CPU
# build of torch) and Triton's when it finds no GPU driver
_NO_DEVICE = re.compile(r"No (?:CUDA|HIP) GPUs are available|Found no NVIDIA driver on your system|"
                        r"no CUDA-capable device is detected|Torch not compiled with CUDA enabled|"
                        r"0 active drivers")


def _suite_wants_a_gpu(excinfo, root):
    """(file, line) of the suite's own code that asked for a GPU kbuild hid, or None: the error
    says no device is there and no frame of its traceback lies in the variant under test."""
    if os.environ.get("KBUILD_TEST_GPU_HIDDEN") != "1" or excinfo is None or not _NO_DEVICE.search(str(excinfo.value)):
        return None
    variant = os.path.realpath(os.path.join(os.environ.get("KBUILD_TEST_PACKAGE_DIR", ""),
                                            os.environ.get("KBUILD_TEST_PACKAGE", "")))
    frames = traceback.extract_tb(excinfo.tb)
    if any(os.path.realpath(f.filename).startswith(variant + os.sep) for f in frames):
        return None
    own = [f for f in frames if _inside(f.filename, root)]
    return (own[-1].filename, own[-1].lineno) if own else None


_WANTS_A_GPU = ("the suite asks torch for a GPU, which kbuild hides while it tests a CPU variant (as it runs "
                "beside a GPU): this test has no CPU path, not a failure of the variant under test")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    if where := _unversioned_get_kernel(call.excinfo, item.config.rootpath):
        _as_skip(report, where)
    elif why := _script_function(item, call):
        report.outcome = "skipped"
        report.longrepr = (os.path.relpath(str(item.path)), item.location[1] + 1, "Skipped: " + why)
    elif where := _suite_wants_a_gpu(call.excinfo, item.config.rootpath):
        report.outcome = "skipped"
        report.longrepr = (os.path.relpath(where[0]), where[1], "Skipped: " + _WANTS_A_GPU)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a test module that calls it at import time (the failure is then a collection error,
    which carries only its text)."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    text = report.longreprtext
    if _UNVERSIONED not in text or f"{os.sep}kernels{os.sep}" not in text:
        return
    root = collector.config.rootpath
    calls = [m for m in re.finditer(r"^(\S+\.py):(\d+): in ", text, re.M)
             if _inside(os.path.join(str(collector.config.invocation_params.dir), m[1]), root)]
    if calls:
        _as_skip(report, (calls[-1][1], int(calls[-1][2])))
