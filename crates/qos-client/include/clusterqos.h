/* clusterqos.h — C interface to clusterqos ports (GM-style user-level messaging with
 * rate control in the node agent; thesis §4.1–4.2). Link with -lqos_client.
 *
 * Functions return 0 (or a byte count) on success and a negative value on failure;
 * cq_last_error() then describes the calling thread's last failure. */
#ifndef CLUSTERQOS_H
#define CLUSTERQOS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cq_port cq_port;

typedef struct cq_recv_info {
    char src_node[64];   /* sender's node name, NUL-terminated */
    uint16_t src_port;   /* sender's port */
    uint8_t priority;
} cq_recv_info;

const char *cq_last_error(void);

/* Opens a port on the agent whose data-plane socket is socket_path; port < 0 lets the
 * agent choose. NULL on failure. */
cq_port *cq_open(const char *socket_path, int port);
int cq_port_number(const cq_port *port);

/* Queues len bytes for (dst_node, dst_port); reliable and in order per flow. */
int cq_send(cq_port *port, const char *dst_node, uint16_t dst_port, uint8_t priority,
            const void *buf, size_t len);
/* Waits for every queued send to complete. */
int cq_flush(cq_port *port, int timeout_ms);
/* Receives one message into buf (cap bytes), waiting up to timeout_ms: returns its
 * length, -2 on timeout, -1 on error. A message longer than cap is NOT taken: nothing
 * is copied, info (if not NULL) is filled, the message stays first in line and its
 * length (> cap) is returned, so call again with a buffer at least that large (as
 * recv(2) with MSG_PEEK|MSG_TRUNC allows). buf may be NULL with cap 0, to learn the
 * next message's length (a zero-length message is then taken, returning 0).
 *
 *     long n = cq_recv(p, buf, cap, 1000, &info);
 *     if (n > (long)cap) { buf = realloc(buf, cap = n); n = cq_recv(p, buf, cap, 0, &info); }
 *
 * Errors of messages sent earlier surface here and in cq_send/cq_flush (-1, see
 * cq_last_error()): "may not have been delivered: the agent there restarted" (the
 * destination's agent restarted before its port took the whole message) or "its agent
 * did not answer (gave up)" (no answer for 10 s). Later messages are sent afresh. */
long cq_recv(cq_port *port, void *buf, size_t cap, int timeout_ms, cq_recv_info *info);

/* Bandwidth manager (through the local agent's socket): 0 granted, 1 rejected
 * (reason in cq_last_error()), -1 error. */
int cq_request_bandwidth(cq_port *port, const char *manager_socket, const char *dst_node,
                         uint16_t dst_port, uint64_t bytes_per_sec);
/* Best-effort flow with a weight (1 ..= 1000000): its rate follows the manager's share
 * of the surplus. 0 registered, -1 error. */
int cq_best_effort(cq_port *port, const char *manager_socket, const char *dst_node,
                   uint16_t dst_port, uint32_t weight);
int cq_release(cq_port *port, const char *manager_socket, const char *dst_node,
               uint16_t dst_port);

void cq_close(cq_port *port);

/* Flows not tied to a port, for programs whose traffic the agent's kernel backend
 * enforces (docs/kernel-backend.md): the flow from this node's src_port to
 * (dst_node, dst_port) at priority; premium with bytes_per_sec > 0, best-effort with
 * weight when it is 0; owned by process pid (0: the caller). 0 granted (*rate, if not
 * NULL, gets the granted or current rate), 1 rejected (reason in cq_last_error()),
 * -1 error. */
int cq_flow_request(const char *manager_socket, uint16_t src_port, const char *dst_node,
                    uint16_t dst_port, uint8_t priority, uint64_t bytes_per_sec,
                    uint32_t weight, uint32_t pid, uint64_t *rate);
int cq_flow_release(const char *manager_socket, uint16_t src_port, const char *dst_node,
                    uint16_t dst_port, uint8_t priority);
/* The name of the agent's node into buf (cap bytes, NUL-terminated). 0 or -1. */
int cq_agent_node(const char *manager_socket, char *buf, size_t cap);

/* Jobs (docs/jobs.md): every flow of a parallel job reserved at once, or none, through
 * the agent at agent_socket; held by process pid (0: the caller) and released by
 * cq_job_release or one lease after that process ends. wait_s > 0 waits in line that
 * many seconds for room (first come, first served). 0 granted, 1 rejected (the reason,
 * naming the first resource short and by how much, in cq_last_error()), -1 error. */

/* pattern: "all-to-all", "ring", "nearest-neighbour" or "one-to-many" over nodes (a
 * comma-separated list, in order); every flow at bytes_per_sec. */
int cq_job_reserve(const char *agent_socket, const char *id, const char *pattern,
                   const char *nodes, uint64_t bytes_per_sec, uint32_t wait_s, uint32_t pid);

typedef struct cq_job_flow {
    const char *src;        /* source node */
    const char *dst;        /* destination node */
    uint64_t bytes_per_sec;
    uint16_t src_port;      /* both 0: the flow's packets are told by the job's cgroup; */
    uint16_t dst_port;      /* else those from src_port or to dst_port (as a flow's) */
} cq_job_flow;

int cq_job_reserve_flows(const char *agent_socket, const char *id, const cq_job_flow *flows,
                         size_t count, uint32_t wait_s, uint32_t pid);
/* Releases job id, reserved through this node's agent by the caller's user. 0 or -1. */
int cq_job_release(const char *agent_socket, const char *id);
/* Puts process pid (0: the caller) into the cgroup by which this node's agent (its
 * kernel backend) tells job id's traffic; sockets it opens from then on carry the
 * job's reservation. The job must be held and name this node. 0 or -1. */
int cq_job_join(const char *agent_socket, const char *id, uint32_t pid);

#ifdef __cplusplus
}
#endif
#endif
