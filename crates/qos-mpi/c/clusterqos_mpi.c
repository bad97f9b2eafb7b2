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
 * value, MPI_Comm_free, MPI_Finalize). Talking to the agent goes through the clusterqos
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

#define NODE_MAX 64

typedef int (*flow_request_fn)(const char *, uint16_t, const char *, uint16_t, uint8_t,
                               uint64_t, uint32_t, uint32_t, uint64_t *);
typedef int (*flow_release_fn)(const char *, uint16_t, const char *, uint16_t, uint8_t);
typedef int (*agent_node_fn)(const char *, char *, size_t);
typedef const char *(*last_error_fn)(void);

static struct {
    void *lib;
    flow_request_fn request;
    flow_release_fn release;
    agent_node_fn node;
    last_error_fn error;
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
static void request(MPI_Comm comm, int keyval, intptr_t value) {
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
           (keyval == CQ_MPI_BANDWIDTH || keyval == CQ_MPI_BEST_EFFORT);
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
