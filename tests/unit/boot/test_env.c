/* Rank and world detection for each launcher convention, with partial and
 * contradictory settings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../fake_env.h"
#include "boot/env.h"
#include "boot/pmix.h"
#include "core/log.h"

#include <string.h>

/* Loads the boot table and detects from the fake environment. */
static dd_status_t detect(const char **vars, dd_boot_env_t *env)
{
    dd_boot_opts_t opts;
    dd_status_t status =
        dd_config_load(&dd_boot_config_table, &opts, fake_getenv, vars);
    if (status != DD_OK) {
        return status;
    }
    status = dd_boot_env_detect(&opts, fake_getenv, vars, env);
    dd_config_release(&dd_boot_config_table, &opts);
    return status;
}

static void expect(const char **vars, int rank, int world, int lrank, int lsize,
                   const char *source)
{
    dd_boot_env_t env;
    assert_int_equal(detect(vars, &env), DD_OK);
    assert_int_equal(env.rank, rank);
    assert_int_equal(env.world_size, world);
    assert_int_equal(env.local_rank, lrank);
    assert_int_equal(env.local_size, lsize);
    assert_string_equal(env.source, source);
}

static void expect_error(const char **vars, const char *needle1,
                         const char *needle2)
{
    dd_boot_env_t env;
    assert_int_equal(detect(vars, &env), DD_ERR_INVALID_CONFIG);
    assert_non_null(strstr(dd_last_error(), needle1));
    if (needle2 != NULL) {
        assert_non_null(strstr(dd_last_error(), needle2));
    }
}

static void test_nothing_is_one_rank(void **state)
{
    const char *vars[] = {NULL};
    expect(vars, 0, 1, 0, 1, "none");
}

static void test_dd(void **state)
{
    const char *vars[] = {"DREAMDDP_RANK=2",
                          "DREAMDDP_WORLD_SIZE=4",
                          "DREAMDDP_LOCAL_RANK=0",
                          "DREAMDDP_MASTER_ADDR=10.1.2.3",
                          "DREAMDDP_MASTER_PORT=1234",
                          "SLURM_PROCID=0",
                          "SLURM_NTASKS=1",
                          NULL};
    dd_boot_env_t env;
    expect(vars, 2, 4, 0, -1, "DD");
    assert_int_equal(detect(vars, &env), DD_OK);
    assert_string_equal(env.master_addr, "10.1.2.3");
    assert_int_equal(env.master_port, 1234);
}

static void test_torchrun(void **state)
{
    const char *vars[] = {"RANK=5",
                          "WORLD_SIZE=8",
                          "LOCAL_RANK=1",
                          "LOCAL_WORLD_SIZE=4",
                          "MASTER_ADDR=h0",
                          "MASTER_PORT=29400",
                          "TORCHELASTIC_RUN_ID=abc",
                          NULL};
    dd_boot_env_t env;
    expect(vars, 5, 8, 1, 4, "torchrun");
    assert_int_equal(detect(vars, &env), DD_OK);
    assert_string_equal(env.master_addr, "h0");
    /* torch.distributed holds MASTER_PORT; the store takes the next. */
    assert_int_equal(env.master_port, 29401);
    assert_string_equal(env.job_id, "TORCHELASTIC_RUN_ID=abc");
}

static void test_ompi(void **state)
{
    const char *vars[] = {"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=6",
                          "OMPI_COMM_WORLD_LOCAL_RANK=0",
                          "OMPI_COMM_WORLD_LOCAL_SIZE=3", NULL};
    expect(vars, 3, 6, 0, 3, "Open MPI");
}

/* mpirun's per-job key is kept as the job's secret, whatever the rank
 * variables came from; a launcher without one leaves it empty. */
static void test_job_secret(void **state)
{
    dd_boot_env_t env;
    const char *ompi[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1",
                          "OMPI_MCA_orte_precondition_transports="
                          "0552cea94aaa875b-057af7c4c2ccb84e",
                          NULL};
    assert_int_equal(detect(ompi, &env), DD_OK);
    assert_string_equal(env.job_secret, "OMPI_MCA_orte_precondition_transports="
                                        "0552cea94aaa875b-057af7c4c2ccb84e");
    const char *dd[] = {"DREAMDDP_RANK=0", "DREAMDDP_WORLD_SIZE=1",
                        "OMPI_MCA_opal_precondition_transports="
                        "00112233445566778899",
                        NULL};
    assert_int_equal(detect(dd, &env), DD_OK);
    assert_non_null(strstr(env.job_secret, "=00112233445566778899"));
    const char *slurm[] = {"SLURM_PROCID=0", "SLURM_NTASKS=1",
                           "SLURM_JOB_ID=77", NULL};
    assert_int_equal(detect(slurm, &env), DD_OK);
    assert_string_equal(env.job_secret, "");
    /* A short value is no secret worth the name. */
    const char *weak[] = {"OMPI_MCA_orte_precondition_transports=1", NULL};
    assert_int_equal(detect(weak, &env), DD_OK);
    assert_string_equal(env.job_secret, "");
}

