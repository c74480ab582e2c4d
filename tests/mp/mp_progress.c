/*
 * A rank that reports progress and then keeps running: it prints a line
 * after dd_init, sleeps, and prints another before it exits, with no
 * fflush of its own, as a training loop's progress lines are printed.
 * tests/mp/test_progress_mp.sh watches ddrun's output while it sleeps.
 */
#include <dreamddp.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    unsigned sleep_s = argc > 1 ? (unsigned)atoi(argv[1]) : 4;
    dd_context_h ctx;

    if (dd_init(NULL, &ctx) != DD_OK) {
        fprintf(stderr, "mp_progress: dd_init: %s\n", dd_last_error());
        return 1;
    }
    printf("progress: rank %d started\n", dd_rank(ctx));
    sleep(sleep_s);
    printf("progress: rank %d done\n", dd_rank(ctx));
    return dd_finalize(ctx) == DD_OK ? 0 : 1;
}
