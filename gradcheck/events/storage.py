"""The one door to storage: every event file is opened here, every URL listed here.

A local path is opened with plain ``open`` and listed by ``os.walk`` (``discover``): fsspec is
not even imported. A URL (``s3://``, ``gs://``, ``az://``, ``hdfs://``, ``http(s)://``,
``file://``, ``memory://``, anything fsspec knows) is read through fsspec in big blocks, with
the options of a :class:`StorageOptions` (an endpoint URL, ``anon``: credentials come from the
backends' own chains). The decoder only ever sees a binary stream.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

from gradcheck._optional import install_hint
from gradcheck.errors import InputError

BLOCK_SIZE = 16 << 20
"""fsspec's block size for remote files other than S3's (``s3_stream.StreamedS3File``). With
:data:`CACHE` ``none`` each read of the reader's window (16 MB at a time in the C engine, 8 MB
in the reference reader) is one ranged GET of exactly that many bytes: the whole file is never
downloaded, and memory is what it is for a local file."""

CACHE: dict[str, Any] = {"cache_type": "none"}
"""How fsspec caches what it fetched: not at all, the reader's window is the cache (``readahead``
and ``background`` were no faster and ``readahead`` held twice the memory: ``bench/README.md``)."""

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*(::[^:]+)*://")

SECRET_WORDS = ("key", "secret", "token", "password", "passwd", "credential", "sas", "auth")
"""Option names that look like secrets: refused on the command line (credentials come from the
environment, config files or instance metadata, never from argv, which ``ps`` shows)."""

EXTRAS = {"s3fs": "s3", "gcsfs": "gcs", "adlfs": "azure"}
"""The gradcheck extra that installs each fsspec backend."""


@dataclass(frozen=True)
class StorageOptions:
    """fsspec options for every URL read (``endpoint_url``, ``anon``, ``requester_pays``...).

    Picklable, so worker processes get them with their task; ``repr`` shows the keys only:
    a value is never printed.
    """

    items: tuple[tuple[str, Any], ...] = ()

    def kwargs(self) -> dict[str, Any]:
        return dict(self.items)

    def __repr__(self) -> str:
        return f"StorageOptions({', '.join(f'{key}=<redacted>' for key, _ in self.items)})"

    @classmethod
    def of(cls, options: Mapping[str, Any] | None) -> StorageOptions:
        return cls(tuple(sorted((options or {}).items())))


NO_OPTIONS = StorageOptions()


def parse_storage_options(texts: Iterable[str]) -> StorageOptions:
    """``KEY=VALUE`` texts as options; a value is a JSON literal when it parses as one
    (``anon=true``, ``max_concurrency=4``), else the text. Raises ``InputError`` for a text
    without ``=`` or a key that looks like a secret (the message never shows the value)."""
    import json

    options: dict[str, Any] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(
                f"--storage-option {key or '(empty)'}: expected KEY=VALUE "
                "(e.g. endpoint_url=http://127.0.0.1:9000 or anon=true)"
            )
        try:
            parsed: Any = json.loads(value)
        except ValueError:
            parsed = value
        if looks_secret(key) or any(looks_secret(inner) for inner in _keys(parsed)):
            raise InputError(
                f"--storage-option {key}=<redacted>: secrets are not taken on the command line "
                "(other users can read it); use the storage library's own credentials "
                "(environment variables such as AWS_ACCESS_KEY_ID, its config files, "
                "instance metadata)"
            )
        options[key] = parsed
    return StorageOptions.of(options)


def _keys(value: Any) -> Iterator[str]:
    """The keys of every mapping inside ``value`` (``client_kwargs={"region_name": ...}``)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield str(key)
            yield from _keys(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _keys(inner)


def _texts(value: Any) -> Iterator[str]:
    """Every text inside ``value``, nested mappings and lists included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _texts(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _texts(inner)


def looks_secret(key: str) -> bool:
    """Whether an option name looks like it holds a secret (``key``, ``secret``, ``token``...)."""
    lowered = key.lower()
    return any(word in lowered for word in SECRET_WORDS)


def is_url(path: str) -> bool:
    """Whether ``path`` is a URL (``scheme://...``, fsspec chains too), not a local path."""
    return _URL.match(path) is not None


def open_binary(path: str, storage: StorageOptions = NO_OPTIONS) -> BinaryIO:
    """Open ``path`` (a local path or a URL) for binary reading."""
    if not is_url(path):
        return open(path, "rb", buffering=1 << 20)  # noqa: SIM115 - the caller closes it
    fs, inner = _filesystem(path, storage)
    if STREAM_S3 and _protocols(fs) & {"s3"}:
        from gradcheck.events.s3_stream import StreamedS3File

        etag = _details.get(path, {}).get("ETag")  # the listed version, if it was listed
        return StreamedS3File(fs, inner, file_size(path, storage), storage, etag)  # type: ignore[return-value]
    extra = {"size": _sizes[path]} if path in _sizes and _knows_size(fs) else {}
    with storage_errors(path, storage):
        stream = fs.open(inner, "rb", block_size=BLOCK_SIZE, **CACHE, **extra)
    if path in _details and getattr(stream, "_details", False) is None:
        stream._details = _details[path]  # what fsspec would ask again (ETag...) in a worker
    return stream  # type: ignore[no-any-return]


def file_size(path: str, storage: StorageOptions = NO_OPTIONS) -> int:
    """Size of ``path`` in bytes (for a URL: from its listing when it was listed)."""
    if not is_url(path):
        return os.path.getsize(path)
    if path in _sizes:
        return _sizes[path]
    fs, inner = _filesystem(path, storage)
    with storage_errors(path, storage):
        size = int(fs.size(inner))
    _sizes[path] = size
    return size


def stream_size(stream: BinaryIO) -> int | None:
    """The size now of the file behind ``stream`` (an fsspec file: its size when opened);
    None when the stream has no file behind it."""
    try:
        return os.fstat(stream.fileno()).st_size
    except (OSError, ValueError, AttributeError):
        size = getattr(stream, "size", None)
        return size if isinstance(size, int) else None


def list_url(root: str, storage: StorageOptions = NO_OPTIONS) -> list[tuple[str, int]] | None:
    """``(url, size)`` of every file under the URL ``root`` in one recursive listing; None
    when ``root`` is a file. The URLs start with ``root`` as given (its trailing ``/``
    dropped), so reports name what the user typed. Raises ``FileNotFoundError`` when it does
    not exist, ``OSError`` when it cannot be listed (``storage_errors``)."""
    fs, inner = _filesystem(root, storage)
    with storage_errors(root, storage):
        fs.invalidate_cache(inner)  # a listing of now: a watched log grows between two
        info = fs.info(inner)
        if info.get("type") != "directory":
            _sizes[root] = int(info.get("size") or 0)
            _details[root] = info  # its version now (an earlier listing's may be stale)
            return None
        found = fs.find(inner, detail=True, withdirs=False)
    base = fs._strip_protocol(inner).rstrip("/")
    prefix = root.rstrip("/")
    files = []
    for name, details in found.items():
        name = fs._strip_protocol(name)
        if details.get("type") == "directory" or not name.startswith(base + "/"):
            continue
        url = prefix + name[len(base) :]
        _sizes[url] = int(details.get("size") or 0)
        _details[url] = details
        files.append((url, _sizes[url]))
    return files


_sizes: dict[str, int] = {}
"""Sizes of URLs already listed or asked for: no second request per file (forked workers
inherit it)."""
_details: dict[str, dict[str, Any]] = {}
"""The listing's details of each file (s3fs checks the ETag on each read): a forked worker's
new filesystem object would otherwise ask for them again, a HEAD per file."""


_OPEN_TAKES_SIZE = {"s3", "http", "https"}
"""Protocols whose ``fs.open`` takes ``size=``: a listed file opens without another request."""


def _knows_size(fs: Any) -> bool:
    return bool(_protocols(fs) & _OPEN_TAKES_SIZE)


def _protocols(fs: Any) -> set[str]:
    protocol = getattr(fs, "protocol", ())
    return {protocol} if isinstance(protocol, str) else set(protocol)


STREAM_S3 = True
"""Read an S3 object through one streaming GET per pass (``s3_stream.StreamedS3File``), not
a ranged GET per reader window."""


def _filesystem(url: str, storage: StorageOptions) -> tuple[Any, str]:
    """The fsspec filesystem for ``url`` and the path inside it; ``InputError`` with an install
    hint when its backend is not installed, or the protocol is unknown."""
    from fsspec.core import url_to_fs  # here: local paths never import fsspec

    try:
        return url_to_fs(url, **storage.kwargs())  # type: ignore[no-any-return]
    except ImportError as error:
        raise InputError(_install_hint(url, error)) from None
    except ValueError as error:
        if "protocol" in str(error).lower():
            raise InputError(
                f"{_scheme(url)}:// is not a protocol fsspec knows ({url!r})"
            ) from None
        raise InputError(f"cannot use {url!r}: {_redacted(str(error), storage)}") from None
    except TypeError as error:  # an option the backend does not take
        raise InputError(
            f"cannot use {url!r} with --storage-option {', '.join(storage.kwargs())}: "
            f"{_redacted(str(error), storage)}"
        ) from None


def _install_hint(url: str, error: ImportError) -> str:
    from fsspec.registry import known_implementations

    scheme = _scheme(url)
    entry = known_implementations.get(scheme, {})
    module = str(entry.get("class", "")).split(".")[0]
    if module in ("", "fsspec"):  # fsspec's own class, needing another library (hdfs: pyarrow)
        module = (getattr(error, "name", None) or "").split(".")[0] or module or "?"
    extra = EXTRAS.get(module)
    install = install_hint(extra) if extra else f"pip install {module}"
    return f"{scheme}:// needs {module}: {install}"


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].split("::")[-1]


@contextmanager
def storage_errors(url: str, storage: StorageOptions) -> Iterator[None]:
    """What a storage library raises, as the pipeline knows it: ``FileNotFoundError`` as is
    (unless it stands for a connection that failed: ``OSError`` then), missing credentials as
    ``InputError``, anything else as ``OSError`` (which readers report as an unreadable file),
    with every option value redacted from the message."""
    try:
        yield
    except FileNotFoundError as error:
        cause = error.__cause__  # fsspec's http says "not found" for a server it cannot reach
        if isinstance(cause, OSError) and not isinstance(cause, FileNotFoundError):
            raise OSError(_redacted(str(cause) or type(cause).__name__, storage)) from None
        raise
    except InputError:
        raise
    except Exception as error:
        name = type(error).__name__
        if "Credential" in name:
            raise InputError(
                f"cannot read {url!r}: no usable credentials ({name}); set them up as the "
                "storage library expects (environment, config file, instance metadata), or "
                "pass --storage-option anon=true for public data"
            ) from None
        message = str(error) if isinstance(error, OSError) else f"{name}: {error}"
        raise OSError(_redacted(message, storage)) from None


def _redacted(text: str, storage: StorageOptions) -> str:
    """``text`` with every text option value (an endpoint, a profile, a region) replaced by
    ``<redacted>``; numbers and flags are left, lest every ``True`` in a message go."""
    for _, value in storage.items:
        for inner in _texts(value):
            if len(inner) >= 3:
                text = text.replace(inner, "<redacted>")
    return text


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words: ``a FIFO (named pipe)``, ..."""
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")
