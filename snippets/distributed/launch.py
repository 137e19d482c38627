# --8<-- [start:lesson]
import datetime
import faulthandler
import multiprocessing.connection
import os
import pickle
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def launch(fn, world_size=2, time_limit_s=90.0):
    if "TORCHELASTIC_RUN_ID" in os.environ:  # (1)!
        dist.init_process_group("gloo")
        try:
            fn(dist.get_rank(), dist.get_world_size())
        finally:
            dist.destroy_process_group()
        _exit_now()
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)  # (2)!
    ctx = mp.get_context("spawn")
    ranks = [
        ctx.Process(target=_rank, args=(fn, rank, world_size, store.port, os.getpid()))
        for rank in range(world_size)
    ]
    for process in ranks:
        process.start()
    try:
        failure = _watch(ranks, time_limit_s)
    finally:
        for process in ranks:  # (3)!
            if process.exitcode is None:
                process.terminate()
        for process in ranks:
            process.join(5)
            if process.exitcode is None:
                process.kill()
                process.join()
    if failure is None and any(p.exitcode != 0 for p in ranks):  # (4)!
        failure = "a rank failed"
    if failure is not None:
        del store
        codes = ", ".join(f"rank {r}: {p.exitcode}" for r, p in enumerate(ranks))
        sys.exit(f"launch: {failure}; every rank has been stopped (exit codes {codes})")
    results = [pickle.loads(store.get(f"result/{rank}")) for rank in range(world_size)]  # (5)!
    del store
    return results


def _watch(ranks, time_limit_s):
    deadline = time.monotonic() + time_limit_s
    while True:
        codes = [p.exitcode for p in ranks]  # (6)!
        if any(code not in (None, 0) for code in codes):
            return "a rank failed"
        if None not in codes:
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            return f"ranks still running after {time_limit_s:g} s"
        running = [p.sentinel for p, code in zip(ranks, codes, strict=True) if code is None]
        multiprocessing.connection.wait(running, timeout=min(left, 1.0))


def _rank(fn, rank, world_size, port, parent_pid):
    faulthandler.enable(all_threads=True)  # (7)!
    threading.Thread(target=_exit_if_orphaned, args=(parent_pid,), daemon=True).start()
    store = dist.TCPStore(
        "127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=30)
    )
    dist.init_process_group(
        "gloo",
        store=store,
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        store.set(f"result/{rank}", pickle.dumps(fn(rank, world_size)))
    finally:
        dist.destroy_process_group()  # (8)!
    _exit_now()


def _exit_now():
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # (9)!


def _exit_if_orphaned(parent_pid):
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(1)


def _demo(rank, world_size):
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    if rank == 0:
        print("ranks:", world_size, "| sum_of_ranks:", int(total.item()))
    return rank, total.item()


if __name__ == "__main__":
    results = launch(_demo)
# --8<-- [end:lesson]

# --8<-- [start:proof]
if __name__ == "__main__":  # (1)!
    assert results == [(0, 1.0), (1, 1.0)]  # (2)!
# --8<-- [end:proof]
