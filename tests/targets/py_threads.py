"""A Python thread that allocates beside the main thread: each thread's stacks carry its own Python frames."""
import threading

kept = []


def worker(n):
    for i in range(n):
        kept.append(bytearray(4096))  # WORKER


def main_loop(n):
    local = []
    for i in range(n):
        local.append(bytearray(4096))  # MAIN
    return len(local)


t = threading.Thread(target=worker, args=(2000,), name="py-worker")
t.start()
main_loop(2000)
t.join()
print("done", len(kept))
