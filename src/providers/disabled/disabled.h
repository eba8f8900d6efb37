/* disabled.h: the safe default provider: tier none, refuses every run before dispatch. */
#pragma once
#include "../../core/provider.h"

struct plm_provider *disabled_provider_new(void);
