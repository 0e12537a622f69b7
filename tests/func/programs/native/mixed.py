"""--native known answers:
  caller        Python -> C (burn_c, a hot loop at ext.c's HOT line)
  uses_callback Python -> C (call_back, call_into_python) -> Python (callback)
  uses_sorted   Python -> sorted() -> Python (key) -> C (burn_c):
                Python, C, Python, C in one stack
  uses_map      Python -> map() -> Python (square)
  sines         libm's sin under a Python line
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
        ext.call_back(callback, 5)  # CALL_BACK


def key(x):
    ext.burn_c(20000)  # KEY
    return -x


def uses_sorted():
    end = time.process_time() + SECONDS / 4
    while time.process_time() < end:
        sorted(range(100), key=key)  # SORTED


def square(x):
    s = 0
    for i in range(2000):  # IN MAP
        s += i * x
    return s


def uses_map():
    end = time.process_time() + SECONDS / 4
    while time.process_time() < end:
        list(map(square, range(100)))  # MAP


def sines():
    end = time.process_time() + SECONDS / 2
    s = 0.0
    # Large enough for libm's argument reduction (inlined in sin) to be
    # most of the cost, small enough not to need __branred.
    x = 1e8
    while time.process_time() < end:
        for _ in range(10000):
            s += math.sin(x)  # SIN


caller()
uses_callback()
uses_sorted()
uses_map()
sines()
