"""Stage 3, ``RunData`` -> ``RunReport``: the verdicts.

``detect.analyze_run`` pairs series into parameters (``pairing``), derives their gradient and
weight signals (``signals``), measures the run context (loss, largest gradient, clipping), and
asks each rule in ``rules/`` for a finding or an excuse. Thresholds live in ``config``, advice in
``hints`` and ``clip_advice``; ``gate`` turns findings into the exit status.
"""
