/*
 * clusterqos SPANK plugin: the `--network-bandwidth=RATE[:PATTERN]` option of sbatch,
 * salloc and srun (docs/jobs.md, "Slurm").
 *
 * On the submitting side the plugin carries the request to the controller: it checks
 * the option at submission (so a typo fails at once, with one line, instead of in the
 * prolog) and hands it to the job's PrologSlurmctld/EpilogSlurmctld as the variable
 * SPANK_CQ_NETWORK_BANDWIDTH (spank_job_control_setenv). The reservation itself is
 * made by contrib/slurm/prolog-slurmctld before the job's tasks start, all of the job's
 * flows or none, and released by contrib/slurm/epilog-slurmctld.
 *
 * On the nodes (slurmstepd), with the argument `join_cgroup`, each task of a job that
 * asked is put into the job's cgroup before it runs (slurm_spank_task_init_privileged,
 * as root, in the task's own process): the plugin asks the node's agent (`join_job` on
 * its socket), which checks that the manager holds job slurm-<cluster>-<jobid> and that
 * it names this node, and moves the process. Its sockets then carry the job's
 * reservation (the kernel backend classifies by cgroup). The agent's socket is
 * `agent_socket=PATH`, else CLUSTERQOS_AGENT_SOCKET in slurmd's environment, else
 * /run/clusterqos/agent.sock. A task the agent cannot place runs anyway, with one
 * error line (in the job's output and slurmd's log) saying why.
 *
 * Built against Debian's libslurm-dev headers:
 *   cc -shared -fPIC -Wall -Wextra -o clusterqos_spank.so clusterqos_spank.c
 * and named in plugstack.conf:
 *   optional /usr/lib/clusterqos/clusterqos_spank.so join_cgroup
 */

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(clusterqos, 1);

#define CQ_ENV "CQ_NETWORK_BANDWIDTH"

/* The units `clusterqos` accepts for a bandwidth (qos_core::units::Bandwidth). */
static const char *const units[] = {
    "B/s",    "Bps",    "kB/s",  "KB/s",   "MB/s",   "GB/s",   "KiB/s", "MiB/s",
    "GiB/s",  "bit/s",  "b/s",   "bps",    "kbit/s", "kb/s",   "kbps",  "Kbit/s",
    "Kbps",   "Mbit/s", "Mb/s",  "Mbps",   "Gbit/s", "Gb/s",   "Gbps",  NULL};

/* The job patterns the manager expands (qos_runtime::protocol::job::Pattern). */
static const char *const patterns[] = {"all-to-all", "ring", "nearest-neighbour",
                                       "one-to-many", NULL};

static char *requested; /* the option's value, checked */
static int join_cgroup;    /* plugstack.conf's join_cgroup or agent_socket=: tasks join */
static char *agent_socket; /* plugstack.conf's agent_socket=, or NULL */

/* The agent's socket when neither the plugin's argument nor slurmd's environment names
 * one (the agent's own default). */
#define CQ_AGENT_SOCKET "/run/clusterqos/agent.sock"

/* The agent's protocol version on its socket (qos_runtime::protocol::PROTOCOL_VERSION). */
#define CQ_PROTOCOL_VERSION 1

static int in_list(const char *const *list, const char *s, size_t n) {
    for (; *list; list++)
        if (strlen(*list) == n && strncmp(*list, s, n) == 0)
            return 1;
    return 0;
}

/* Checks "RATE[:PATTERN]"; on error writes one line into `why`. */
static int check(const char *v, char *why, size_t len) {
    const char *colon = strchr(v, ':');
    size_t rate_len = colon ? (size_t)(colon - v) : strlen(v);
    char rate[64];
    char *end;
    double x;

    if (rate_len == 0 || rate_len >= sizeof rate) {
        snprintf(why, len, "expected RATE[:PATTERN] such as 10MB/s:all-to-all, not '%s'", v);
        return -1;
    }
    memcpy(rate, v, rate_len);
    rate[rate_len] = '\0';
    x = strtod(rate, &end);
    if (end == rate || !(x > 0)) {
        snprintf(why, len, "the rate '%s' is not a positive number with a unit (10MB/s)", rate);
        return -1;
    }
    while (isspace((unsigned char)*end))
        end++;
    if (!in_list(units, end, strlen(end))) {
        snprintf(why, len, "the rate '%s' has no known unit (B/s, kB/s, MB/s, GB/s, Mbit/s, Gbit/s, ...)",
                 rate);
        return -1;
    }
    if (colon && !in_list(patterns, colon + 1, strlen(colon + 1))) {
        snprintf(why, len,
                 "unknown pattern '%s' (all-to-all, ring, nearest-neighbour, one-to-many)",
                 colon + 1);
        return -1;
    }
    return 0;
}

static int option_cb(int val, const char *optarg, int remote) {
    char why[256];
    (void)val;
    if (optarg == NULL) {
        slurm_error("--network-bandwidth: expected RATE[:PATTERN]");
        return ESPANK_BAD_ARG;
    }
    if (check(optarg, why, sizeof why) != 0) {
        /* Remote contexts see the value the submission already checked. */
        if (!remote)
            slurm_error("--network-bandwidth: %s", why);
        return ESPANK_BAD_ARG;
    }
    free(requested);
    requested = strdup(optarg);
    return requested ? ESPANK_SUCCESS : ESPANK_ERROR;
}

