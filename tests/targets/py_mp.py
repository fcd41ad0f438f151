"""multiprocessing workers (fork start method) that each keep what they allocate: every worker's trace names the
worker's line."""
import multiprocessing as mp


def work(n):
    kept = []
    for i in range(n):
        kept.append(bytearray(8192))  # LEAK
    return len(kept)


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    pool = ctx.Pool(2)
    print("done", sum(pool.map(work, [1500, 1500])))
    pool.close()  # workers end through os._exit, which flushes their traces (terminate() would SIGTERM them)
    pool.join()
