/* cq_mpi_bw.c — the thesis's MPI-level bandwidth measurement (Gulati §5.5, Fig 5.9 and
 * 5.10) as an MPI program: rank 0 streams messages to every other rank over a
 * communicator of its own per peer, on which it first sets the clusterqos bandwidth
 * attribute (CQ_MPI_BANDWIDTH, thesis §4.4.2); each receiver measures the MPI-level
 * bandwidth it gets. Rank 0 prints one JSON line.
 *
 *   cq_mpi_bw [--secs S] [--warm W] [--size BYTES] [--window N] [--rates R1,R2,...] [--mpi1]
 *
 * R_i is the MPI-level rate (bytes/s) asked for the flow to rank i (0: no attribute,
 * unregulated); --window is the number of messages in flight per flow (sends posted by
 * rank 0, receives posted ahead by each receiver; default 4); --mpi1 sets the attribute
 * with MPI_Attr_put instead of MPI_Comm_set_attr.
 *
 * No rank spins: a rank that finds nothing completed naps for NAP_US before it asks MPI
 * again. A testbed's hosts share the machine's cores, and three ranks polling without a
 * pause left the sender a fraction of a core once the agents and the kernel's TCP took
 * their share (measured: under a 1-CPU quota its flows got 65-84 % of their rates).
 * A nap of 50 us is 250 bytes at 5 MB/s, well inside the sockets' buffers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clusterqos_mpi.h"

#define NAP_US 50

static void nap(void) {
    struct timespec ts = {0, NAP_US * 1000L};
    nanosleep(&ts, NULL);
}

/* MPI_Wait without spinning: MPI_Test, and a nap while the request is not done. */
static void wait_napping(MPI_Request *rq, MPI_Status *st) {
    int done = 0;
    for (;;) {
        MPI_Test(rq, &done, st);
        if (done)
            return;
        nap();
    }
}

#define MAX_WINDOW 64
#define MAX_PEERS 16

static const char *state_name(intptr_t s) {
    switch (s) {
    case CQ_MPI_GRANTED: return "granted";
    case CQ_MPI_REJECTED: return "rejected";
    case CQ_MPI_FAILED: return "failed";
    default: return "none";
    }
}

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