static void test_slurm(void **state)
{
    const char *vars[] = {"SLURM_PROCID=7", "SLURM_NTASKS=16",
                          "SLURM_LOCALID=3", "SLURM_JOB_ID=991", NULL};
    dd_boot_env_t env;
    /* Slurm gives no local size: both are derived from host names. */
    expect(vars, 7, 16, -1, -1, "Slurm");
    assert_int_equal(detect(vars, &env), DD_OK);
    assert_string_equal(env.job_id, "SLURM_JOB_ID=991");
}

static void test_pmi(void **state)
{
    const char *vars[] = {"PMI_RANK=1", "PMI_SIZE=2", NULL};
    expect(vars, 1, 2, -1, -1, "PMI");
}

static void expect_master(const char **vars, const char *addr, const char *from)
{
    dd_boot_env_t env;
    assert_int_equal(detect(vars, &env), DD_OK);
    assert_string_equal(env.master_addr, addr);
    assert_non_null(strstr(env.master_from, from));
}

static void test_slurm_master_is_first_step_host(void **state)
{
    const char *vars[] = {"SLURM_PROCID=2",
                          "SLURM_NTASKS=3",
                          "SLURM_JOB_ID=4242",
                          "SLURM_STEP_ID=0",
                          "SLURM_STEP_NODELIST=node[01-03]",
                          "SLURM_JOB_NODELIST=node[00-07]",
                          NULL};
    dd_boot_env_t env;
    expect_master(vars, "node01", "SLURM_STEP_NODELIST");
    assert_int_equal(detect(vars, &env), DD_OK);
    assert_false(env.master_check_local);
    /* A port from the job id and step: in range, the same on every rank. */
    assert_in_range(env.master_port, 29500, 30499);
    const char *rank0[] = {"SLURM_PROCID=0",
                           "SLURM_NTASKS=3",
                           "SLURM_JOB_ID=4242",
                           "SLURM_STEP_ID=0",
                           "SLURM_STEP_NODELIST=node[01-03]",
                           NULL};
    dd_boot_env_t env0;
    assert_int_equal(detect(rank0, &env0), DD_OK);
    assert_int_equal(env0.master_port, env.master_port);
    const char *step1[] = {"SLURM_PROCID=0",
                           "SLURM_NTASKS=3",
                           "SLURM_JOB_ID=4242",
                           "SLURM_STEP_ID=1",
                           "SLURM_STEP_NODELIST=node[01-03]",
                           NULL};
    dd_boot_env_t env1;
    assert_int_equal(detect(step1, &env1), DD_OK);
    assert_int_not_equal(env1.master_port, env.master_port);
}

static void test_slurm_master_from_job_list(void **state)
{
    const char *a[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4",
                       "SLURM_JOB_NODELIST=gpu7,cpu[2-4,9]", NULL};
    expect_master(a, "gpu7", "SLURM_JOB_NODELIST");
    const char *b[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4",
                       "SLURM_JOB_NODELIST=rack[3-4]-n[08-10]", NULL};
    expect_master(b, "rack3-n08", "SLURM_JOB_NODELIST");
}

static void test_slurm_master_variables_win(void **state)
{
    const char *a[] = {"SLURM_PROCID=0",
                       "SLURM_NTASKS=2",
                       "SLURM_STEP_NODELIST=node[01-02]",
                       "MASTER_ADDR=head",
                       "MASTER_PORT=1234",
                       NULL};
    dd_boot_env_t env;
    expect_master(a, "head", "MASTER_ADDR");
    assert_int_equal(detect(a, &env), DD_OK);
    /* The port after torch.distributed's MASTER_PORT. */
    assert_int_equal(env.master_port, 1235);
    const char *b[] = {"SLURM_PROCID=0",
                       "SLURM_NTASKS=2",
                       "SLURM_STEP_NODELIST=node[01-02]",
                       "MASTER_ADDR=head",
                       "DREAMDDP_MASTER_ADDR=10.0.0.9",
                       "DREAMDDP_MASTER_PORT=999",
                       NULL};
    expect_master(b, "10.0.0.9", "DREAMDDP_MASTER_ADDR");
    assert_int_equal(detect(b, &env), DD_OK);
    assert_int_equal(env.master_port, 999);
}

