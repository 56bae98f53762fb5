"""Logs in object storage (issue 20, part 1): the same logs read from a real S3-compatible
server (moto in server mode on 127.0.0.1, as s3fs's own tests do) and from fsspec's
``memory://`` give the same report, byte for byte, as read from local disk: in every format,
with damage, half-written tails, the step window and worker processes; and URLs fail as
local paths do (exit 2, one line), secrets are refused on the command line, values never shown.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gradcheck import cli
from gradcheck.cli.status import ExitStatus
from gradcheck.engine import ranges, read
from gradcheck.events import s3_stream, storage
from gradcheck.report import FORMATS
from gradcheck.report.interface import Env
from tests.support.paths import REPO

s3fs = pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.moto_server.threaded_moto_server")

BUCKET = "gck"
S3_ROOT = f"s3://{BUCKET}"  # 8 characters, as the local root LOCAL_FOR_S3: tables align alike
LOCAL_FOR_S3 = "s3gcklog"
MEMORY_ROOT = "memory://m"
LOCAL_FOR_MEMORY = "memoryroot"
TORCH_FILE = "sample_runs/torch_exploding_nan"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(
        cli.cli, list(args), prog_name="gradcheck", obj=Env(), catch_exceptions=False
    )


def _damaged_logs(root: Path) -> None:
    """``damaged/``: a torch log cut mid-record (training still writing), one with a flipped
    byte mid-file (CRC mismatch, resynchronised) and one with garbage between two records."""
    (source,) = (REPO / TORCH_FILE).iterdir()
    data = source.read_bytes()
    for name, damaged in {
        "half_written": data[: len(data) - 333],
        "flipped": data[: len(data) // 2]
        + bytes([data[len(data) // 2] ^ 0x5A])
        + data[1 + len(data) // 2 :],
        "garbage": data[: len(data) // 3] + b"\x07garbage" * 40 + data[len(data) // 3 :],
    }.items():
        (root / "damaged" / name).mkdir(parents=True)
        (root / "damaged" / name / source.name).write_bytes(damaged)


@pytest.fixture(scope="module")
def local_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding copies of ``sample_runs``, ``tests/data/runs15`` and damaged logs."""
    root = tmp_path_factory.mktemp("logs")
    shutil.copytree(REPO / "sample_runs", root / "sample_runs")
    shutil.copytree(REPO / "tests" / "data" / "runs15", root / "runs15")
    _damaged_logs(root)
    return root


def _files(root: Path) -> Iterator[tuple[str, bytes]]:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            yield path.relative_to(root).as_posix(), path.read_bytes()


@pytest.fixture(scope="module")
def s3_endpoint(local_logs: Path) -> Iterator[str]:
    """A moto S3 server on 127.0.0.1 holding the logs in bucket ``gck``; test credentials in
    the environment (the standard chain is what gradcheck uses)."""
    environ = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    saved = {name: os.environ.get(name) for name in environ}
    os.environ.update(environ)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        fs = s3fs.S3FileSystem(endpoint_url=endpoint)
        fs.mkdir(BUCKET, acl="public-read")
        for name, data in _files(local_logs):
            fs.pipe(f"{BUCKET}/{name}", data, ACL="public-read")  # anon=true reads too
        yield endpoint
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def memory_logs(local_logs: Path) -> Iterator[str]:
    import fsspec

    fs = fsspec.filesystem("memory")
    for name, data in _files(local_logs):
        fs.pipe(f"/m/{name}", data)
    yield MEMORY_ROOT
    fs.rm("/m", recursive=True)


