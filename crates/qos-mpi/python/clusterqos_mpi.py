"""clusterqos keyvals for mpi4py programs (Gulati's thesis §3.4, §4.4.2).

    import clusterqos_mpi            # before mpi4py.MPI: loads the PMPI library
    from mpi4py import MPI
    pair = MPI.COMM_WORLD.Split(...)
    pair.Set_attr(clusterqos_mpi.BANDWIDTH, 20_000_000)   # MPI-level bytes/s to each peer
    state, rate, reason = clusterqos_mpi.status(pair)      # "granted", wire B/s, ""
    pair.Delete_attr(clusterqos_mpi.BANDWIDTH)             # releases
    MPI.COMM_WORLD.Set_attr(clusterqos_mpi.JOB_BANDWIDTH, 20_000_000)  # every rank: one job

The PMPI library (libclusterqos_mpi.so, built by the qos-mpi crate for the MPI library
mpi4py uses) is found in CLUSTERQOS_MPI_LIB, or is already loaded (LD_PRELOAD). It must be
loaded before mpi4py.MPI so that MPI's calls resolve to it: importing this module first
does that. The keyvals exist once MPI is initialised; their numbers are read then.
"""

import ctypes
import os
import sys

if "mpi4py.MPI" in sys.modules and not os.environ.get("LD_PRELOAD", "").count("clusterqos_mpi"):
    raise ImportError("import clusterqos_mpi before mpi4py.MPI (or LD_PRELOAD libclusterqos_mpi.so)")

_path = os.environ.get("CLUSTERQOS_MPI_LIB")
if _path:
    _lib = ctypes.CDLL(_path, mode=ctypes.RTLD_GLOBAL)
else:
    _lib = ctypes.CDLL(None)  # LD_PRELOAD put it in the global scope
    try:
        _lib.cq_mpi_reason_f
    except AttributeError:
        raise ImportError("the clusterqos PMPI library is not loaded: set CLUSTERQOS_MPI_LIB "
                          "to libclusterqos_mpi.so (or LD_PRELOAD it)") from None
_lib.cq_mpi_reason_f.restype = ctypes.c_char_p
_lib.cq_mpi_reason_f.argtypes = [ctypes.c_int]
_lib.cq_mpi_wire_factor.restype = ctypes.c_double

from mpi4py import MPI  # noqa: E402  (after the library, on purpose)

STATES = {0: "none", 1: "granted", 2: "rejected", 3: "failed"}


def _keyval(name):
    return ctypes.c_int.in_dll(_lib, name).value


BANDWIDTH = _keyval("CQ_MPI_BANDWIDTH")
BEST_EFFORT = _keyval("CQ_MPI_BEST_EFFORT")
STATUS = _keyval("CQ_MPI_STATUS")
GRANTED_RATE = _keyval("CQ_MPI_GRANTED_RATE")
# Collective: the communicator's traffic reserved as one job (every rank, same value).
JOB_BANDWIDTH = _keyval("CQ_MPI_JOB_BANDWIDTH")

if BANDWIDTH == MPI.KEYVAL_INVALID:
    raise ImportError("MPI was initialised without the clusterqos PMPI library")


def status(comm):
    """(state, granted wire rate in B/s, reason) of the last request on `comm`: state is
    "none", "granted", "rejected" or "failed"."""
    s = comm.Get_attr(STATUS)
    r = comm.Get_attr(GRANTED_RATE)
    reason = _lib.cq_mpi_reason_f(comm.py2f()).decode(errors="replace")
    return STATES.get(int(s or 0), "none"), int(r or 0), reason


def wire_factor():
    """The MPI-level to wire rate factor in force (CLUSTERQOS_MPI_WIRE_FACTOR)."""
    return _lib.cq_mpi_wire_factor()