static void test_slurm_bad_or_missing_list(void **state)
{
    const char *a[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2",
                       "SLURM_STEP_NODELIST=node[02-01]", NULL};
    expect_error(a, "SLURM_STEP_NODELIST='node[02-01]'", "Slurm host list");
    const char *b[] = {"SLURM_PROCID=1", "SLURM_NTASKS=2", NULL};
    dd_boot_env_t env;
    assert_int_equal(detect(b, &env), DD_OK);
    assert_string_equal(env.master_addr, "");
    assert_non_null(strstr(env.master_hint, "SLURM_STEP_NODELIST"));
}

static void test_ompi_one_host_is_loopback(void **state)
{
    const char *a[] = {"OMPI_COMM_WORLD_RANK=1",
                       "OMPI_COMM_WORLD_SIZE=3",
                       "OMPI_COMM_WORLD_LOCAL_RANK=1",
                       "OMPI_COMM_WORLD_LOCAL_SIZE=3",
                       "OMPI_MCA_ess_base_jobid=1994981377",
                       "OMPI_MCA_orte_hnp_uri=1994981376.0;tcp://"
                       "192.0.2.2:50785",
                       NULL};
    dd_boot_env_t env;
    expect_master(a, "127.0.0.1", "every rank on one host (Open MPI)");
    assert_int_equal(detect(a, &env), DD_OK);
    assert_false(env.master_check_local);
    assert_in_range(env.master_port, 29500, 30499);
    /* Open MPI counting one node says the same without the local size. */
    const char *b[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3",
                       "OMPI_MCA_orte_num_nodes=1", NULL};
    expect_master(b, "127.0.0.1", "one host");
}

static void test_ompi_hosts_use_mpirun_host(void **state)
{
    /* Open MPI 4.1's contact URI: job, then every transport's addresses. */
    const char *a[] = {"OMPI_COMM_WORLD_RANK=4",
                       "OMPI_COMM_WORLD_SIZE=6",
                       "OMPI_COMM_WORLD_LOCAL_RANK=1",
                       "OMPI_COMM_WORLD_LOCAL_SIZE=3",
                       "OMPI_MCA_orte_num_nodes=2",
                       "OMPI_MCA_orte_hnp_uri=3590651904.0;tcp://"
                       "198.18.0.1,10.0.0.2:41095;tcp6://[fd00::1]:43777",
                       NULL};
    dd_boot_env_t env;
    expect_master(a, "198.18.0.1", "OMPI_MCA_orte_hnp_uri");
    assert_int_equal(detect(a, &env), DD_OK);
    assert_true(env.master_check_local);
    /* Loopback is skipped for the next address. */
    const char *b[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
                       "OMPI_COMM_WORLD_LOCAL_SIZE=1",
                       "OMPI_MCA_orte_hnp_uri=1.0;tcp://127.0.0.1,10.1.1.1:9",
                       NULL};
    expect_master(b, "10.1.1.1", "mpirun's host");
}

static void test_ompi_hosts_without_uri(void **state)
{
    const char *a[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
                       "OMPI_COMM_WORLD_LOCAL_SIZE=1",
                       "OMPI_MCA_orte_hnp_uri=1.0;tcp6://[fd00::1]:4", NULL};
    dd_boot_env_t env;
    assert_int_equal(detect(a, &env), DD_OK);
    assert_string_equal(env.master_addr, "");
    assert_int_equal(env.master_port, -1);
    assert_non_null(strstr(env.master_hint, "mpirun -x DREAMDDP_MASTER_ADDR"));
}

/* What Open MPI 4.1's mpirun sets for its PMIx server, on several hosts. */
#define PMIX_OMPI_VARS(rank)                                                   \
    "OMPI_COMM_WORLD_RANK=" rank, "OMPI_COMM_WORLD_SIZE=6",                    \
        "OMPI_COMM_WORLD_LOCAL_SIZE=3", "OMPI_MCA_orte_num_nodes=2",           \
        "OMPI_MCA_orte_hnp_uri=3590651904.0;tcp://198.18.0.1:41095",           \
        "PMIX_NAMESPACE=3590651905", "PMIX_RANK=" rank,                        \
        "PMIX_SERVER_URI4=3590651904.0;tcp4://127.0.0.1:54451"

