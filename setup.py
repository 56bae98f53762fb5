"""Build the optional C extension ``gradcheck.native._scan`` (everything else is in pyproject.toml).

Optional: without a C compiler an install from source still succeeds and gradcheck reads event
files with its pure-Python reader (the same results, slower). ``GRADCHECK_REQUIRE_EXT=1`` (set by
``make dist``) makes a failed compile an error, so that a built wheel always carries it.
"""

import os

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "gradcheck.native._scan",
            ["gradcheck/native/_scan.c"],
            extra_compile_args=["-O2", "-std=c11"],
            optional=os.environ.get("GRADCHECK_REQUIRE_EXT", "") != "1",
        )
    ]
)