static struct spank_option option = {
    "network-bandwidth", "RATE[:PATTERN]",
     "Reserve network bandwidth for the job's flows between its nodes, all of them or "
     "none, before it starts: every flow of PATTERN (all-to-all, ring, "
     "nearest-neighbour, one-to-many; default all-to-all) over the job's nodes at RATE "
     "(10MB/s, 1Gbit/s). A job that does not fit waits, pending.",
     1, 0, option_cb};

/* Registers the option in every context (sbatch and salloc do not read a static
 * `spank_options` table); reads the plugin's arguments. */
int slurm_spank_init(spank_t sp, int ac, char **av) {
    int i;
    for (i = 0; i < ac; i++) {
        if (strncmp(av[i], "agent_socket=", 13) == 0) {
            free(agent_socket);
            agent_socket = strdup(av[i] + 13);
            join_cgroup = 1;
        } else if (strcmp(av[i], "join_cgroup") == 0) {
            join_cgroup = 1;
        } else {
            slurm_error("clusterqos: unknown plugin argument '%s' (join_cgroup, "
                        "agent_socket=PATH)", av[i]);
            return ESPANK_BAD_ARG;
        }
    }
    return spank_option_register(sp, &option);
}

/* Letters, digits and . _ : @ + - only (a job id as the manager takes it; nothing to
 * escape in JSON). */
static int plain(const char *s) {
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("._:@+-", *s))
            return 0;
    return 1;
}

/* Asks the agent at `path` to put the calling process into job `id`'s cgroup. 0, or -1
 * with one line in `why`. */
static int join_job(const char *path, const char *id, char *why, size_t len) {
    struct sockaddr_un addr;
    struct timeval limit = {10, 0}; /* the agent waits up to 2 s for a fresh job */
    char line[512], reply[1024];
    size_t got = 0;
    int fd, n;

    if (strlen(path) >= sizeof addr.sun_path) {
        snprintf(why, len, "agent socket path too long: %s", path);
        return -1;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, len, "socket: %m");
        return -1;
    }
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, path);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        snprintf(why, len, "cannot reach the agent at %s: %m", path);
        close(fd);
        return -1;
    }
    n = snprintf(line, sizeof line, "{\"v\":%d,\"op\":\"join_job\",\"id\":\"%s\",\"pid\":0}\n",
                 CQ_PROTOCOL_VERSION, id);
    if (n < 0 || (size_t)n >= sizeof line || write(fd, line, (size_t)n) != n) {
        snprintf(why, len, "writing to the agent at %s: %m", path);
        close(fd);
        return -1;
    }
    while (got + 1 < sizeof reply) {
        ssize_t r = read(fd, reply + got, sizeof reply - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (memchr(reply, '\n', got))
            break;
    }
    close(fd);
    reply[got] = '\0';
    reply[strcspn(reply, "\n")] = '\0';
    if (strstr(reply, "\"ok\":true"))
        return 0;
    snprintf(why, len, "%s", got ? reply : "the agent sent no reply");
    return -1;
}

/* In each task of a job that asked, before it runs (root, in the task's process): into
 * the job's cgroup, through the node's agent. */
int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av) {
    char cluster[128] = "slurm", id[256], why[768];
    const char *path = agent_socket;
    uint32_t jobid;
    (void)ac;
    (void)av;
    if (requested == NULL || !join_cgroup || !spank_remote(sp))
        return ESPANK_SUCCESS;
    /* This process's own environment is still slurmstepd's (slurmd's), not the job's. */
    if (path == NULL)
        path = getenv("CLUSTERQOS_AGENT_SOCKET");
    if (path == NULL || *path == '\0')
        path = CQ_AGENT_SOCKET;
    if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS) {
        slurm_error("clusterqos: the task's job id is unknown: not put in its job's cgroup");
        return ESPANK_SUCCESS;
    }
    if (spank_getenv(sp, "SLURM_CLUSTER_NAME", cluster, sizeof cluster) != ESPANK_SUCCESS)
        strcpy(cluster, "slurm");
    snprintf(id, sizeof id, "slurm-%s-%u", cluster, jobid);
    if (!plain(id)) {
        slurm_error("clusterqos: job %s: not a job id the manager takes: not put in its "
                    "job's cgroup", id);
        return ESPANK_SUCCESS;
    }
    if (join_job(path, id, why, sizeof why) != 0)
        slurm_error("clusterqos: job %s's task not put in the job's cgroup (its traffic "
                    "is not reserved): %s", id, why);
    return ESPANK_SUCCESS;
}

/* After the options are read, in sbatch/salloc (allocator) or an srun that creates
 * the job (local): pass the request to the controller's prolog and epilog. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
    spank_context_t ctx = spank_context();
    (void)ac;
    (void)av;
    if (requested == NULL || (ctx != S_CTX_ALLOCATOR && ctx != S_CTX_LOCAL))
        return ESPANK_SUCCESS;
    if (spank_job_control_setenv(sp, CQ_ENV, requested, 1) != ESPANK_SUCCESS) {
        slurm_error("--network-bandwidth: could not pass the request to the controller");
        return ESPANK_ERROR;
    }
    return ESPANK_SUCCESS;
}

int slurm_spank_exit(spank_t sp, int ac, char **av) {
    (void)sp;
    (void)ac;
    (void)av;
    free(requested);
    requested = NULL;
    free(agent_socket);
    agent_socket = NULL;
    return ESPANK_SUCCESS;
}
