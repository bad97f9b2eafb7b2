/* clusterqos_mpi.c — the thesis's MPI attribute interface (Gulati §3.4, §4.4.2) on a
 * real MPI library, by PMPI interposition.
 *
 * MPI_Init creates the keyvals and learns, for every rank of MPI_COMM_WORLD, its node
 * (asked of the node's clusterqos agent) and the TCP port its MPI library listens on
 * (its IPv4 listening socket; CLUSTERQOS_MPI_PORT overrides). Setting CQ_MPI_BANDWIDTH
 * on a communicator asks the manager, through the local agent, for one flow per peer on
 * another node — (my node, my port) -> (peer node, peer port): the kernel backend then
 * shapes the packets that leave from my port or go to the peer's — at the MPI-level rate
 * times CLUSTERQOS_MPI_WIRE_FACTOR (MPI-level to raw bandwidth, as the thesis mapped MPI
 * rates to raw GM rates). All or nothing: if one flow is rejected the others are given
 * back. The keyval's delete callback releases them (MPI_Comm_delete_attr, replacing the
 * value, MPI_Comm_free, MPI_Finalize).
 *
 * Setting CQ_MPI_JOB_BANDWIDTH (collective: every rank of the communicator sets it, with
 * the same value) reserves the communicator's traffic as one job (docs/jobs.md): every
 * ordered pair of its ranks on different nodes, all or nothing. Rank 0 of the
 * communicator asks its agent (the job is held by its process: freed one lease after it
 * dies) and broadcasts the answer, so every rank sees the same status and reason; a
 * refused job holds nothing. Its delete callback on rank 0 releases the job.
 *
 * Talking to the agent goes through the clusterqos
 * client library (libqos_client.so, loaded at MPI_Init: CLUSTERQOS_CLIENT_LIB, else the
 * directory of this library, else the loader's search path).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clusterqos_mpi.h"

int CQ_MPI_BANDWIDTH = MPI_KEYVAL_INVALID;
int CQ_MPI_BEST_EFFORT = MPI_KEYVAL_INVALID;
int CQ_MPI_STATUS = MPI_KEYVAL_INVALID;
int CQ_MPI_GRANTED_RATE = MPI_KEYVAL_INVALID;
int CQ_MPI_JOB_BANDWIDTH = MPI_KEYVAL_INVALID;

#define NODE_MAX 64

typedef int (*flow_request_fn)(const char *, uint16_t, const char *, uint16_t, uint8_t,
                               uint64_t, uint32_t, uint32_t, uint64_t *);
typedef int (*flow_release_fn)(const char *, uint16_t, const char *, uint16_t, uint8_t);
typedef int (*agent_node_fn)(const char *, char *, size_t);
typedef const char *(*last_error_fn)(void);

/* The C ABI's cq_job_flow (include/clusterqos.h). */
struct cq_job_flow {
    const char *src, *dst;
    uint64_t bytes_per_sec;
    uint16_t src_port, dst_port;
};
typedef int (*job_reserve_fn)(const char *, const char *, const char *, const char *, uint64_t,
                              uint32_t, uint32_t);
typedef int (*job_reserve_flows_fn)(const char *, const char *, const struct cq_job_flow *,
                                    size_t, uint32_t, uint32_t);
typedef int (*job_release_fn)(const char *, const char *);

static struct {
    void *lib;
    flow_request_fn request;
    flow_release_fn release;
    agent_node_fn node;
    last_error_fn error;
    job_reserve_fn job_reserve;             /* NULL: a client library without jobs */
    job_reserve_flows_fn job_reserve_flows;
    job_release_fn job_release;
} cq;

/* What every rank of MPI_COMM_WORLD told at MPI_Init. */
struct rank_info {
    char node[NODE_MAX]; /* "" when its agent could not be reached */
    uint16_t port;
    uint16_t pad[3];
};

static struct rank_info *world;
static int world_size = 0, world_rank = -1;
static char agent_socket[PATH_MAX] = "/tmp/clusterqos-agent.sock";
static double wire_factor = 1.0;
static char init_problem[256] = "MPI_Init has not run";

struct flow {
    char node[NODE_MAX];
    uint16_t sport, dport;
};

/* The request made on one communicator. */
struct record {
    MPI_Comm comm;
    int status;
    uint64_t granted; /* smallest rate granted over the flows, bytes/s */
    char reason[512];
    int nflows;
    struct flow *flows;
    char job[72]; /* the job this rank holds for the communicator ("" if none) */
    struct record *next;
};

static struct record *records;

