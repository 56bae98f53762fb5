"""The optional C extension ``_scan`` (``_scan.c``; its types in ``_scan.pyi``).

Loaded only through ``gradcheck.engine.native.extension()``; each function's numpy or Python
twin defines its results.
"""
