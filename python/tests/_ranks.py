"""A pool of forked processes, one ccl rank each, that the tests drive.

The pool makes the unique id in the test process and forks its ranks, as
a multiprocessing user would; each rank joins one Communicator and then
runs the functions it is sent, fn(comm, *args), returning their results
through a pipe. Keeping the ranks between tests makes hundreds of cases
cost milliseconds each instead of a process start per case.

Nothing waits unbounded: a rank that does not answer within `timeout`
seconds fails the test and the pool is killed; ccl's own waits end at
CCL_TIMEOUT (conftest.py).
"""

import multiprocessing
import os
import time
import traceback

import ccl

# Fork (Linux): ranks inherit the imported modules (numpy, torch) and the
# test module's functions, so starting a pool costs no imports.
_ctx = multiprocessing.get_context("fork")


def _serve(conn, nranks, uid, rank):
    try:
        comm = ccl.Communicator(nranks, uid, rank)
    except BaseException:
        conn.send(("err", traceback.format_exc()))
        return
    conn.send(("ok", None))
    while True:
        msg = conn.recv()
        if msg is None:
            break
        fn, args = msg
        try:
            conn.send(("ok", fn(comm, *args)))
        except BaseException:
            conn.send(("err", traceback.format_exc()))
    if comm.handle:
        try:
            comm.finalize()
            comm.destroy()
        except ccl.CclError:
            comm.abort()  # a test left it broken; finalize said so quickly


class RankPool:
    """nranks forked processes with a Communicator each."""

    def __init__(self, nranks, timeout=60):
        self.nranks = nranks
        self.timeout = timeout
        uid = ccl.get_unique_id()
        self._conns, self._procs = [], []
        for rank in range(nranks):
            ours, theirs = _ctx.Pipe()
            proc = _ctx.Process(target=_serve, args=(theirs, nranks, uid, rank), daemon=True)
            proc.start()
            theirs.close()
            self._conns.append(ours)
            self._procs.append(proc)
        self._collect("Communicator")

    def run(self, fn, *args, ranks_args=None):
        """fn(comm, *args) on every rank (or fn(comm, *ranks_args[rank]));
        the list of the ranks' results. Any rank's exception fails with
        every failing rank's traceback."""
        for rank, conn in enumerate(self._conns):
            conn.send((fn, ranks_args[rank] if ranks_args is not None else args))
        return self._collect(fn.__name__)

    def _collect(self, what):
        deadline = time.monotonic() + self.timeout
        results, errors = [], []
        for rank, conn in enumerate(self._conns):
            if not conn.poll(max(0.0, deadline - time.monotonic())):
                self.kill()
                raise AssertionError(f"{what}: rank {rank} did not answer within {self.timeout} s")
            try:
                status, value = conn.recv()
            except EOFError:
                self.kill()
                raise AssertionError(f"{what}: rank {rank} exited ({self._procs[rank].exitcode})") from None
            if status == "err":
                errors.append(f"---- rank {rank} ----\n{value}")
            results.append(value)
        if errors:
            raise AssertionError(f"{what} failed:\n" + "\n".join(errors))
        return results

    def close(self):
        """Lets each rank finalize and destroy its communicator and exit."""
        for conn in self._conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for proc in self._procs:
            proc.join(self.timeout)
        self.kill()

    def kill(self):
        for proc in self._procs:
            if proc.is_alive():
                os.kill(proc.pid, 9)
                proc.join(5)
