"""An fsspec filesystem over rangeio: protocol "rangeio".

    import fsspec, rangeio.fsspec
    fs = fsspec.filesystem("rangeio", read_thread_num=64)
    fs.cat_ranges(["s3://bucket/a.parquet"] * 3, [0, 100, 5000], [10, 200, 6000])
    with fs.open("http://host/data.bin") as f: f.seek(4096); f.read(100)

Paths are anything rangeio.open takes (s3://, http(s)://, file://, plain
paths), optionally prefixed with "rangeio://". Every read of the filesystem
goes through one Limiter, shared by the readers of all its paths; options
are those of rangeio.open (reader and source keys with "_"). cat_ranges
opens the objects it has not seen at once, then issues all the ranges of the
call together and takes them as they complete, whatever the object; a
range's error (on_error="return") reaches that range alone.
fsspec's API returns bytes, so results are copied once out of rangeio's
buffers; use rangeio.open for zero-copy memoryviews.
"""

import concurrent.futures
import threading

import fsspec
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

import rangeio

_PREFIX = "rangeio://"
# Objects opened at once by one cat_ranges call.
_OPEN_THREADS = 32


class RangeioFileSystem(AbstractFileSystem):
    protocol = "rangeio"
    # Readers are cheap to keep, but each instance owns a Limiter: cache
    # instances per options as fsspec does by default.
    cachable = True

    def __init__(self, limiter=None, **options):
        super().__init__(limiter=limiter, **options)
        self._options = {k: v for k, v in options.items()
                         if k not in ("skip_instance_cache", "use_listings_cache",
                                      "listings_expiry_time", "max_paths")}
        def limits(key):
            return rangeio._rangeio._is_limiter_key(key.replace("_", "-"))

        self.limiter = limiter or rangeio.Limiter(
            **{k: v for k, v in self._options.items() if limits(k)})
        self._reader_options = {k: v for k, v in self._options.items()
                                if not limits(k)}
        self._readers = {}
        self._lock = threading.Lock()

    @classmethod
    def _strip_protocol(cls, path):
        path = str(path)
        return path[len(_PREFIX):] if path.startswith(_PREFIX) else path

    def reader(self, path):
        """The rangeio.Reader of `path` (opened once, on the shared Limiter)."""
        path = self._strip_protocol(path)
        with self._lock:
            reader = self._readers.get(path)
        if reader is None:
            reader = rangeio.open(path, limiter=self.limiter,
                                  **self._reader_options)
            with self._lock:
                reader = self._readers.setdefault(path, reader)
        return reader

    def info(self, path, **kwargs):
        path = self._strip_protocol(path)
        return {"name": path, "size": self.reader(path).size, "type": "file"}

    def ls(self, path, detail=True, **kwargs):
        entry = self.info(path)
        return [entry] if detail else [entry["name"]]

    def _range(self, path, start, end):
        """fsspec's (start, end) with None and negatives -> (offset, length)."""
        size = self.reader(path).size
        start = 0 if start is None else start
        end = size if end is None else end
        if start < 0:
            start = max(size + start, 0)
        if end < 0:
            end = max(size + end, 0)
        end = min(end, size)
        if start > size:
            raise ValueError(f"{path}: start {start} is past its size {size}")
        return start, max(end - start, 0)

    def cat_file(self, path, start=None, end=None, **kwargs):
        offset, length = self._range(path, start, end)
        return bytes(self.reader(path).read(offset, length))

    def _open_readers(self, paths):
        """Opens the readers of `paths` not open yet, at once (each open asks
        its object's size: a round trip); {path: exception} of failures."""
        with self._lock:
            missing = [p for p in dict.fromkeys(paths) if p not in self._readers]
        failed = {}
        if len(missing) < 2:
            for p in missing:
                try:
                    self.reader(p)
                except Exception as err:  # noqa: BLE001 (fsspec's on_error)
                    failed[p] = err
            return failed
        workers = min(len(missing), _OPEN_THREADS)
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            opened = {p: pool.submit(self.reader, p) for p in missing}
        for p, future in opened.items():
            if future.exception() is not None:
                failed[p] = future.exception()
        return failed

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return",
                   **kwargs):
        if not isinstance(paths, list):
            raise TypeError("paths must be a list")
        n = len(paths)
        starts = starts if isinstance(starts, list) else [starts] * n
        ends = ends if isinstance(ends, list) else [ends] * n
        if len(starts) != n or len(ends) != n:
            raise ValueError("paths, starts and ends differ in length")
        paths = [self._strip_protocol(p) for p in paths]
        failed = self._open_readers(paths)
        out = [None] * n
        by_path = {}
        for i, (p, s, e) in enumerate(zip(paths, starts, ends)):
            try:
                if p in failed:
                    raise failed[p]
                by_path.setdefault(p, []).append((i, self._range(p, s, e)))
            except Exception as err:  # noqa: BLE001 (fsspec's on_error)
                if on_error != "return":
                    raise
                out[i] = err
        # Every object's reads at once, bounded by the shared Limiter, taken
        # in completion order across objects: none waits behind another.
        items = list(by_path.items())
        results = rangeio._rangeio._cat_ranges(
            [(self.reader(p), [r for _, r in rs]) for p, rs in items])
        flat = (i for _, rs in items for i, _ in rs)
        for i, value in zip(flat, results):
            if isinstance(value, BaseException) and on_error != "return":
                raise value
            out[i] = value
        return out

    def _open(self, path, mode="rb", block_size="default", autocommit=True,
              cache_options=None, **kwargs):
        if mode != "rb":
            raise ValueError(f"rangeio opens objects read-only, not {mode!r}")
        return RangeioFile(self, self._strip_protocol(path), mode=mode,
                           block_size=block_size, cache_options=cache_options,
                           size=self.reader(path).size, **kwargs)


class RangeioFile(AbstractBufferedFile):
    """A read-only file whose buffered reads are rangeio reads."""

    def _fetch_range(self, start, end):
        return bytes(self.fs.reader(self.path).read(start, end - start))


fsspec.register_implementation("rangeio", RangeioFileSystem, clobber=True)
