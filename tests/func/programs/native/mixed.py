"""--native known answers: Python -> C (burn_c), Python -> C -> Python
(a callback), and libm's sin under a Python line.
usage: mixed.py EXT_SO [seconds]"""
import importlib.machinery
import importlib.util
import math
import sys
import time

spec = importlib.util.spec_from_file_location(
    "strata_native_ext", sys.argv[1], loader=importlib.machinery.ExtensionFileLoader("strata_native_ext", sys.argv[1]))
ext = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ext)
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0


def caller():
    end = time.process_time() + SECONDS
    while time.process_time() < end:
        ext.burn_c(200000)  # CALLER


def callback():
    x = 0
    for i in range(20000):  # IN CALLBACK
        x += i
    return x


def uses_callback():
    end = time.process_time() + SECONDS / 2
    while time.process_time() < end:
        ext.call_back(callback, 5)


def sines():
    end = time.process_time() + SECONDS / 2
    s = 0.0
    x = 0.5
    while time.process_time() < end:
        for _ in range(10000):
            s += math.sin(x)  # SIN


caller()
uses_callback()
sines()
