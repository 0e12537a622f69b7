"""A program attached to mid-run with strata record --pid --objects
(test_objects.py): one() and three() make dicts 1:3 in a loop, and the
loop writes to STATEFILE whether strata's hooks are in (objects_hooks.py:
"on", "off" or "mixed ..."), until STATEFILE.stop exists or SECONDS have
passed.

    objects_attach.py STATEFILE SECONDS EXT_SO
"""
import os
import sys
import time

import objects_hooks


def one():
    batch = [dict(k=i) for i in range(1000)]
    del batch


def three():
    for _ in range(3):
        batch = [dict(k=i) for i in range(1000)]
        del batch


def main(path, seconds, so):
    ext = objects_hooks.load_ext(so)
    end = time.time() + seconds
    while time.time() < end and not os.path.exists(path + ".stop"):
        one()
        three()
        objects_hooks.write_state(path, ext)
        time.sleep(0.005)
    print("done")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3])
