"""What the tests share: builders of event files, records and reports, the real libraries'
logs, the command run in-process, and the comparisons of the C engine with its twins. No test
imports another test file (``tests/project/test_layout.py`` checks it)."""