int main(int argc, char **argv) {
    double secs = 10, warm = 2;
    long size = 65536;
    long long rates[MAX_PEERS] = {0};
    int mpi1 = 0, window = 4;
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--secs") && i + 1 < argc)
            secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "--warm") && i + 1 < argc)
            warm = atof(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = atol(argv[++i]);
        else if (!strcmp(argv[i], "--window") && i + 1 < argc)
            window = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mpi1"))
            mpi1 = 1;
        else if (!strcmp(argv[i], "--rates") && i + 1 < argc) {
            char *p = argv[++i];
            for (int k = 1; k < MAX_PEERS && *p; k++) {
                rates[k] = strtoll(p, &p, 10);
                if (*p == ',')
                    p++;
            }
        } else {
            if (rank == 0)
                fprintf(stderr, "cq_mpi_bw: unknown argument '%s'\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (n < 2 || n > MAX_PEERS || size <= 0 || secs <= warm || warm < 0 || window < 1 ||
        window > MAX_WINDOW) {
        if (rank == 0)
            fprintf(stderr, "cq_mpi_bw: 2..%d ranks, --size > 0, --secs > --warm >= 0, --window 1..%d\n",
                    MAX_PEERS, MAX_WINDOW);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = malloc((size_t)size);
    memset(buf, 0x5a, (size_t)size);
    /* A communicator per flow: {0, i}. */
    MPI_Comm pair[MAX_PEERS];
    for (int i = 1; i < n; i++) {
        int color = (rank == 0 || rank == i) ? i : MPI_UNDEFINED;
        MPI_Comm_split(MPI_COMM_WORLD, color, rank, &pair[i]);
    }
    intptr_t state[MAX_PEERS] = {0}, granted[MAX_PEERS] = {0};
    if (rank == 0) {
        for (int i = 1; i < n; i++) {
            if (rates[i] <= 0)
                continue;
            void *v = (void *)(intptr_t)rates[i];
            if (mpi1)
                MPI_Attr_put(pair[i], CQ_MPI_BANDWIDTH, v);
            else
                MPI_Comm_set_attr(pair[i], CQ_MPI_BANDWIDTH, v);
            void *s = NULL, *g = NULL;
            int flag = 0;
            if (mpi1)
                MPI_Attr_get(pair[i], CQ_MPI_STATUS, &s, &flag);
            else
                MPI_Comm_get_attr(pair[i], CQ_MPI_STATUS, &s, &flag);
            state[i] = flag ? (intptr_t)s : 0;
            MPI_Comm_get_attr(pair[i], CQ_MPI_GRANTED_RATE, &g, &flag);
            granted[i] = flag ? (intptr_t)g : 0;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    double result[2] = {0, 0}; /* bytes in the window, window length */
    if (rank == 0) {
        MPI_Request req[MAX_PEERS][MAX_WINDOW];
        for (int i = 1; i < n; i++)
            for (int k = 0; k < window; k++)
                MPI_Isend(buf, (int)size, MPI_BYTE, 1, 0, pair[i], &req[i][k]);
        while (MPI_Wtime() - t0 < secs) {
            int any = 0;
            for (int i = 1; i < n; i++) {
                int idx, done;
                MPI_Testany(window, req[i], &idx, &done, MPI_STATUS_IGNORE);
                if (done && idx != MPI_UNDEFINED) {
                    MPI_Isend(buf, (int)size, MPI_BYTE, 1, 0, pair[i], &req[i][idx]);
                    any = 1;
                }
            }
            if (!any)
                nap();
        }
        /* One end message (tag 1) per receive the peer keeps posted: every receive
         * completes, none is cancelled (MPICH over UCX could hang in MPI_Finalize
         * after a cancelled receive). */
        for (int i = 1; i < n; i++) {
            MPI_Waitall(window, req[i], MPI_STATUSES_IGNORE);
            for (int k = 0; k < window; k++)
                MPI_Send(NULL, 0, MPI_BYTE, 1, 1, pair[i]);
        }
    } else {
        /* A window of receives posted ahead, so the sender's messages (rendezvous
         * above the eager limit) never wait for the next receive to be posted. */
        char *rbuf = malloc((size_t)size * window);
        MPI_Request rq[MAX_WINDOW];
        for (int k = 0; k < window; k++)
            MPI_Irecv(rbuf + (size_t)size * k, (int)size, MPI_BYTE, 0, MPI_ANY_TAG, pair[rank], &rq[k]);
        /* Bytes of the messages completed between warm and secs (fixed bounds: the
         * rate is not skewed by where the first and last message of the window fall). */
        double bytes = 0;
        /* Receives match in the order they were posted, so the oldest is waited for:
         * completions are seen in arrival order, and once an end message is seen the
         * other posted receives can only match the sender's other end messages. */
        for (int k = 0;; k = (k + 1) % window) {
            MPI_Status st;
            wait_napping(&rq[k], &st);
            if (st.MPI_TAG == 1) {
                for (int j = 0; j < window; j++)
                    if (j != k)
                        MPI_Wait(&rq[j], MPI_STATUS_IGNORE);
                break;
            }
            double t = MPI_Wtime() - t0;
            if (t >= warm && t < secs)
                bytes += (double)size;
            MPI_Irecv(rbuf + (size_t)size * k, (int)size, MPI_BYTE, 0, MPI_ANY_TAG, pair[rank], &rq[k]);
        }
        free(rbuf);
        result[0] = bytes;
        result[1] = secs - warm;
    }
    double all[2 * MAX_PEERS];
    MPI_Gather(result, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("{\"size\":%ld,\"secs\":%g,\"warm\":%g,\"wire_factor\":%g,\"peers\":[", size, secs,
               warm, cq_mpi_wire_factor());
        for (int i = 1; i < n; i++) {
            double bw = all[2 * i + 1] > 0 ? all[2 * i] / all[2 * i + 1] : 0;
            printf("%s{\"rank\":%d,\"requested\":%lld,\"status\":\"%s\",\"granted_wire\":%ld,"
                   "\"reason\":",
                   i > 1 ? "," : "", i, rates[i], state_name(state[i]), (long)granted[i]);
            json_string(cq_mpi_reason(pair[i]));
            printf(",\"mpi_bytes_per_sec\":%.1f}", bw);
        }
        printf("]}\n");
        fflush(stdout);
        for (int i = 1; i < n; i++)
            if (rates[i] > 0)
                MPI_Comm_delete_attr(pair[i], CQ_MPI_BANDWIDTH);
    }
    /* Every rank leaves together once the flows are released (MPICH over UCX could
     * hang in MPI_Finalize when a rank got there long before its peer). */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 1; i < n; i++)
        if (pair[i] != MPI_COMM_NULL)
            MPI_Comm_free(&pair[i]);
    free(buf);
    MPI_Finalize();
    return 0;
}
