"""Installs a SIGTERM handler and blocks in a read() that only the handler
ends: under the profiler the read must still fail with EINTR so Python
runs the handler (exit 9)."""
import signal, sys, os
signal.signal(signal.SIGTERM, lambda *a: sys.exit(9))
print('ready', flush=True)
r, w = os.pipe()
os.read(r, 1)   # blocks forever unless the handler runs
