"""Stage 1, paths -> records: find runs and event files, frame and check records, decode them.

Takes paths (``discover``), gives typed records (``model.HistogramRecord``, ``ScalarRecord``,
``Damage``, ``Notice``) from the reference reader (``reader``). ``storage`` is the one door to
bytes; ``steps`` the step window every reader applies. Knows nothing of statistics or verdicts.
"""
