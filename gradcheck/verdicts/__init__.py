"""Stage 3, ``RunData`` -> ``RunReport``: the verdicts.

Every verdict is declared once, in ``registry`` (its rank, rule, default ``--fail-on`` and how
the reports show it). ``detect.analyze_run`` pairs series into parameters (``pairing``),
derives their gradient and weight signals (``signals``), measures the run context
(``context``: loss, largest gradient, clipping) and runs ``passes.PASSES`` in order: each
verdict's rule in ``rules/``, the steps between rules, a row per parameter (``results``).
Thresholds live in ``config``, advice in ``hints`` and ``clip_advice``; ``gate`` turns findings
into the exit status.
"""