static struct record *find(MPI_Comm comm) {
    for (struct record *r = records; r; r = r->next)
        if (r->comm == comm)
            return r;
    return NULL;
}

static struct record *find_or_add(MPI_Comm comm) {
    struct record *r = find(comm);
    if (r)
        return r;
    r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->comm = comm;
    r->next = records;
    records = r;
    return r;
}

static void release_flows(struct record *r) {
    for (int i = 0; i < r->nflows; i++)
        if (cq.release)
            cq.release(agent_socket, r->flows[i].sport, r->flows[i].node, r->flows[i].dport, 0);
    free(r->flows);
    r->flows = NULL;
    r->nflows = 0;
    if (r->job[0] && cq.job_release)
        cq.job_release(agent_socket, r->job);
    r->job[0] = 0;
}

static void forget(MPI_Comm comm) {
    for (struct record **p = &records; *p; p = &(*p)->next) {
        if ((*p)->comm == comm) {
            struct record *r = *p;
            *p = r->next;
            release_flows(r);
            free(r);
            return;
        }
    }
}

/* The delete callback of CQ_MPI_BANDWIDTH and CQ_MPI_BEST_EFFORT: releases the flows. */
static int delete_flows(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)keyval;
    (void)value;
    (void)extra;
    forget(comm);
    return MPI_SUCCESS;
}

/* The path of the directory holding this library, for finding libqos_client.so. */
static int own_dir(char *out, size_t cap) {
    Dl_info info;
    if (!dladdr((void *)&own_dir, &info) || !info.dli_fname)
        return -1;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash)
        return -1;
    size_t n = (size_t)(slash - info.dli_fname);
    if (n + 1 > cap)
        return -1;
    memcpy(out, info.dli_fname, n);
    out[n] = 0;
    return 0;
}

static int load_client(void) {
    const char *env = getenv("CLUSTERQOS_CLIENT_LIB");
    char path[PATH_MAX];
    if (env && *env) {
        cq.lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    } else {
        if (own_dir(path, sizeof path - 32) == 0) {
            strcat(path, "/libqos_client.so");
            cq.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
        if (!cq.lib)
            cq.lib = dlopen("libqos_client.so", RTLD_NOW | RTLD_LOCAL);
    }
    if (!cq.lib) {
        snprintf(init_problem, sizeof init_problem,
                 "cannot load the clusterqos client library (set CLUSTERQOS_CLIENT_LIB): %s",
                 dlerror());
        return -1;
    }
    cq.request = (flow_request_fn)dlsym(cq.lib, "cq_flow_request");
    cq.release = (flow_release_fn)dlsym(cq.lib, "cq_flow_release");
    cq.node = (agent_node_fn)dlsym(cq.lib, "cq_agent_node");
    cq.error = (last_error_fn)dlsym(cq.lib, "cq_last_error");
    cq.job_reserve = (job_reserve_fn)dlsym(cq.lib, "cq_job_reserve");
    cq.job_reserve_flows = (job_reserve_flows_fn)dlsym(cq.lib, "cq_job_reserve_flows");
    cq.job_release = (job_release_fn)dlsym(cq.lib, "cq_job_release");
    if (!cq.request || !cq.release || !cq.node || !cq.error) {
        snprintf(init_problem, sizeof init_problem,
                 "the clusterqos client library lacks cq_flow_request (too old)");
        cq.request = NULL;
        cq.release = NULL;
        return -1;
    }
    return 0;
}

/* The TCP port of this process's IPv4 listening socket (the lowest, if several): the
 * port the MPI library's TCP transport accepts connections on. 0 if none. */
static uint16_t listening_port(void) {
    const char *env = getenv("CLUSTERQOS_MPI_PORT");
    if (env && *env)
        return (uint16_t)strtoul(env, NULL, 10);
    /* This process's socket inodes. */
    unsigned long inodes[256];
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        char p[64], target[64];
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(p, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = 0;
        unsigned long ino;
        if (sscanf(target, "socket:[%lu]", &ino) == 1)
            inodes[n++] = ino;
    }
    closedir(d);
    FILE *f = fopen("/proc/self/net/tcp", "r");
    if (!f)
        return 0;
    char line[512];
    unsigned best = 0;
    if (!fgets(line, sizeof line, f)) { /* header */
        fclose(f);
        return 0;
    }
    while (fgets(line, sizeof line, f)) {
        unsigned addr, port, raddr, rport, state;
        unsigned long ino;
        if (sscanf(line, " %*d: %x:%x %x:%x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &addr, &port,
                   &raddr, &rport, &state, &ino) != 6)
            continue;
        if (state != 0x0A) /* TCP_LISTEN */
            continue;
        for (int i = 0; i < n; i++)
            if (inodes[i] == ino && (best == 0 || port < best))
                best = port;
    }
    fclose(f);
    return (uint16_t)best;
}

static void set_up(void) {
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_flows, &CQ_MPI_BANDWIDTH, NULL);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_flows, &CQ_MPI_BEST_EFFORT, NULL);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_flows, &CQ_MPI_JOB_BANDWIDTH, NULL);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &CQ_MPI_STATUS, NULL);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &CQ_MPI_GRANTED_RATE,
                            NULL);
    const char *s = getenv("CLUSTERQOS_AGENT_SOCKET");
    if (s && *s)
        snprintf(agent_socket, sizeof agent_socket, "%s", s);
    const char *wf = getenv("CLUSTERQOS_MPI_WIRE_FACTOR");
    if (wf && *wf) {
        double v = strtod(wf, NULL);
        if (v >= 0.5 && v <= 4.0)
            wire_factor = v;
    }
    struct rank_info me;
    memset(&me, 0, sizeof me);
    init_problem[0] = 0;
    if (load_client() == 0 && cq.node(agent_socket, me.node, sizeof me.node) != 0) {
        snprintf(init_problem, sizeof init_problem, "no clusterqos agent: %s", cq.error());
        me.node[0] = 0;
    }
    me.port = listening_port();
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    world = calloc((size_t)world_size, sizeof *world);
    if (world)
        PMPI_Allgather(&me, sizeof me, MPI_BYTE, world, sizeof me, MPI_BYTE, MPI_COMM_WORLD);
}

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        set_up();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        set_up();
    return rc;
}

