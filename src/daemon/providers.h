/* providers.h: building the configured provider. */
#pragma once
#include "../core/provider.h"
#include "config.h"

struct plm_provider *providers_build(const struct plm_config *cfg, struct plm_err *err);
