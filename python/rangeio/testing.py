"""Sources for tests of code that uses rangeio (and rangeio's own tests).

simulated_source(size, latency_ms): the simulated object store of
rangeio/sim.h (fixed latency); expected(offset, length): its bytes.
BarrierSource(size, width, timeout_s): holds reads until `width` are
outstanding together (peak_held tells how many were), then lets all through;
after timeout_s it fails the held reads with rangeio.ReadError.
"""

from ._rangeio.testing import BarrierSource, expected, simulated_source

__all__ = ["BarrierSource", "expected", "simulated_source"]