int MPI_Finalize(void) {
    while (records)
        forget(records->comm);
    return PMPI_Finalize();
}

static void fail(struct record *r, int status, const char *fmt, const char *arg) {
    r->status = status;
    snprintf(r->reason, sizeof r->reason, fmt, arg);
    release_flows(r);
}

/* Asks for the flows of `comm` (premium at `value` MPI-level bytes/s, or best-effort of
 * weight `value`) and records the outcome. */
static void request_job(MPI_Comm comm, struct record *r, intptr_t value);

static void request(MPI_Comm comm, int keyval, intptr_t value) {
    if (keyval == CQ_MPI_JOB_BANDWIDTH) {
        struct record *r = find_or_add(comm);
        if (r) {
            release_flows(r);
            request_job(comm, r, value);
        }
        return;
    }
    struct record *r = find_or_add(comm);
    if (!r)
        return;
    release_flows(r);
    r->status = CQ_MPI_FAILED;
    r->granted = 0;
    r->reason[0] = 0;
    if (!cq.request || !world || !world[world_rank].node[0]) {
        fail(r, CQ_MPI_FAILED, "%s", init_problem[0] ? init_problem : "no clusterqos agent");
        return;
    }
    if (value <= 0) {
        fail(r, CQ_MPI_FAILED, "%s", "the attribute value must be a positive rate or weight");
        return;
    }
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) {
        fail(r, CQ_MPI_FAILED, "%s", "intercommunicators are not supported");
        return;
    }
    MPI_Group group, wgroup;
    int size;
    PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &wgroup);
    PMPI_Group_size(group, &size);
    int *ranks = malloc(sizeof(int) * (size_t)size), *wranks = malloc(sizeof(int) * (size_t)size);
    r->flows = calloc((size_t)size, sizeof *r->flows);
    if (!ranks || !wranks || !r->flows) {
        free(ranks);
        free(wranks);
        PMPI_Group_free(&group);
        PMPI_Group_free(&wgroup);
        fail(r, CQ_MPI_FAILED, "%s", "out of memory");
        return;
    }
    for (int i = 0; i < size; i++)
        ranks[i] = i;
    PMPI_Group_translate_ranks(group, size, ranks, wgroup, wranks);
    PMPI_Group_free(&group);
    PMPI_Group_free(&wgroup);
    const struct rank_info *me = &world[world_rank];
    uint64_t bytes = 0;
    uint32_t weight = 0;
    if (keyval == CQ_MPI_BANDWIDTH)
        bytes = (uint64_t)((double)value * wire_factor + 0.5);
    else
        weight = value > 1000000 ? 1000000 : (uint32_t)value;
    for (int i = 0; i < size; i++) {
        int w = wranks[i];
        if (w == MPI_UNDEFINED || w == world_rank || w < 0 || w >= world_size)
            continue;
        const struct rank_info *peer = &world[w];
        if (!peer->node[0]) {
            char msg[64];
            snprintf(msg, sizeof msg, "world rank %d: its node has no clusterqos agent", w);
            free(ranks);
            free(wranks);
            fail(r, CQ_MPI_FAILED, "%s", msg);
            return;
        }
        if (strcmp(peer->node, me->node) == 0)
            continue; /* same node: the traffic never crosses the interface */
        struct flow *f = &r->flows[r->nflows];
        snprintf(f->node, sizeof f->node, "%s", peer->node);
        f->sport = me->port;
        f->dport = peer->port;
        uint64_t rate = 0;
        int rc = cq.request(agent_socket, f->sport, f->node, f->dport, 0, bytes, weight, 0, &rate);
        if (rc != 0) {
            free(ranks);
            free(wranks);
            fail(r, rc == 1 ? CQ_MPI_REJECTED : CQ_MPI_FAILED, "%s", cq.error());
            return;
        }
        r->nflows++;
        if (r->granted == 0 || rate < r->granted)
            r->granted = rate;
    }
    free(ranks);
    free(wranks);
    r->status = CQ_MPI_GRANTED;
}

