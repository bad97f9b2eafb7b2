/* pingpong.c — two ports on one agent exchange messages through clusterqos.
 * Usage: pingpong SOCKET NODE [COUNT]   (exit 0 when every reply matched, and a message
 * longer than the receive buffer was kept and then read whole) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clusterqos.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SOCKET NODE [COUNT]\n", argv[0]);
        return 2;
    }
    const char *sock = argv[1], *node = argv[2];
    int count = argc > 3 ? atoi(argv[3]) : 10;
    cq_port *a = cq_open(sock, 21), *b = cq_open(sock, 22);
    if (!a || !b) {
        fprintf(stderr, "open: %s\n", cq_last_error());
        return 1;
    }
    char msg[256], got[256];
    cq_recv_info info;
    for (int i = 0; i < count; i++) {
        int n = snprintf(msg, sizeof msg, "ping %d", i);
        if (cq_send(a, node, 22, 0, msg, (size_t)n) != 0) {
            fprintf(stderr, "send: %s\n", cq_last_error());
            return 1;
        }
        long r = cq_recv(b, got, sizeof got, 5000, &info);
        if (r != n || memcmp(got, msg, (size_t)n) != 0 || info.src_port != 21 || strcmp(info.src_node, node) != 0) {
            fprintf(stderr, "recv %d: %ld (%s)\n", i, r, r < 0 ? cq_last_error() : "mismatch");
            return 1;
        }
        if (cq_send(b, node, 21, 0, got, (size_t)r) != 0 || cq_recv(a, got, sizeof got, 5000, NULL) != n) {
            fprintf(stderr, "pong %d: %s\n", i, cq_last_error());
            return 1;
        }
    }
    /* A message longer than the buffer is kept and its length returned: grow, read again. */
    char big[1000];
    memset(big, 'x', sizeof big);
    if (cq_send(a, node, 22, 0, big, sizeof big) != 0) {
        fprintf(stderr, "send big: %s\n", cq_last_error());
        return 1;
    }
    long need = cq_recv(b, got, sizeof got, 5000, &info);
    char *whole = need > (long)sizeof got ? malloc((size_t)need) : NULL;
    if (!whole || cq_recv(b, whole, (size_t)need, 0, NULL) != need || memcmp(whole, big, sizeof big) != 0) {
        fprintf(stderr, "big message: %ld (%s)\n", need, cq_last_error());
        return 1;
    }
    free(whole);
    printf("%d round trips ok between ports %d and %d\n", count, cq_port_number(a), cq_port_number(b));
    cq_close(a);
    cq_close(b);
    return 0;
}