/* Under a PMIx server rank 0 publishes its store, where the library is
 * built with PMIx; without, the other conventions still find it, and the
 * hint says what PMIx would have done. */
static void test_pmix_server_publishes(void **state)
{
    const char *a[] = {PMIX_OMPI_VARS("4"), NULL};
    dd_boot_env_t env;

    assert_int_equal(detect(a, &env), DD_OK);
    if (dd_boot_pmix_built()) {
        assert_true(env.master_pmix);
        assert_string_equal(env.master_addr, "");
        assert_string_equal(env.master_from, "rank 0 through PMIx");
        assert_int_equal(env.master_port, -1); /* rank 0's store picks it */
    } else {
        assert_false(env.master_pmix);
        assert_string_equal(env.master_addr, "198.18.0.1");
    }
    /* Every rank on one host: PMIx all the same, for the port it gives. */
    const char *b[] = {"OMPI_COMM_WORLD_RANK=1",
                       "OMPI_COMM_WORLD_SIZE=3",
                       "OMPI_COMM_WORLD_LOCAL_SIZE=3",
                       "PMIX_NAMESPACE=77",
                       "PMIX_RANK=1",
                       "PMIX_SERVER_URI41=77.0;tcp4://127.0.0.1:1",
                       NULL};
    assert_int_equal(detect(b, &env), DD_OK);
    assert_int_equal(env.master_pmix, dd_boot_pmix_built());
    /* An address given by hand wins. */
    const char *c[] = {PMIX_OMPI_VARS("4"), "MASTER_ADDR=head", NULL};
    expect_master(c, "head", "MASTER_ADDR");
    assert_int_equal(detect(c, &env), DD_OK);
    assert_false(env.master_pmix);
}

/* A namespace without a server URI is no PMIx server; a PMIx rank that is
 * not this rank is not used, and the hint says why. */
static void test_pmix_not_usable(void **state)
{
    const char *a[] = {"OMPI_COMM_WORLD_RANK=1",
                       "OMPI_COMM_WORLD_SIZE=3",
                       "OMPI_COMM_WORLD_LOCAL_RANK=1",
                       "OMPI_COMM_WORLD_LOCAL_SIZE=3",
                       "PMIX_NAMESPACE=77",
                       "PMIX_RANK=1",
                       NULL};
    dd_boot_env_t env;
    assert_int_equal(detect(a, &env), DD_OK);
    assert_false(env.master_pmix);
    assert_string_equal(env.master_addr, "127.0.0.1");

    const char *b[] = {"DREAMDDP_RANK=1",
                       "DREAMDDP_WORLD_SIZE=3",
                       "PMIX_NAMESPACE=77",
                       "PMIX_RANK=2",
                       "PMIX_SERVER_URI4=77.0;tcp4://127.0.0.1:1",
                       NULL};
    assert_int_equal(detect(b, &env), DD_OK);
    assert_false(env.master_pmix);
    assert_string_equal(env.master_addr, "");
    assert_non_null(strstr(env.master_hint, "PMIX_RANK=2 is not rank 1"));

    /* Built without PMIx under a PMIx server with nothing else to go by:
     * the hint names what is missing. */
    const char *c[] = {"DREAMDDP_RANK=1",
                       "DREAMDDP_WORLD_SIZE=3",
                       "PMIX_NAMESPACE=77",
                       "PMIX_RANK=1",
                       "PMIX_SERVER_URI2=77.0;tcp4://127.0.0.1:1",
                       NULL};
    assert_int_equal(detect(c, &env), DD_OK);
    if (dd_boot_pmix_built()) {
        assert_true(env.master_pmix);
        assert_string_equal(env.job_id, "PMIX_NAMESPACE=77");
    } else {
        assert_non_null(strstr(env.master_hint, "built without PMIx"));
    }
}

static void test_pmi_one_host(void **state)
{
    const char *a[] = {"PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1",
                       "MPI_LOCALNRANKS=2", NULL};
    expect_master(a, "127.0.0.1", "one host");
    /* Without the local size nothing tells where rank 0 is. */
    const char *b[] = {"PMI_RANK=1", "PMI_SIZE=2", NULL};
    dd_boot_env_t env;
    assert_int_equal(detect(b, &env), DD_OK);
    assert_string_equal(env.master_addr, "");
}

