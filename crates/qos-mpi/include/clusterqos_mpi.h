/* clusterqos_mpi.h — the clusterqos attribute interface for MPI programs (Gulati's
 * thesis §3.4, §4.4.2: special keyvals on a communicator), provided by the PMPI library
 * libclusterqos_mpi.so (LD_PRELOAD it, or link it before the MPI library).
 *
 *   MPI_Comm_set_attr(comm, CQ_MPI_BANDWIDTH, (void *)(intptr_t)20000000);
 *       requests 20 MB/s (MPI-level: message bytes per second) for the calling rank's
 *       traffic to each peer of comm on another node; the rate is mapped to the wire
 *       rate the manager grants (CLUSTERQOS_MPI_WIRE_FACTOR, see docs/kernel-backend.md).
 *   MPI_Comm_set_attr(comm, CQ_MPI_BEST_EFFORT, (void *)(intptr_t)weight);
 *       best-effort flows to the peers instead.
 *   MPI_Comm_get_attr(comm, CQ_MPI_STATUS, &v, &flag);
 *       (intptr_t)v is CQ_MPI_GRANTED, CQ_MPI_REJECTED or CQ_MPI_FAILED (flag 0: nothing
 *       requested); cq_mpi_reason(comm) says why; CQ_MPI_GRANTED_RATE gives the rate
 *       granted (bytes/s on the wire, the smallest over the peers).
 *   MPI_Comm_delete_attr(comm, CQ_MPI_BANDWIDTH) (or freeing comm, or MPI_Finalize)
 *       releases the flows.
 *   MPI_Comm_set_attr(comm, CQ_MPI_JOB_BANDWIDTH, (void *)(intptr_t)20000000);
 *       collective (every rank of comm, same value): reserves the whole communicator's
 *       traffic as one job (docs/jobs.md) — 20 MB/s for every ordered pair of ranks on
 *       different nodes — all or nothing; every rank gets the same CQ_MPI_STATUS and
 *       reason, and a refused job holds nothing. Held by rank 0's process (freed one
 *       lease after it dies); deleting the attribute on rank 0 (or freeing comm, or
 *       MPI_Finalize) releases it.
 *
 * MPI-1's MPI_Attr_put / MPI_Attr_get / MPI_Attr_delete work the same. The keyvals are
 * valid after MPI_Init. Fortran: bind them with ISO_C_BINDING, e.g.
 *   integer(c_int), bind(C, name="CQ_MPI_BANDWIDTH") :: CQ_MPI_BANDWIDTH
 */
#ifndef CLUSTERQOS_MPI_H
#define CLUSTERQOS_MPI_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

extern int CQ_MPI_BANDWIDTH;
extern int CQ_MPI_BEST_EFFORT;
extern int CQ_MPI_STATUS;
extern int CQ_MPI_GRANTED_RATE;
extern int CQ_MPI_JOB_BANDWIDTH;

enum { CQ_MPI_NONE = 0, CQ_MPI_GRANTED = 1, CQ_MPI_REJECTED = 2, CQ_MPI_FAILED = 3 };

/* Why the last request on comm was rejected or failed ("" when granted or none). */
const char *cq_mpi_reason(MPI_Comm comm);
/* The same for a Fortran handle (what mpi4py's comm.py2f() gives). */
const char *cq_mpi_reason_f(MPI_Fint comm);
/* The MPI-level to wire rate factor in force. */
double cq_mpi_wire_factor(void);

#ifdef __cplusplus
}
#endif
#endif
