"""rangeio: many byte-range reads from files, HTTP and S3, bounded memory.

    import rangeio
    reader = rangeio.open("s3://bucket/key", read_thread_num=64)
    for index, view in reader.read_ranges([(0, 4096), (1 << 20, 4096)]):
        ...  # view: a read-only memoryview over rangeio's buffer, no copy

Options are the keys of docs/options.md with "_" for "-": limiter options
(io_concurrency or read_thread_num, response_budget_bytes, ...), reader
options (planner, hedge, ...) and source options (connect_timeout_ms,
endpoint, region, local_engine, ...), routed as the CLI's -o routes them.
Every blocking call releases the GIL; errors are FileNotFoundError,
PermissionError, ValueError (bad input) or an OSError subclass (ReadError,
CancelledError, BudgetError) naming the range and cause.
"""

import concurrent.futures
import itertools
import threading

from . import _rangeio
from ._rangeio import (  # noqa: F401  (re-exported API)
    BudgetError,
    CancelledError,
    RangeIterator,
    ReadError,
    Reader,
    Source,
)

__all__ = [
    "open", "Limiter", "Reader", "RangeIterator", "BatchedReader", "Source",
    "ReadError", "CancelledError", "BudgetError",
]


def _option_text(key, value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    raise ValueError(
        f"option {key}={value!r}: want an int, a bool or a str, "
        f"not {type(value).__name__}")


def _options(options):
    """{"read_thread_num": 64} -> {"read-thread-num": "64"}."""
    return {k.replace("_", "-"): _option_text(k, v)
            for k, v in options.items()}


class Limiter(_rangeio.Limiter):
    """Global bounds shared by every reader given it: io_concurrency (alias
    read_thread_num), response_budget_count, response_budget_bytes and
    hedge_reserve; any other option is refused. Thread-safe; stats()
    reports in_flight/retained now and at the peak."""

    def __init__(self, **options):
        super().__init__(_options(options))


def open(url_or_path, *, limiter=None, **options):  # noqa: A001
    """A Reader of one object: a path, file://, http(s):// or s3:// URL, or
    a rangeio.Source. With `limiter`, the reader shares its bounds, and
    limiter options given here are refused (ValueError) rather than
    ignored."""
    if isinstance(url_or_path, _rangeio.Source):
        return _rangeio._open_source(url_or_path, _options(options), limiter)
    return _rangeio._open_url(str(url_or_path), _options(options), limiter)


class _Completions:
    """Resolves read_async futures: library threads only queue results in
    the core's CompletionQueue; this one Python thread takes them (GIL
    released while it waits) and sets each Future. concurrent.futures needs
    a Python thread to resolve futures without taking the GIL on I/O
    threads; it holds no result between two waits."""

    def __init__(self):
        self.queue = _rangeio._CompletionQueue()
        self._pending = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._thread = None

    def submit(self, native, offset, length, source):
        future = concurrent.futures.Future()
        future.set_running_or_notify_cancel()  # a started read cannot cancel
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rangeio-completions", daemon=True)
                self._thread.start()
            rid = next(self._ids)
            self._pending[rid] = future
        try:
            native.read_async(rid, offset, length, source, self.queue)
        except BaseException:
            with self._lock:
                del self._pending[rid]
            raise
        return future

    def _run(self):
        while self._resolve(self.queue.pop()):
            pass

    def _resolve(self, done):
        """Sets the futures of `done`; False once the queue is closed."""
        if done is None:
            return False
        for rid, value in done:
            with self._lock:
                future = self._pending.pop(rid)
            if isinstance(value, BaseException):
                future.set_exception(value)
            else:
                future.set_result(value)
        return True


_completions = None
_completions_lock = threading.Lock()


def _get_completions():
    global _completions
    with _completions_lock:
        if _completions is None:
            _completions = _Completions()
        return _completions


class BatchedReader:
    """One handle many Python threads share: concurrent requests are batched
    (coalesced per object, read at once). `readers` is a Reader or a list of
    them (source i is readers[i]). Thread-safe."""

    def __init__(self, readers, *, max_batches=0,
                 max_batch_requests=4096):
        """max_batches: batches in progress at once (0: the sum of the
        sources' io_concurrency); max_batch_requests: requests per batch."""
        if isinstance(readers, Reader):
            readers = [readers]
        self._native = _rangeio._BatchedReader(
            list(readers), max_batches, max_batch_requests)

    def read(self, offset, length, source=0):
        """The range's bytes as a read-only memoryview (blocks, GIL
        released)."""
        return self._native.read(offset, length, source)

    def read_async(self, offset, length, source=0):
        """A concurrent.futures.Future of the range's memoryview."""
        return _get_completions().submit(self._native, offset, length, source)

    def read_many(self, ranges, source=0):
        """An iterator of (index, memoryview) over `ranges` of one source,
        as they complete: a read_ranges stream of that source's reader, so
        its reads share the limiter with every other caller's, and dropping
        the iterator cancels what it has not delivered. The calling thread
        takes each result itself (no Future); the first error is raised."""
        return self._native.reader(source).read_ranges(ranges,
                                                       order="as-completed")

    def size(self, source=0):
        return self._native.size(source)

    @property
    def source_count(self):
        return self._native.source_count()

    def stats(self):
        return self._native.stats()
