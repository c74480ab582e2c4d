/*
 * Elastic workers (elastic.c): the commit a re-formed job resumes from,
 * and the refusal of a rank its job went on without.
 */
#ifndef DD_API_ELASTIC_H
#define DD_API_ELASTIC_H

#include <dreamddp.h>

/** With DREAMDDP_ELASTIC=yes, checks the settings and the worker count
 *  against DREAMDDP_ELASTIC_MIN, and refuses a dropped rank; nothing
 *  otherwise. After the roles are agreed. */
dd_status_t dd_elastic_setup(dd_context_h ctx);

/** Waits for a commit being written and frees the elastic state. */
void dd_elastic_free(dd_context_h ctx);

/** An error of a rank the job went on without becomes DD_ERR_CANCELED,
 *  saying so; any other status is returned as it is. */
dd_status_t dd_elastic_fault(dd_context_h ctx, dd_status_t status);

#endif
