"""A Dask cluster as the workers (``--scheduler``): the same tasks as the local process pool,
sent through ``dask.distributed.Client.get_executor()`` (a ``concurrent.futures.Executor``).

``tcp://HOST:PORT`` (any address ``Client`` takes: ``tls://``, ``ws://``...) joins a running
cluster; ``local`` or ``local:N`` starts a ``LocalCluster`` of N worker processes (one thread
each, default: one per CPU) for this command. Workers read the logs themselves (paths they
can open: shared storage, or URLs), and only reduced results travel back. Dask reruns the
tasks of a worker that dies; a task whose workers kept dying (``KilledWorker``) runs again
here, and a task's own error is raised here as it would be locally.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from gradcheck._optional import install_hint
from gradcheck.engine.pool import Workers, default_jobs
from gradcheck.errors import ConfigError, InputError

CONNECT_SECONDS = 10
"""How long to wait for a scheduler to answer before giving up with an error."""
_LOCAL = re.compile(r"local(?::(\d+))?")


def local_workers(spec: str) -> int | None:
    """The number of worker processes a ``local[:N]`` scheduler asks for (``local``: one per
    CPU); None for an address. ConfigError for ``local:0`` or ``local:x``."""
    if not spec.startswith("local"):
        return None
    match = _LOCAL.fullmatch(spec)
    if match is None or (match.group(1) is not None and int(match.group(1)) < 1):
        raise ConfigError(f"--scheduler {spec!r}: expected local, local:N (N >= 1) or an address")
    return int(match.group(1)) if match.group(1) else default_jobs()


@contextmanager
def connect(spec: str) -> Iterator[Workers]:
    """Workers on the Dask cluster ``spec`` names, for the time of the block."""
    processes = local_workers(spec)
    try:
        from distributed import Client, LocalCluster
        from distributed.scheduler import KilledWorker
    except ImportError:
        raise InputError(f"--scheduler needs dask.distributed: {install_hint('dask')}") from None
    logging.getLogger("distributed").setLevel(logging.CRITICAL)  # stderr is for gradcheck's lines
    cluster = None
    try:
        if processes is not None:
            cluster = LocalCluster(
                n_workers=processes,
                threads_per_worker=1,  # reading and judging hold the GIL: a process each
                processes=True,
                dashboard_address=":0",  # any free port: 8787 may be another cluster's
                silence_logs=logging.CRITICAL,  # a worker outliving the scheduler at close
            )
            client = Client(cluster)
        else:
            client = Client(spec, timeout=CONNECT_SECONDS)
    except (OSError, TimeoutError, ValueError) as error:
        if cluster is not None:
            cluster.close()
        raise InputError(f"cannot reach the Dask scheduler at {spec}: {error}") from None
    try:
        jobs = sum(client.nthreads().values())
        yield Workers(max(jobs, 1), executor=client.get_executor(), lost=(KilledWorker,))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
