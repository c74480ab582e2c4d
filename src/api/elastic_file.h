/*
 * The files of the elastic commits (elastic_file.c): the directory's
 * owner and mode, slots made new and checked for owner, and the checksum
 * that tells a whole commit from a damaged one, and the elastic state
 * that dd_init makes and dd_finalize frees (so that context.c never calls
 * elastic.c, which is above the public calls). It knows nothing of what a
 * commit holds beyond its header.
 */
#ifndef DD_API_ELASTIC_FILE_H
#define DD_API_ELASTIC_FILE_H

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

#define DD_ELASTIC_MAGIC "DDCOMMIT"
#define DD_ELASTIC_VERSION 2u
#define DD_ELASTIC_PREFIX "commit-"

/* A worker's elastic state (DREAMDDP_ELASTIC=yes): the state buffers and
 * the two slots commits go to; made by dd_init (context.c), used by the
 * commits (elastic.c), freed by dd_elastic_state_free. */
typedef struct {
    char *name;
    void *buf;
    size_t bytes;
} dd_elastic_state_t;

struct dd_elastic {
    dd_elastic_state_t *states;
    size_t n_states, cap_states;
    int committed;          /* a commit was taken: the state list is frozen */
    unsigned char *slot[2]; /* mapped; NULL until the first commit */
    size_t size;            /* of each slot */
    int next;               /* the slot the next commit goes to */
};

/** Unmaps the slots and frees e (NULL: nothing). */
void dd_elastic_state_free(struct dd_elastic *e);

/* A slot's header; the body follows it. */
typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t generation; /* of the job that wrote it */
    int32_t rank;        /* that wrote it, in that generation */
    int32_t workers;
    uint64_t token_tag; /* the job's: another job's file is not ours */
    uint64_t step;      /* the next step */
    uint64_t layout;    /* digest of the layers and state buffers */
    uint64_t body;      /* bytes after the header */
    uint64_t sum;       /* dd_elastic_sum of the body */
} dd_elastic_header_t;

/* What dd_elastic_file_check found. */
typedef enum {
    DD_ELASTIC_FILE_VALID,   /* a whole commit of this job and model */
    DD_ELASTIC_FILE_OTHER,   /* no commit of this model (empty, other layout) */
    DD_ELASTIC_FILE_DAMAGED, /* short, or its body fails the checksum */
    DD_ELASTIC_FILE_REFUSED  /* a link, not a file, or another user's */
} dd_elastic_file_t;

/** The checksum of a commit's body, continued from h over n bytes. */
uint64_t dd_elastic_sum(uint64_t h, const void *data, size_t n);

/** The checksum's starting value. */
#define DD_ELASTIC_SUM_INIT 0xcbf29ce484222325ull

/** The directory is this user's and no one else may write in it; made
 *  (mode 0700) when absent. DD_ERR_INVALID_CONFIG naming it otherwise. */
dd_status_t dd_elastic_dir_check(const char *dir);

/** The name part that tells this job's slots from another's, from its
 *  token tag: 16 hex digits. */
void dd_elastic_job_name(uint64_t token_tag, char out[17]);

/** Makes a new file of size bytes at path, mapped into *map_p: created
 *  under a temporary name (O_EXCL, O_NOFOLLOW) and renamed into place,
 *  refused when what is at path now is a link, not a file, or another
 *  user's. */
dd_status_t dd_elastic_file_make(const char *path, size_t size, void **map_p);

/** Checks the slot at path: its owner, that it is a file, its header
 *  (this job's tag, this layout and body size) and its body's checksum;
 *  the header in *h when valid, the reason in why otherwise. */
dd_elastic_file_t dd_elastic_file_check(const char *path, uint64_t token_tag,
                                        uint64_t layout, uint64_t body,
                                        dd_elastic_header_t *h, char *why,
                                        size_t why_size);

#endif
