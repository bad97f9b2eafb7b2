/*
 * clusterqos SPANK plugin: the `--network-bandwidth=RATE[:PATTERN]` option of sbatch,
 * salloc and srun (docs/jobs.md, "Slurm").
 *
 * The plugin only carries the request from the user to the controller: it checks the
 * option at submission (so a typo fails at once, with one line, instead of in the
 * prolog) and hands it to the job's PrologSlurmctld/EpilogSlurmctld as the variable
 * SPANK_CQ_NETWORK_BANDWIDTH (spank_job_control_setenv). The reservation itself is
 * made by contrib/slurm/prolog-slurmctld before the job's tasks start, all of the job's
 * flows or none, and released by contrib/slurm/epilog-slurmctld.
 *
 * Built against Debian's libslurm-dev headers:
 *   cc -shared -fPIC -Wall -Wextra -o clusterqos_spank.so clusterqos_spank.c
 * and named in plugstack.conf:
 *   optional /usr/lib/clusterqos/clusterqos_spank.so
 */

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 * `spank_options` table). */
int slurm_spank_init(spank_t sp, int ac, char **av) {
    (void)ac;
    (void)av;
    return spank_option_register(sp, &option);
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
    return ESPANK_SUCCESS;
}
