"""Build the optional C extension ``gradcheck.native._scan`` (everything else is in pyproject.toml).

``optional=True``: without a C compiler the install still succeeds and gradcheck reads event
files with its pure-Python reader (the same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "gradcheck.native._scan",
            ["gradcheck/native/_scan.c"],
            extra_compile_args=["-O2", "-std=c11"],
            optional=True,
        )
    ]
)
