"""Reading runs into their series, behind one door (``read``): the C scanner's driver
(``fastpath``) or the reference reader per file (``parts``), readings of one file joined
(``join``), big files in byte ranges (``ranges``), the workers (``pool``, ``cluster``), a run
followed as it grows (``follow``), and ``census`` for ``inspect``. Nothing outside this folder
forks; C is reached through ``gradcheck.native.extension()``, and every C function has a twin.
"""
