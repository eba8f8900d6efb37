/* cleanup_curl.h: scope-bound ownership of libcurl handles and header lists (header-only glue for
 * the layers that speak HTTP out; core's own library never includes it). */
#pragma once
#include <curl/curl.h>

#include "cleanup.h"

DEFINE_CLEANUP(CURL, curl_easy_cleanup)
DEFINE_CLEANUP(struct curl_slist, curl_slist_free_all)
#define cleanup_curl __attribute__((cleanup(cleanup_fn_curl_easy_cleanup)))
#define cleanup_slist __attribute__((cleanup(cleanup_fn_curl_slist_free_all)))