@pytest.fixture
def here(local_logs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory holds the logs as ``s3gcklog/`` and ``memoryroot/`` (local roots
    as long as the URLs' roots, so that every format lays out both reports alike)."""
    for name in (LOCAL_FOR_S3, LOCAL_FOR_MEMORY):
        if not (local_logs.parent / name).exists():
            (local_logs.parent / name).symlink_to(local_logs)
    monkeypatch.chdir(local_logs.parent)
    return local_logs.parent


def _all_formats(target: Path, *args: str) -> dict[str, bytes]:
    """``gradcheck analyze args...`` in every format (one run: --report for each but the
    table on stdout), the exit status as ``status``."""
    target.mkdir(parents=True, exist_ok=True)
    reports = [f"--report={name}:{target / name}" for name in FORMATS if name != "table"]
    result = invoke("analyze", *args, "--format", "table", *reports)
    assert result.exit_code in (ExitStatus.OK, ExitStatus.FINDINGS), result.output
    outputs = {name: (target / name).read_bytes() for name in FORMATS if name != "table"}
    return {
        "table": result.stdout.encode(),
        "stderr": result.stderr.replace(str(target), "<reports>").encode(),
        "status": bytes([result.exit_code]),
        **outputs,
    }


def assert_same_reports(local: dict[str, bytes], remote: dict[str, bytes], url: str, path: str):
    assert set(local) == set(remote)
    escaped = {url.encode(): path.encode(), url.replace(":", "%3A").encode(): path.encode()}
    for name, text in remote.items():
        for before, after in escaped.items():
            text = text.replace(before, after)
        assert text == local[name], name
    assert url.encode() in remote["json"]  # the report names what the user typed


CASES = {
    "sample_runs": ("sample_runs",),
    "runs15": ("runs15",),
    "damaged": ("damaged",),
    "window": ("sample_runs", "--steps", "2:5"),
    "damaged_window": ("damaged", "--steps", "3:"),
    "one_file": (
        TORCH_FILE.replace("sample_runs", "damaged").replace("torch_exploding_nan", "half_written"),
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_s3_reports_equal_local_reports_in_every_format(
    case: str, s3_endpoint: str, here: Path, tmp_path: Path
) -> None:
    path, *options = CASES[case]
    if case == "one_file":
        (name,) = os.listdir(f"{LOCAL_FOR_S3}/{path}")
        path = f"{path}/{name}"
    endpoint = f"--storage-option=endpoint_url={s3_endpoint}"
    local = _all_formats(tmp_path / "local", f"{LOCAL_FOR_S3}/{path}", *options)
    remote = _all_formats(tmp_path / "s3", f"{S3_ROOT}/{path}", *options, endpoint)
    assert_same_reports(local, remote, S3_ROOT, LOCAL_FOR_S3)
    if case.startswith("damaged") or case == "one_file":
        assert b"incomplete final record" in local["json"]


@pytest.mark.parametrize("case", ["sample_runs", "damaged_window"])
def test_memory_reports_equal_local_reports(
    case: str, memory_logs: str, here: Path, tmp_path: Path
) -> None:
    path, *options = CASES[case]
    local = _all_formats(tmp_path / "local", f"{LOCAL_FOR_MEMORY}/{path}", *options)
    remote = _all_formats(tmp_path / "memory", f"{MEMORY_ROOT}/{path}", *options)
    assert_same_reports(local, remote, MEMORY_ROOT, LOCAL_FOR_MEMORY)


@pytest.mark.parametrize("whole", [True, False], ids=["whole-files", "byte-ranges"])
def test_worker_processes_and_byte_ranges_read_s3(
    whole: bool,
    s3_endpoint: str,
    here: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Worker processes read the URLs themselves, with the options their tasks carry
    (thresholds lowered to the sample logs' sizes); a URL is read whole by one of them, or,
    with ``REMOTE_WHOLE`` off, in byte ranges as a local file is."""
    expected = _all_formats(tmp_path / "one", f"{LOCAL_FOR_S3}/sample_runs", "-j", "1")
    monkeypatch.setattr(read, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(ranges, "SPLIT_SIZE", 0)
    monkeypatch.setattr(ranges, "REMOTE_WHOLE", whole)
    monkeypatch.setattr(ranges, "plan_pieces", lambda size, share, estimate: 3)
    planned: list[int] = []
    plan = read._plan
    monkeypatch.setattr(read, "_plan", lambda *a: planned.append(len(p := plan(*a))) or p)
    endpoint = f"--storage-option=endpoint_url={s3_endpoint}"
    caplog.set_level(logging.INFO, logger="werkzeug")
    # unsigned requests (moto takes them): a forkserver started by an earlier test has the
    # environment from before this module set its credentials, and its workers inherit that
    options = (endpoint, "--storage-option=anon=true")
    remote = _all_formats(tmp_path / "s3", f"{S3_ROOT}/sample_runs", "-j", "2", *options)
    assert planned == [7] if whole else planned[0] > 7  # 7 files, or more ranges
    assert_same_reports(expected, remote, S3_ROOT, LOCAL_FOR_S3)
    heads = [r.getMessage() for r in caplog.records if "HEAD /" in r.getMessage()]
    assert len(heads) <= 1 + planned[0], heads  # a worker asks each of its files its size


@pytest.mark.parametrize("streamed", [True, False], ids=["one-streaming-GET", "ranged-GETs"])
def test_s3_is_read_in_windows_and_listed_once(
    streamed: bool,
    s3_endpoint: str,
    here: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each file is read a reader's window at a time (64 kB here, so that records are cut
    across windows), through one streaming GET per file (or, through fsspec's file, one
    ranged GET per window); the runs are found with one recursive listing, and no file is
    asked its size: the requests the server saw."""
    expected = _all_formats(tmp_path / "local", f"{LOCAL_FOR_S3}/sample_runs", "-j", "1")
    window = 64 << 10
    monkeypatch.setattr(storage, "STREAM_S3", streamed)
    monkeypatch.setattr("gradcheck.engine.fastpath.REMOTE_CHUNK", window)
    taken: list[int] = []
    take = s3_stream.StreamedS3File._take

    async def taking(self, count):  # type: ignore[no-untyped-def]
        taken.append(count)
        return await take(self, count)

    monkeypatch.setattr(s3_stream.StreamedS3File, "_take", taking)
    storage._sizes.clear()
    caplog.set_level(logging.INFO, logger="werkzeug")
    endpoint = f"--storage-option=endpoint_url={s3_endpoint}"
    remote = _all_formats(tmp_path / "s3", f"{S3_ROOT}/sample_runs", "-j", "1", endpoint)
    assert_same_reports(expected, remote, S3_ROOT, LOCAL_FOR_S3)
    request_line = re.compile(r'"(?:\x1b\[[0-9;]*m)*([A-Z]+) (\S+) HTTP')  # colours off
    requests = [m.groups() for r in caplog.records if (m := request_line.search(r.getMessage()))]
    lists = [path for method, path in requests if "list-type=2" in path]
    heads = [path for method, path in requests if method == "HEAD"]
    gets = [path for method, path in requests if method == "GET" and "?" not in path]
    assert len(lists) <= 2 and len(heads) <= 1, requests  # the root's info, one listing
    files = _files(here / LOCAL_FOR_S3 / "sample_runs")
    sizes = [len(data) for name, data in files if "tfevents" in name]
    assert len(set(gets)) == len(sizes) == 7
    windows = sum(-(-size // window) for size in sizes)
    if streamed:
        assert len(gets) == 7  # one request a file
        assert windows <= len(taken) and max(taken) <= window
    else:
        assert not taken
        assert windows // 2 <= len(gets) <= windows + len(sizes)


def test_inspect_and_compare_read_urls(s3_endpoint: str, here: Path) -> None:
    endpoint = f"--storage-option=endpoint_url={s3_endpoint}"
    for command in (
        ["inspect", "{}/damaged", "--format", "json"],
        ["inspect", "{}/sample_runs"],
        ["compare", "{}/sample_runs/torch_clipped", "{}/sample_runs/torch_exploding_nan"],
    ):
        local = invoke(*(part.format(LOCAL_FOR_S3) for part in command))
        remote = invoke(*(part.format(S3_ROOT) for part in command), endpoint)
        assert local.exit_code == remote.exit_code == ExitStatus.OK, remote.output
        assert remote.stdout.replace(S3_ROOT, LOCAL_FOR_S3) == local.stdout
        assert remote.stderr.replace(S3_ROOT, LOCAL_FOR_S3) == local.stderr


def test_api_reads_urls(s3_endpoint: str, local_logs: Path) -> None:
    import gradcheck

    local = gradcheck.frame(str(local_logs / "sample_runs/torch_clipped"))
    remote = gradcheck.frame(
        f"{S3_ROOT}/sample_runs/torch_clipped", storage_options={"endpoint_url": s3_endpoint}
    )
    assert len(remote) == len(local) > 0
    assert remote["value"].equals(local["value"])


def one_line_error(result: Result) -> str:
    assert result.exit_code == ExitStatus.INPUT_ERROR, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("gradcheck: error: ")
    return line


def test_missing_objects_and_protocols_are_input_errors(s3_endpoint: str) -> None:
    endpoint = f"--storage-option=endpoint_url={s3_endpoint}"
    line = one_line_error(invoke("analyze", f"{S3_ROOT}/no/such/run", endpoint))
    assert "does not exist" in line and f"{S3_ROOT}/no/such/run" in line
    line = one_line_error(invoke("analyze", f"{S3_ROOT}/sample_runs/README.md", endpoint))
    assert "no TensorBoard records could be read from s3://gck/sample_runs/README.md" in line
    line = one_line_error(invoke("analyze", "nosuchproto://x/y"))
    assert "nosuchproto:// is not a protocol" in line


def test_a_missing_backend_gives_an_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    registry = importlib.import_module("fsspec.registry")._registry
    for protocol, module, extra in (("gs", "gcsfs", "gcs"), ("az", "adlfs", "azure")):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
        monkeypatch.delitem(registry, protocol, raising=False)
        line = one_line_error(invoke("analyze", f"{protocol}://bucket/logs"))
        assert line == (
            f"gradcheck: error: {protocol}:// needs {module}: "
            f"pip install {module} (gradcheck's {extra} extra)"
        )


@pytest.mark.parametrize("key", ["key", "secret", "token", "password", "account_key", "sas_token"])
def test_secrets_are_refused_on_the_command_line_and_never_shown(key: str) -> None:
    line = one_line_error(invoke("analyze", "s3://b/logs", f"--storage-option={key}=hunter22"))
    assert "hunter22" not in line and f"{key}=<redacted>" in line
    assert "environment" in line


def test_a_secret_nested_in_an_option_is_refused_and_nested_values_never_shown(
    s3_endpoint: str,
) -> None:
    nested = 'client_kwargs={"aws_secret_access_key": "hunter22"}'
    line = one_line_error(invoke("analyze", "s3://b/logs", f"--storage-option={nested}"))
    assert "hunter22" not in line and "client_kwargs=<redacted>" in line
    # A value in a mapping (an endpoint with a password in it) stays out of the messages.
    _, port = s3_endpoint.rsplit(":", 1)
    endpoint = f'client_kwargs={{"endpoint_url": "http://u:sesame99@127.0.0.1:{int(port) + 1}"}}'
    result = invoke(
        "analyze", "s3://nobucket/x", f"--storage-option={endpoint}", "--storage-option=anon=true"
    )
    assert result.exit_code == 2, result.stderr
    assert "127.0.0.1" in result.stderr or "<redacted>" in result.stderr  # it says where
    assert "sesame99" not in result.stderr + result.stdout


def test_storage_option_values_are_json_literals_and_never_shown() -> None:
    options = storage.parse_storage_options(["anon=true", "max_concurrency=4", "region=eu"])
    assert options.kwargs() == {"anon": True, "max_concurrency": 4, "region": "eu"}
    assert repr(options) == (
        "StorageOptions(anon=<redacted>, max_concurrency=<redacted>, region=<redacted>)"
    )
    line = one_line_error(invoke("analyze", "s3://b/x", "--storage-option=novalue"))
    assert "expected KEY=VALUE" in line
    line = one_line_error(
        invoke("analyze", "memory://b/x", "--storage-option=bogus_option=sesame99")
    )
    assert "sesame99" not in line


def test_local_paths_do_not_import_fsspec() -> None:
    """fsspec (and its backends) are imported only for a URL: start-up time matters."""
    code = (
        "import sys, gradcheck.cli; from gradcheck.pipeline import analyze; "
        f"analyze([{str(REPO / 'sample_runs/torch_clipped')!r}], jobs=1)\n"
        "print('IMPORTED', sorted(m for m in sys.modules if m.split('.')[0] in ('fsspec', 's3fs')))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.stdout.splitlines()[-1] == "IMPORTED []", result.stderr


@pytest.mark.parametrize("where", ["s3", "memory"])
def test_watch_follows_a_log_that_grows_at_a_url(where: str, s3_endpoint: str) -> None:
    """An object written again, longer, at each flush (as writers to object storage do): each
    poll reads only the new bytes, and the last report is ``analyze``'s of the URL."""
    import fsspec

    from gradcheck.events.storage import StorageOptions
    from gradcheck.pipeline import analyze
    from gradcheck.report.json_format import report_document
    from gradcheck.watch import Watcher

    (source,) = (REPO / "sample_runs" / "torch_exploding_nan").glob("events.out.tfevents.*")
    data = source.read_bytes()
    if where == "s3":
        options = {"endpoint_url": s3_endpoint}
        fs, root = s3fs.S3FileSystem(**options), f"s3://{BUCKET}/watched-{where}"
    else:
        options = {}
        fs, root = fsspec.filesystem("memory"), f"memory://watched-{where}"
    url = f"{root}/run/{source.name}"
    fs.pipe(url, data[: len(data) // 3])
    watcher = Watcher([root], storage=StorageOptions.of(options))
    first = watcher.update()
    assert first.report is not None and 0 < first.bytes_read <= len(data) // 3
    fs.pipe(url, data)  # the whole object again, longer
    second = watcher.update()
    assert second.new_bytes == len(data) - first.bytes_read  # the rest only
    last = watcher.update(final=True)
    expected = analyze([root], storage_options=options)
    assert last.report is not None
    assert report_document(last.report) == report_document(expected)
    assert any(layer.verdict == "nan" for layer in expected.runs[0].layers)  # not vacuous
    fs.rm(root, recursive=True)


def test_an_object_written_again_while_it_is_read_is_an_error_not_a_splice(
    s3_endpoint: str,
) -> None:
    """Every GET asks for the listed version (If-Match): bytes of two versions never meet."""
    from gradcheck.events.storage import StorageOptions

    options = StorageOptions.of({"endpoint_url": s3_endpoint})
    fs = s3fs.S3FileSystem(endpoint_url=s3_endpoint)
    root = f"s3://{BUCKET}/rewritten"
    url = f"{root}/events.out.tfevents.1.host"
    fs.pipe(url, b"a" * 300_000)
    assert storage.list_url(root, options) == [(url, 300_000)]
    with storage.open_binary(url, options) as stream:
        assert stream.read(10) == b"a" * 10
        fs.pipe(url, b"b" * 300_000)  # a new version, the same size
        stream.seek(200_000)  # a new GET
        with pytest.raises(OSError, match="written again while it was read"):
            stream.read(10)
    assert storage.list_url(root, options) == [(url, 300_000)]  # listed again: the new one
    with storage.open_binary(url, options) as stream:
        assert stream.read(10) == b"b" * 10
    fs.rm(root, recursive=True)


GIVE = "give an event file or a log directory."


def test_http_missing_and_unreachable_are_told_apart(tmp_path: Path) -> None:
    """fsspec's http filesystem raises FileNotFoundError for a 404 and for a server it cannot
    reach alike; only the first "does not exist"."""
    import functools
    import socket
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # not on the CLI's stderr
            pass

    handler = functools.partial(Quiet, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        missing = f"http://127.0.0.1:{server.server_address[1]}/no/such/run"
        line = one_line_error(invoke("analyze", missing))
        assert line == f"gradcheck: error: '{missing}' does not exist: " + GIVE
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as probe:  # a port nobody listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    line = one_line_error(invoke("analyze", f"http://127.0.0.1:{port}/logs"))
    assert line.startswith(f"gradcheck: error: cannot list 'http://127.0.0.1:{port}/logs': ")
    assert "does not exist" not in line and "connect" in line.lower()