static void test_torchrun_wins_over_slurm(void **state)
{
    const char *vars[] = {"RANK=3", "WORLD_SIZE=4", "SLURM_PROCID=0",
                          "SLURM_NTASKS=1", NULL};
    expect(vars, 3, 4, -1, -1, "torchrun");
}

static void test_partial(void **state)
{
    const char *a[] = {"DREAMDDP_RANK=1", NULL};
    expect_error(a, "DREAMDDP_RANK=1 is set but DREAMDDP_WORLD_SIZE is not",
                 NULL);
    const char *b[] = {"WORLD_SIZE=4", NULL};
    expect_error(b, "WORLD_SIZE=4 is set but RANK is not", NULL);
    const char *c[] = {"OMPI_COMM_WORLD_RANK=0", NULL};
    expect_error(c, "OMPI_COMM_WORLD_SIZE is not", NULL);
}

static void test_contradictions(void **state)
{
    const char *a[] = {"DREAMDDP_RANK=4", "DREAMDDP_WORLD_SIZE=4", NULL};
    expect_error(a, "DREAMDDP_RANK=4 and DREAMDDP_WORLD_SIZE=4 disagree", NULL);
    const char *b[] = {"DREAMDDP_RANK=1", "DREAMDDP_WORLD_SIZE=4", "RANK=2",
                       "WORLD_SIZE=4", NULL};
    expect_error(b, "DREAMDDP_RANK=1 and RANK=2 disagree", NULL);
    const char *c[] = {"DREAMDDP_RANK=1", "DREAMDDP_WORLD_SIZE=4",
                       "WORLD_SIZE=8", NULL};
    expect_error(c, "DREAMDDP_WORLD_SIZE=4 and WORLD_SIZE=8 disagree", NULL);
    const char *d[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=3",
                       "LOCAL_WORLD_SIZE=2", NULL};
    expect_error(d, "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=2");
    const char *e[] = {"SLURM_PROCID=x", "SLURM_NTASKS=2", NULL};
    expect_error(e, "SLURM_PROCID='x'", NULL);
    const char *f[] = {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=70000", NULL};
    expect_error(f, "MASTER_PORT=70000", NULL);
    const char *g[] = {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=65535", NULL};
    expect_error(g, "MASTER_PORT=65535", "the next one");
}

static void test_dd_values_validated(void **state)
{
    const char *a[] = {"DREAMDDP_RANK=-1", "DREAMDDP_WORLD_SIZE=2", NULL};
    expect_error(a, "DREAMDDP_RANK='-1'", "expected an integer from 0");
    const char *b[] = {"DREAMDDP_MASTER_PORT=0", NULL};
    expect_error(b, "DREAMDDP_MASTER_PORT='0'", "from 1 to 65535");
}

static void test_guess_rank(void **state)
{
    const char *a[] = {"SLURM_PROCID=9", "RANK=bad", NULL};
    assert_int_equal(dd_boot_env_guess_rank(fake_getenv, a), 9);
    const char *b[] = {NULL};
    assert_int_equal(dd_boot_env_guess_rank(fake_getenv, b), -1);
}

static int setup(void **state)
{
    return dd_log_configure(DD_LOG_ERROR, ~0u, "/dev/null", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_is_one_rank),
        cmocka_unit_test(test_dd),
        cmocka_unit_test(test_torchrun),
        cmocka_unit_test(test_ompi),
        cmocka_unit_test(test_job_secret),
        cmocka_unit_test(test_slurm),
        cmocka_unit_test(test_pmi),
        cmocka_unit_test(test_slurm_master_is_first_step_host),
        cmocka_unit_test(test_slurm_master_from_job_list),
        cmocka_unit_test(test_slurm_master_variables_win),
        cmocka_unit_test(test_slurm_bad_or_missing_list),
        cmocka_unit_test(test_ompi_one_host_is_loopback),
        cmocka_unit_test(test_ompi_hosts_use_mpirun_host),
        cmocka_unit_test(test_ompi_hosts_without_uri),
        cmocka_unit_test(test_pmi_one_host),
        cmocka_unit_test(test_torchrun_wins_over_slurm),
        cmocka_unit_test(test_partial),
        cmocka_unit_test(test_contradictions),
        cmocka_unit_test(test_dd_values_validated),
        cmocka_unit_test(test_guess_rank),
        cmocka_unit_test(test_pmix_server_publishes),
        cmocka_unit_test(test_pmix_not_usable),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
