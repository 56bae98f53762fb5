"""The same results, faster: the C scanner's driver (``fastpath``), file parts and their
planning (``parts``), and the process pool (``pool``). Nothing outside this folder forks; C is
reached only through ``native.extension()`` here, and every C function has a twin in Python.
"""
