"""--native known answer for inlined functions: churn() of cburn.c (built
-O2) spends its time in churn_inner()'s loop, inlined through churn_mid().
usage: inlined.py CBURN_SO [seconds]"""
import importlib.machinery
import importlib.util
import sys
import time

spec = importlib.util.spec_from_file_location(
    "strata_cburn", sys.argv[1], loader=importlib.machinery.ExtensionFileLoader("strata_cburn", sys.argv[1]))
cburn = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cburn)
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0


def caller():
    end = time.process_time() + SECONDS
    while time.process_time() < end:
        cburn.churn(200000)  # CHURN


caller()
