"""Forks N children back to back, each timing how long fork() took to
return in it (from just before the parent's call: the kernel's copy
plus, under strata, the child's joining its tree's helper), then lets
them go. Prints "median MS max MS" over the children.

    forkwait.py N
"""
import os, sys, time
n = int(sys.argv[1])
go_r, go_w = os.pipe()
lat_r, lat_w = os.pipe()
kids = []
for i in range(n):
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        d = time.monotonic() - t0
        os.write(lat_w, b"%f\n" % d)
        os.close(go_w)
        os.read(go_r, 1)
        os._exit(0)
    kids.append(pid)
os.close(go_w)
for p in kids:
    os.waitpid(p, 0)
os.close(lat_w)
data = b""
while True:
    b = os.read(lat_r, 65536)
    if not b:
        break
    data += b
v = sorted(float(x) * 1000 for x in data.split())
print("median %.2f max %.2f" % (v[len(v) // 2], v[-1]))