static int is_flow_key(int keyval) {
    return keyval != MPI_KEYVAL_INVALID &&
           (keyval == CQ_MPI_BANDWIDTH || keyval == CQ_MPI_BEST_EFFORT ||
            keyval == CQ_MPI_JOB_BANDWIDTH);
}

static int is_status_key(int keyval) {
    return keyval != MPI_KEYVAL_INVALID &&
           (keyval == CQ_MPI_STATUS || keyval == CQ_MPI_GRANTED_RATE);
}

int MPI_Comm_set_attr(MPI_Comm comm, int keyval, void *value) {
    /* Storing the value runs the delete callback on the old one: its flows go first. */
    int rc = PMPI_Comm_set_attr(comm, keyval, value);
    if (rc == MPI_SUCCESS && is_flow_key(keyval))
        request(comm, keyval, (intptr_t)value);
    return rc;
}

static int get_status(MPI_Comm comm, int keyval, void *value, int *flag) {
    struct record *r = find(comm);
    *flag = r != NULL;
    if (r)
        *(void **)value =
            (void *)(intptr_t)(keyval == CQ_MPI_STATUS ? (intptr_t)r->status : (intptr_t)r->granted);
    return MPI_SUCCESS;
}

int MPI_Comm_get_attr(MPI_Comm comm, int keyval, void *value, int *flag) {
    if (is_status_key(keyval))
        return get_status(comm, keyval, value, flag);
    return PMPI_Comm_get_attr(comm, keyval, value, flag);
}

