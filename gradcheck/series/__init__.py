"""Stage 2, records -> ``RunData``: per-series arrays of per-step statistics.

``reduce`` turns records into ``model.RunData`` (bucket statistics from ``stats``, thinned to bound
memory); ``merge`` joins the files of a run in order and series renamed mid-run.
"""
