/*
 * What ddrun knows of its ranks beyond their exit status: whether a rank
 * is stopped (frozen) rather than slow, and the library's settings that
 * bound how long a healthy rank may take to notice a lost peer and say
 * whether an aggregator's loss is survived. ddrun links nothing of the
 * library, so it reads those two variables here, the way the ranks will;
 * it must not read any other of the library's settings.
 */
#include "ddrun_common.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* DREAMDDP_TIMEOUT_S's default in the library's core table. */
#define DDRUN_LIB_TIMEOUT_S 300.0

/* The state letter and process group of /proc/PID/stat; -1 when gone. */
static int ddrun_proc_state(const char *pid, char *state_p, long *pgrp_p)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return -1;
    }
    buf[n] = '\0';
    /* The command name may hold blanks and parentheses: the fields go on
     * after the last ')'. */
    const char *rest = strrchr(buf, ')');
    if (rest == NULL || sscanf(rest + 1, " %c %*d %ld", state_p, pgrp_p) != 2) {
        return -1;
    }
    return 0;
}

int ddrun_group_stopped(pid_t pgid)
{
    DIR *d = opendir("/proc");
    struct dirent *ent;
    int stopped = 0;

    while (d != NULL && !stopped && (ent = readdir(d)) != NULL) {
        char state;
        long pgrp;
        if (!isdigit((unsigned char)ent->d_name[0]) ||
            ddrun_proc_state(ent->d_name, &state, &pgrp) != 0) {
            continue;
        }
        /* 'T' stopped by a signal, 't' stopped by a tracer. */
        stopped = pgrp == (long)pgid && (state == 'T' || state == 't');
    }
    if (d != NULL) {
        closedir(d);
    }
    return stopped;
}

/* The library's duration grammar ("30", "30s", "500ms", "2m"); a value it
 * would refuse gives the default, since every rank then fails at dd_init
 * naming the variable. */
static double ddrun_duration(const char *s, double fallback)
{
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"", 1.0},    {"s", 1.0},  {"sec", 1.0},  {"ms", 1e-3},
                 {"us", 1e-6}, {"m", 60.0}, {"min", 60.0}, {"h", 3600.0}};
    char *end;

    if (s == NULL || !isdigit((unsigned char)s[0])) {
        return fallback;
    }
    double v = strtod(s, &end);
    while (*end == ' ') {
        end++;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].unit) == 0 && v * units[i].scale >= 0 &&
            v * units[i].scale <= 86400.0) {
            return v * units[i].scale;
        }
    }
    return fallback;
}

void ddrun_read_lib_settings(ddrun_job_t *job)
{
    const char *loss = getenv("DREAMDDP_AGG_LOSS");

    job->rank_timeout_s =
        ddrun_duration(getenv("DREAMDDP_TIMEOUT_S"), DDRUN_LIB_TIMEOUT_S);
    /* Under DREAMDDP_AGG_LOSS=stop the library stops the job for a lost
     * aggregator, and so must ddrun; survive is the default. */
    job->agg_expendable = loss == NULL || strcasecmp(loss, "stop") != 0;
}
