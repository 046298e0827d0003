/*
 * nccl_coll.c - NCCL's collectives and send/recv over ccl's.
 *
 * Each call is ccl's with the same arguments in the same order: NCCL's
 * datatype and operator numbers are ccl's, and a premulsum operator made by
 * ncclRedOpCreatePreMulSum is a ccl operator. The stream is passed as it
 * is: a NULL cudaStream_t makes the call blocking in ccl (the host-memory
 * case, which needs no GPU), and any other cudaStream_t is queued on that
 * CUDA stream by ccl, as with NCCL (docs/nccl.md).
 */
#include "nccl/nccl_types.h"

NCCL_FORWARD(ncclAllReduce, (const void *sendbuff, void *recvbuff, size_t count, ccl_datatype_t datatype,
                             ccl_redop_t op, ccl_comm_t comm, void *stream),
             ccl_allreduce(sendbuff, recvbuff, count, datatype, op, comm, stream), comm);

NCCL_FORWARD(ncclBroadcast, (const void *sendbuff, void *recvbuff, size_t count, ccl_datatype_t datatype,
                             int root, ccl_comm_t comm, void *stream),
             ccl_broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream), comm);

NCCL_FORWARD(ncclBcast, (void *buff, size_t count, ccl_datatype_t datatype, int root, ccl_comm_t comm,
                         void *stream),
             ccl_bcast(buff, count, datatype, root, comm, stream), comm);

NCCL_FORWARD(ncclReduce, (const void *sendbuff, void *recvbuff, size_t count, ccl_datatype_t datatype,
                          ccl_redop_t op, int root, ccl_comm_t comm, void *stream),
             ccl_reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream), comm);

NCCL_FORWARD(ncclAllGather, (const void *sendbuff, void *recvbuff, size_t sendcount, ccl_datatype_t datatype,
                             ccl_comm_t comm, void *stream),
             ccl_allgather(sendbuff, recvbuff, sendcount, datatype, comm, stream), comm);

NCCL_FORWARD(ncclReduceScatter, (const void *sendbuff, void *recvbuff, size_t recvcount,
                                 ccl_datatype_t datatype, ccl_redop_t op, ccl_comm_t comm, void *stream),
             ccl_reduce_scatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream), comm);

NCCL_FORWARD(ncclAlltoAll, (const void *sendbuff, void *recvbuff, size_t count, ccl_datatype_t datatype,
                            ccl_comm_t comm, void *stream),
             ccl_alltoall(sendbuff, recvbuff, count, datatype, comm, stream), comm);

NCCL_FORWARD(ncclGather, (const void *sendbuff, void *recvbuff, size_t count, ccl_datatype_t datatype,
                          int root, ccl_comm_t comm, void *stream),
             ccl_gather(sendbuff, recvbuff, count, datatype, root, comm, stream), comm);

NCCL_FORWARD(ncclScatter, (const void *sendbuff, void *recvbuff, size_t count, ccl_datatype_t datatype,
                           int root, ccl_comm_t comm, void *stream),
             ccl_scatter(sendbuff, recvbuff, count, datatype, root, comm, stream), comm);

NCCL_FORWARD(ncclSend, (const void *sendbuff, size_t count, ccl_datatype_t datatype, int peer,
                        ccl_comm_t comm, void *stream),
             ccl_send(sendbuff, count, datatype, peer, comm, stream), comm);

NCCL_FORWARD(ncclRecv, (void *recvbuff, size_t count, ccl_datatype_t datatype, int peer, ccl_comm_t comm,
                        void *stream),
             ccl_recv(recvbuff, count, datatype, peer, comm, stream), comm);

NCCL_FORWARD(ncclRedOpCreatePreMulSum, (ccl_redop_t *op, void *scalar, ccl_datatype_t datatype,
                                        ccl_scalar_residence_t residence, ccl_comm_t comm),
             ccl_redop_create_premulsum(op, scalar, datatype, residence, comm), comm);

NCCL_FORWARD(ncclRedOpDestroy, (ccl_redop_t op, ccl_comm_t comm),
             ccl_redop_destroy(op, comm), comm);
