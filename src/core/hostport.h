/* hostport.h: the one parser of listener addresses (PLIMSOLL_ADDR, PLIMSOLL_METRICS_ADDR,
 * PLIMSOLL_GUARD_ADDR): "host:port", "[ipv6]:port" or ":port" (every interface), numeric hosts
 * and "localhost" only, so a listener never depends on name resolution at startup. */
#pragma once
#include <sys/socket.h>

/* 0 with ss and sl filled, or -1 when addr is not one of the accepted forms. */
int plm_parse_hostport(const char *addr, struct sockaddr_storage *ss, socklen_t *sl);
