"""Four threads allocating and freeing large and small objects all the time
(malloc, mmap/munmap, pymalloc) for argv[1] seconds; prints "done" and exits
with status 5: the worst case for borrowing a thread to load the agent."""
import sys, threading, time
def work(n):
    end = time.time() + float(sys.argv[1])
    x = 0
    while time.time() < end:
        b = bytearray(300000 + (x % 7) * 100000)
        s = [str(i) * 3 for i in range(200)]
        x += len(b) + len(s)
    return x
ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]
for t in ts: t.start()
work(0)
for t in ts: t.join()
print("done", flush=True)
sys.exit(5)
