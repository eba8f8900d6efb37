/* hostcheck.h: the Host check against DNS rebinding (issue 22 item 2). A page on another site
 * whose name an attacker points at 127.0.0.1 reaches a loopback daemon with its own name in
 * Host; with no token to stop it (open mode) it could run code and read the run cards. So a
 * request is served only when its Host names this daemon: the address the connection reached,
 * localhost, 127.0.0.1, [::1], or an entry of PLIMSOLL_ALLOWED_HOSTS.
 * Pure: no allocation, no I/O. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* host: the Host field's value (len bytes, not NUL-terminated); local: the address the
 * connection reached (NULL or AF_UNSPEC: unknown); allowed: PLIMSOLL_ALLOWED_HOSTS (NULL: none).
 * A port in Host is ignored unless an allowed entry names one. */
bool hostcheck_ok(const char *host, size_t len, const struct sockaddr_storage *local, const char *allowed);
/* 0 when v is a valid PLIMSOLL_ALLOWED_HOSTS: comma-separated entries, each a DNS name, an IPv4
 * address or a bracketed IPv6 address, optionally with ":port"; else -1 with why filled. */
int hostcheck_parse_list(const char *v, char *why, size_t why_cap);
