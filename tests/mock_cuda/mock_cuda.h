/*
 * mock_cuda.h - internals shared by the files of the mock CUDA runtime
 * (tests/mock_cuda/mock_*.c): a stand-in for libcudart with host memory as
 * device memory and a host thread per stream, so that ccl's CUDA path runs
 * and is tested on machines without a GPU (docs/gpu.md, "The mock GPU").
 *
 * The public side is CUDA's own: the files include cuda_runtime_api.h and
 * define its functions under their real names and types, so libccl, the
 * GPU tests and ccl-perf compile exactly as against CUDA and only the link
 * differs. Internal symbols are mock_* and hidden in libccl.so like the
 * rest of the library.
 *
 * Memory: every allocation the runtime knows is a region in one table
 * (device memory, pinned host memory, registered host memory, IPC
 * mappings of another process's device memory). Streams: a worker thread
 * each runs queued operations in order; a finished operation advances the
 * stream's `done` counter, a futex word that waiters sleep on. Events are
 * a pair of counters (recorded, completed), in shared memory when the
 * event is interprocess, so the same waits work across processes.
 */
#ifndef CCL_MOCK_CUDA_H
#define CCL_MOCK_CUDA_H

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MOCK_MAX_DEVICES 64

/* ---- runtime (mock_runtime.c) --------------------------------------------- */

/* Initialises the runtime on first use (reads MOCKCUDA_DEVICES, loads the
 * stand-in libcuda.so.1). cudaSuccess, or why CUDA cannot be used in this
 * process: no driver, no device, or this is a child forked after the
 * parent initialised (CUDA does not survive fork). */
cudaError_t mock_init(void);
/* Records e as the calling thread's last error (unless it is cudaSuccess
 * or cudaErrorNotReady, which CUDA does not count as errors); returns e. */
cudaError_t mock_err(cudaError_t e);
int mock_ndevices(void);
int mock_current_device(void);
/* A diagnostic on stderr, prefixed "mockcuda: ", for misuse that real
 * CUDA reports only with an error code: the code says what, this says
 * where. */
void mock_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Every API function starts with this: initialise, or fail as CUDA does. */
#define MOCK_ENTER()                                                                             \
    do {                                                                                         \
        cudaError_t init_ = mock_init();                                                         \
        if (init_ != cudaSuccess)                                                                \
            return mock_err(init_);                                                              \
    } while (0)

/* ---- memory (mock_mem.c) --------------------------------------------------- */

typedef enum {
    MOCK_MEM_DEVICE,     /* cudaMalloc: a memfd mapping, exportable through IPC */
    MOCK_MEM_HOST,       /* cudaMallocHost / cudaHostAlloc: pinned host memory */
    MOCK_MEM_REGISTERED, /* cudaHostRegister: the caller's host memory */
    MOCK_MEM_IPC,        /* cudaIpcOpenMemHandle: another process's device memory */
} mock_kind_t;

typedef struct {
    char *base;
    size_t size;
    mock_kind_t kind;
    int device;      /* DEVICE, IPC: the device it lives on */
    int fd;          /* DEVICE: the memfd (kept open for IPC exports); else -1 */
    ino_t ino;       /* DEVICE, IPC: the memfd's inode, the allocation's identity */
    pid_t owner;     /* IPC: the exporting process */
    unsigned flags;  /* HOST, REGISTERED: the caller's flags */
    int refs;        /* IPC: opens of the same allocation */
} mock_region_t;

/* The region holding p (copied into *out); 0 when p is in none. */
int mock_mem_find(const void *p, mock_region_t *out);
/* Adds a region; cudaErrorMemoryAllocation when the table cannot grow. */
cudaError_t mock_mem_add(const mock_region_t *r);
/* Removes the region starting at base of one of the kinds in kinds_mask
 * (1 << kind), copying it to *out; 0 when there is none. */
int mock_mem_remove(const void *base, unsigned kinds_mask, mock_region_t *out);
/* IPC: the region already opened for (owner, ino), its refs raised. */
int mock_mem_ipc_ref(pid_t owner, ino_t ino, mock_region_t *out);
/* IPC: lowers the refs of the opened region at base; 1 (and *out) when
 * that was the last reference and the region left the table. -1 when base
 * is no IPC mapping. */
int mock_mem_ipc_unref(const void *base, mock_region_t *out);

/* What a range of memory is to the GPU: device memory (its own or a
 * peer's through IPC), host memory the GPU can reach (pinned or
 * registered), or plain pageable host memory that it cannot. */
