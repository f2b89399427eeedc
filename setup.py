"""Build of the optional compiled parts (loader/_native.c); everything else is in pyproject.toml.

Without a C compiler (or on a big-endian machine) the install still succeeds and the loader
uses its numpy paths (README, "Dependencies"). The extension is built against CPython's stable
ABI (one ``abi3`` wheel per platform for 3.11 and later), except on a free-threaded CPython,
which has no stable ABI yet.

``SPANNER_LOADER_SANITIZE=1`` builds it with AddressSanitizer and UndefinedBehaviorSanitizer,
``SPANNER_LOADER_SANITIZE=thread`` with ThreadSanitizer (CI runs the extension's tests on such
builds: scripts/native_check.sh).
"""

import os
import sysconfig

from setuptools import Extension, setup

free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
sanitize = os.environ.get("SPANNER_LOADER_SANITIZE", "") in ("1", "thread")
compile_args = ["-std=c11"]
link_args: list[str] = []
if os.name != "nt":
    compile_args += ["-Wall", "-Wextra", "-pthread"]
    link_args += ["-pthread"]
    if sanitize:
        if os.environ["SPANNER_LOADER_SANITIZE"] == "thread":
            flags = ["-fsanitize=thread"]
        else:
            flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
        compile_args += [*flags, "-O1", "-g", "-fno-omit-frame-pointer"]
        link_args += flags
    else:
        compile_args += ["-O3"]

setup(
    ext_modules=[
        Extension(
            "loader._native",
            sources=["loader/_native.c"],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            define_macros=[] if free_threaded else [("Py_LIMITED_API", "0x030B0000")],
            py_limited_api=not free_threaded,
            optional=not sanitize,
        )
    ],
    options={} if free_threaded else {"bdist_wheel": {"py_limited_api": "cp311"}},
)
