/*
 * test_cuda_rt.c - what the GPU path costs, and says, where no device
 * buffers are used (src/device/cuda_rt.c, src/core/dev_stream.c). Runs in
 * every build, with or without a GPU.
 *
 *   cost       deciding that a call's buffers are host memory takes well
 *              under a microsecond while the CUDA driver is not loaded
 *              (the figure is printed), and host collectives never load it
 *              or initialise CUDA;
 *   no GPU     where CUDA cannot run, a CUDA stream (any pointer that is not
 *              a ccl host stream) is refused with CCL_ERR_UNSUPPORTED and
 *              "device buffer passed but no CUDA driver/GPU: <why>", before
 *              anything is sent, and the communicator keeps working;
 *   build      dev_cuda_built() matches the build, and a host-only build
 *              refuses the CUDA helpers with CCL_ERR_UNSUPPORTED.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <link.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"
#include "core/coll_run.h"
#include "core/dev_stream.h"
#include "device/cuda_rt.h"

#define CALLS 1000000
/* Generous: the check is ~15 ns on the development VM; a loaded CI
 * machine may be ten times slower, not a hundred. */
#define MAX_NS_PER_CALL 1000.0

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int find_libcuda(struct dl_phdr_info *info, size_t size, void *arg)
{
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    if (strncmp(base, "libcuda.so", 10) == 0)
        *(int *)arg = 1;
    return 0;
}

static int libcuda_mapped(void)
{
    int found = 0;
    dl_iterate_phdr(find_libcuda, &found);
    return found;
}

static void test_host_pointer_cost(void **state)
{
    (void)state;
    if (libcuda_mapped())
        skip(); /* someone loaded the driver: the cheap answer does not apply */
    ccl_comm_t comm;
    static float send[64], recv[64];
    assert_int_equal(ccl_comm_init_all(&comm, 1, NULL), CCL_SUCCESS);

    double t0 = now_ns();
    int loaded = 0;
    for (int i = 0; i < CALLS; i++)
        loaded |= dev_cuda_loaded();
    double gate_ns = (now_ns() - t0) / CALLS;
    assert_int_equal(loaded, 0);

    coll_args_t a = {.coll = SCHED_ALLREDUCE, .sendbuf = send, .recvbuf = recv, .count = 64,
                     .dtype = CCL_FLOAT32, .op = CCL_SUM, .kop = CCL_SUM, .comm = comm};
    coll_args_size(&a);
    t0 = now_ns();
    for (int i = 0; i < CALLS; i++)
        assert_int_equal(dstream_classify(&a, NULL, "test"), CCL_SUCCESS);
    double classify_ns = (now_ns() - t0) / CALLS;
    assert_int_equal(a.dev_send | a.dev_recv | a.dev_premul, 0);
    printf("host buffers: driver-loaded check %.1f ns, whole classification %.1f ns per call\n", gate_ns,
           classify_ns);
    assert_true(gate_ns < MAX_NS_PER_CALL);
    assert_true(classify_ns < MAX_NS_PER_CALL);

    /* Host collectives, blocking and on a host stream: still no driver. */
    ccl_stream_t s;
    assert_int_equal(ccl_allreduce(send, recv, 64, CCL_FLOAT32, CCL_SUM, comm, NULL), CCL_SUCCESS);
    assert_int_equal(ccl_stream_create(&s), CCL_SUCCESS);
    assert_int_equal(ccl_allreduce(send, recv, 64, CCL_FLOAT32, CCL_SUM, comm, s), CCL_SUCCESS);
    assert_int_equal(ccl_stream_destroy(s), CCL_SUCCESS);
    assert_false(libcuda_mapped());
    assert_int_equal(ccl_comm_destroy(comm), CCL_SUCCESS);
}

static void test_no_gpu_error(void **state)
{
    (void)state;
    const char *why = NULL;
    if (dev_cuda_usable(&why))
        skip(); /* a GPU is here: tests/gpu covers CUDA streams */
    assert_non_null(why);
    ccl_comm_t comm;
    static float buf[16];
    static int not_a_stream;
    assert_int_equal(ccl_comm_init_all(&comm, 1, NULL), CCL_SUCCESS);
    ccl_result_t rc = ccl_allreduce(buf, buf, 16, CCL_FLOAT32, CCL_SUM, comm, (ccl_stream_t)&not_a_stream);
    assert_int_equal(rc, CCL_ERR_UNSUPPORTED);
    const char *msg = ccl_get_last_error(comm);
    printf("refusal: %s\n", msg);
    assert_non_null(strstr(msg, "ccl_allreduce: device buffer passed but no CUDA driver/GPU: "));
    assert_non_null(strstr(msg, why));
    /* Refused before anything was sent: the comm still works. */
    for (int i = 0; i < 16; i++)
        buf[i] = (float)i;
    assert_int_equal(ccl_allreduce(buf, buf, 16, CCL_FLOAT32, CCL_SUM, comm, NULL), CCL_SUCCESS);
    assert_true(buf[7] == 7.0f);
    /* Inside a group: refused at the call and again at the end. */
    assert_int_equal(ccl_group_start(), CCL_SUCCESS);
    assert_int_equal(ccl_broadcast(buf, buf, 16, CCL_FLOAT32, 0, comm, (ccl_stream_t)&not_a_stream),
                     CCL_ERR_UNSUPPORTED);
    assert_int_equal(ccl_group_end(), CCL_ERR_UNSUPPORTED);
    assert_int_equal(ccl_comm_destroy(comm), CCL_SUCCESS);
}

static void test_build(void **state)
{
    (void)state;
    void *p = NULL;
#ifdef CCL_HAVE_CUDA
    assert_int_equal(dev_cuda_built(), 1);
#else
    const char *why = NULL;
    assert_int_equal(dev_cuda_built(), 0);
    assert_int_equal(dev_cuda_usable(&why), 0);
    assert_non_null(strstr(why, "no CUDA support"));
    assert_int_equal(dev_host_alloc(&p, 64), CCL_ERR_UNSUPPORTED);
    assert_null(p);
    assert_int_equal(dev_copy_sync(&p, &p, sizeof p), CCL_ERR_UNSUPPORTED);
#endif
    /* No build calls a host pointer device memory without a driver. */
    static char host[8];
    if (!libcuda_mapped())
        assert_int_equal(dev_ptr_is_device(host), 0);
    (void)p;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_pointer_cost),
        cmocka_unit_test(test_no_gpu_error),
        cmocka_unit_test(test_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
