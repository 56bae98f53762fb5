"""An S3 object read through one streaming GET per pass, a reader's window at a time.

fsspec's S3 file makes one ranged GET per read; a reader that reads a whole file front to back
needs only one request. Used by ``storage.open_binary`` for ``s3://`` (``storage.STREAM_S3``).
"""

from __future__ import annotations

import io
from contextlib import suppress
from typing import Any

from gradcheck.events.storage import StorageOptions, storage_errors


class StreamedS3File(io.RawIOBase):
    """An S3 object read front to back through one streaming GET (``Range: bytes=N-``, from
    where a seek lands), ``read(n)`` taking ``n`` bytes off the response as they come: one
    request per pass over the file instead of one per 16 MB window, memory one window. A seek
    back into the bytes last read (the reader's window keeps a record's start) costs nothing.

    Measured on the local moto server, which copies the whole object for every request: see
    bench/README.md.
    """

    def __init__(
        self, fs: Any, path: str, size: int, storage: StorageOptions, etag: str | None = None
    ) -> None:
        super().__init__()
        self.fs, self.path, self.size, self.storage = fs, path, size, storage
        self.etag = etag  # the version listed: every GET asks for it (If-Match), none spliced
        self._position = 0  # where the next read starts
        self._body: Any = None  # the open response, at offset ``_body_at``
        self._body_at = 0
        self._last = b""  # the bytes last taken off the response, from offset ``_last_at``
        self._last_at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def read(self, size: int | None = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self._position + size)
        parts = []
        if self._last_at <= self._position < self._last_at + len(self._last):
            parts.append(self._last[self._position - self._last_at : end - self._last_at])
            self._position += len(parts[-1])
        if self._position < end:
            with storage_errors(f"s3://{self.path}", self.storage):
                if self._body is None or self._body_at != self._position:
                    self._open_at(self._position)
                data = self._sync(self._take, end - self._position)
            self._last, self._last_at = data, self._position
            self._body_at += len(data)
            self._position += len(data)
            parts.append(data)
        return b"".join(parts) if len(parts) != 1 else parts[0]

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._drop()
        super().close()

    def _open_at(self, offset: int) -> None:
        self._drop()
        bucket, key, _ = self.fs.split_path(self.path)
        pinned = {"IfMatch": self.etag} if self.etag else {}
        try:
            response = self._sync(
                self.fs._call_s3,
                "get_object",
                Bucket=bucket,
                Key=key,
                Range=f"bytes={offset}-",
                **pinned,
            )
        except Exception as error:
            text = str(error)  # s3fs turns a 412 into OSError(EINVAL, "...pre-conditions...")
            if "PreconditionFailed" in text or "pre-condition" in text:
                raise OSError(
                    f"s3://{self.path} was written again while it was read (its ETag changed)"
                ) from None
            raise
        self._body, self._body_at = response["Body"], offset
        if self.etag is None:  # not listed: the first GET's version is the one read
            self.etag = response.get("ETag")

    async def _take(self, count: int) -> bytes:
        chunks, got = [], 0
        while got < count:
            chunk = await self._body.read(count - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _drop(self) -> None:
        if self._body is not None:
            body, self._body = self._body, None
            with suppress(Exception):  # closed on the loop's thread, as aiohttp wants
                self._sync(body.aclose) if hasattr(body, "aclose") else body.close()

    def _sync(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        from fsspec.asyn import sync

        return sync(self.fs.loop, function, *args, **kwargs)
