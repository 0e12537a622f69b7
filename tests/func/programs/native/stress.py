"""--native must never crash the target: threads starting and stopping, an
extension loaded mid-run (dlopen) while other threads are sampled, fork,
and libm/NumPy-free C work in every thread. Prints OK at the end.
usage: stress.py EXT_SO"""
import importlib.machinery
import importlib.util
import math
import os
import sys
import threading
import time


def spin(seconds):
    end = time.process_time() + seconds
    s = 0.0
    while time.process_time() < end:
        for i in range(1000):
            s += math.sqrt(i)
    return s


def short_lived():
    for _ in range(20):
        ts = [threading.Thread(target=spin, args=(0.01,)) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()


def load_ext():
    time.sleep(0.2)
    spec = importlib.util.spec_from_file_location(
        "strata_native_ext", sys.argv[1],
        loader=importlib.machinery.ExtensionFileLoader("strata_native_ext", sys.argv[1]))
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    end = time.process_time() + 0.3
    while time.process_time() < end:
        ext.burn_c(100000)


threads = [threading.Thread(target=short_lived), threading.Thread(target=load_ext)]
for t in threads:
    t.start()
spin(0.3)
pid = os.fork()
if pid == 0:
    spin(0.2)
    os._exit(7)
_, status = os.waitpid(pid, 0)
for t in threads:
    t.join()
assert os.WEXITSTATUS(status) == 7, status
print("OK")
