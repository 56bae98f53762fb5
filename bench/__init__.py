"""gradcheck's benchmark: realistic event-file generator (``gen``) and reader timings (``run``).

Not part of the installed package. Run ``python bench/gen.py --help`` and
``python bench/run.py --help`` (``make bench`` runs the default benchmark).
"""
