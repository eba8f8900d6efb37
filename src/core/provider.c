/* provider.c: the one release path of a provider. */
#include "provider.h"

#include <stdlib.h>

void plm_provider_free(struct plm_provider *p)
{
    if (!p)
        return;
    if (p->ops && p->ops->destroy)
        p->ops->destroy(p);
    free(p);
}