int MPI_Comm_delete_attr(MPI_Comm comm, int keyval) {
    /* The delete callback releases the flows (and forgets the status). */
    return PMPI_Comm_delete_attr(comm, keyval);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
int MPI_Attr_put(MPI_Comm comm, int keyval, void *value) {
    int rc = PMPI_Attr_put(comm, keyval, value);
    if (rc == MPI_SUCCESS && is_flow_key(keyval))
        request(comm, keyval, (intptr_t)value);
    return rc;
}

int MPI_Attr_get(MPI_Comm comm, int keyval, void *value, int *flag) {
    if (is_status_key(keyval))
        return get_status(comm, keyval, value, flag);
    return PMPI_Attr_get(comm, keyval, value, flag);
}

int MPI_Attr_delete(MPI_Comm comm, int keyval) {
    return PMPI_Attr_delete(comm, keyval);
}
#pragma GCC diagnostic pop

const char *cq_mpi_reason(MPI_Comm comm) {
    struct record *r = find(comm);
    return r ? r->reason : "";
}

const char *cq_mpi_reason_f(MPI_Fint comm) {
    return cq_mpi_reason(MPI_Comm_f2c(comm));
}

double cq_mpi_wire_factor(void) {
    return wire_factor;
}

/* The answer rank 0 broadcasts to the communicator's ranks. */
struct job_answer {
    int64_t status;
    uint64_t granted;
    char reason[512];
};

/* Rank 0's part of CQ_MPI_JOB_BANDWIDTH: builds the job from the members' nodes and
 * ports and asks the agent. Fills `a`; on a grant, names the job in `r`. */
static void reserve_job(MPI_Comm comm, struct record *r, intptr_t value, struct job_answer *a) {
    static unsigned serial = 0;
    a->status = CQ_MPI_FAILED;
    if (!cq.request || !world || !world[world_rank].node[0]) {
        snprintf(a->reason, sizeof a->reason, "%s",
                 init_problem[0] ? init_problem : "no clusterqos agent");
        return;
    }
    if (!cq.job_reserve || !cq.job_reserve_flows) {
        snprintf(a->reason, sizeof a->reason,
                 "the clusterqos client library lacks cq_job_reserve (too old)");
        return;
    }
    if (value <= 0) {
        snprintf(a->reason, sizeof a->reason, "the attribute value must be a positive rate");
        return;
    }
    MPI_Group group, wgroup;
    int size;
    PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &wgroup);
    PMPI_Group_size(group, &size);
    int *ranks = malloc(sizeof(int) * (size_t)size), *w = malloc(sizeof(int) * (size_t)size);
    size_t cap = (size_t)size * (size_t)(size > 1 ? size - 1 : 1);
    struct cq_job_flow *flows = calloc(cap, sizeof *flows);
    if (!ranks || !w || !flows) {
        free(ranks);
        free(w);
        free(flows);
        PMPI_Group_free(&group);
        PMPI_Group_free(&wgroup);
        snprintf(a->reason, sizeof a->reason, "out of memory");
        return;
    }
    for (int i = 0; i < size; i++)
        ranks[i] = i;
    PMPI_Group_translate_ranks(group, size, ranks, wgroup, w);
    PMPI_Group_free(&group);
    PMPI_Group_free(&wgroup);
    uint64_t bytes = (uint64_t)((double)value * wire_factor + 0.5);
    size_t n = 0;
    for (int i = 0; i < size && a->reason[0] == 0; i++) {
        if (w[i] < 0 || w[i] >= world_size || !world[w[i]].node[0]) {
            snprintf(a->reason, sizeof a->reason,
                     "rank %d of the communicator: its node has no clusterqos agent", i);
            break;
        }
        for (int j = 0; j < size; j++) {
            if (j == i || w[j] < 0 || w[j] >= world_size)
                continue;
            const struct rank_info *s = &world[w[i]], *d = &world[w[j]];
            if (!strcmp(s->node, d->node))
                continue; /* same node: the traffic never crosses the interface */
            /* Without both ports the pair's traffic is told by the job's cgroup: one flow
             * per pair of nodes, carrying every such pair of ranks. */
            uint16_t sp = s->port && d->port ? s->port : 0, dp = sp ? d->port : 0;
            size_t k = 0;
            for (; k < n; k++)
                if (!strcmp(flows[k].src, s->node) && !strcmp(flows[k].dst, d->node) &&
                    flows[k].src_port == sp && flows[k].dst_port == dp)
                    break;
            if (k == n) {
                flows[n].src = s->node;
                flows[n].dst = d->node;
                flows[n].src_port = sp;
                flows[n].dst_port = dp;
                n++;
            }
            flows[k].bytes_per_sec += bytes;
        }
    }
    free(ranks);
    free(w);
    if (a->reason[0]) {
        free(flows);
        return;
    }
    if (n == 0) { /* every rank on one node: nothing crosses the network */
        free(flows);
        a->status = CQ_MPI_GRANTED;
        a->granted = bytes;
        return;
    }
    char id[72];
    snprintf(id, sizeof id, "mpi-%ld-%u-%.40s", (long)getpid(), ++serial, world[world_rank].node);
    int rc = cq.job_reserve_flows(agent_socket, id, flows, n, 0, 0);
    free(flows);
    if (rc == 0) {
        a->status = CQ_MPI_GRANTED;
        a->granted = bytes;
        snprintf(r->job, sizeof r->job, "%s", id);
    } else {
        a->status = rc == 1 ? CQ_MPI_REJECTED : CQ_MPI_FAILED;
        snprintf(a->reason, sizeof a->reason, "%s", cq.error());
    }
}

/* CQ_MPI_JOB_BANDWIDTH on `comm`: collective; every rank records rank 0's answer. */
static void request_job(MPI_Comm comm, struct record *r, intptr_t value) {
    struct job_answer a;
    memset(&a, 0, sizeof a);
    int inter = 0, rank = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) {
        r->status = CQ_MPI_FAILED;
        r->granted = 0;
        snprintf(r->reason, sizeof r->reason, "intercommunicators are not supported");
        return;
    }
    PMPI_Comm_rank(comm, &rank);
    if (rank == 0)
        reserve_job(comm, r, value, &a);
    PMPI_Bcast(&a, sizeof a, MPI_BYTE, 0, comm);
    r->status = (int)a.status;
    r->granted = a.status == CQ_MPI_GRANTED ? a.granted : 0;
    snprintf(r->reason, sizeof r->reason, "%s", a.reason);
}