typedef enum { MOCK_AT_PAGEABLE, MOCK_AT_PINNED, MOCK_AT_DEVICE } mock_at_t;
/* Classifies [p, p + n); cudaErrorInvalidValue when the range starts in a
 * known region and runs past its end (a real overrun). */
cudaError_t mock_mem_classify(const void *p, size_t n, mock_at_t *at);

/* ---- waiting (mock_wait.c) -------------------------------------------------- */

/* The conditions of cuStreamWaitValue32, also used for the runtime's own
 * counters (GEQ, on serial numbers so wrap-around is harmless). */
int mock_cond_met(uint32_t cur, uint32_t value, unsigned mode);
/* Blocks until *word meets (value, mode). Woken at once by mock_wake on the
 * word (in any process when the word is in shared memory), otherwise it
 * polls, as a GPU polling host memory would. */
void mock_wait(const volatile uint32_t *word, uint32_t value, unsigned mode);
void mock_wake(volatile uint32_t *word);
double mock_now(void); /* seconds, CLOCK_MONOTONIC */

/* ---- streams (mock_stream.c) ----------------------------------------------- */

typedef enum {
    MOCK_OP_COPY,  /* memmove(dst, src, n) */
    MOCK_OP_SET,   /* memset(dst, value, n) */
    MOCK_OP_HOST,  /* fn(arg): cudaLaunchHostFunc, and the mock kernels */
    MOCK_OP_WAIT,  /* until *word meets (value, mode); holds event when set */
    MOCK_OP_WRITE, /* *word = value, then wake its waiters */
    MOCK_OP_EVENT, /* the event's completion number reaches value */
} mock_op_kind_t;

struct mock_event;

typedef struct mock_op {
    struct mock_op *next;
    mock_op_kind_t kind;
    void *dst;
    const void *src;
    size_t n;
    int value;
    cudaHostFn_t fn;
    void *arg;
    volatile uint32_t *word;
    uint32_t u32;
    unsigned mode;
    struct mock_event *event;
    void *owned; /* freed after the operation ran (a staged copy's source) */
} mock_op_t;

typedef struct mock_stream mock_stream_t;

/* The stream a handle names: NULL and cudaStreamLegacy are the current
 * device's legacy default stream, cudaStreamPerThread the calling
 * thread's; anything else must be a live stream of cudaStreamCreate*.
 * cudaErrorInvalidResourceHandle otherwise. */
cudaError_t mock_stream_get(cudaStream_t handle, mock_stream_t **out);
/* Queues op (allocated by the caller, freed by the worker) on s, after
 * what the legacy-stream rules make it wait for; *ticket (may be NULL)
 * is the operation's number, reached by mock_stream_wait_ticket. */
void mock_stream_push(mock_stream_t *s, mock_op_t *op, uint32_t *ticket);
/* Blocks until s has finished the operation numbered ticket. */
void mock_stream_wait_ticket(mock_stream_t *s, uint32_t ticket);
/* The device of s. */
int mock_stream_device(const mock_stream_t *s);
/* A new operation, zeroed, of this kind; NULL when out of memory. */
mock_op_t *mock_op_new(mock_op_kind_t kind);
/* Waits for every stream of device dev (all devices when dev < 0). */
void mock_device_sync(int dev);

/* ---- events (mock_event.c) -------------------------------------------------- */

/* Runs an EVENT operation: the event's work up to number u32 is done. */
void mock_event_complete(struct mock_event *ev, uint32_t number);
/* Drops the reference a queued operation held on the event. */
void mock_event_unref(struct mock_event *ev);

/* ---- IPC (mock_ipc.c) ------------------------------------------------------- */

/* What an IPC handle carries, in the first bytes of its 64: a memfd of
 * the exporting process (device memory, or an interprocess event's
 * counters) and the memfd's inode, the object's identity. */
typedef struct {
    uint32_t magic; /* which kind of handle, of this mock */
    int32_t pid;
    int32_t fd;
    int32_t device;
    uint64_t ino;
    uint64_t size;
} mock_wire_t;

/* Opens file descriptor fd of process pid (/proc/<pid>/fd/<fd>) when it
 * is still the file with inode ino; -1 when not (the exporter exited,
 * freed the memory, or may not be read by this process). */
int mock_ipc_open_fd(pid_t pid, int fd, ino_t ino);

/* ---- driver entry points (mock_driver.c) ------------------------------------ */

CUresult mock_cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags);
CUresult mock_cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags);
CUresult mock_cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr dptr);

#endif
