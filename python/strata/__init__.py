"""strata from Python: profile a block of a running program.

    import strata

    with strata.profile("out.strata"):
        work()

    # then: strata report out.strata

Under `strata record` (the agent is preloaded and already writing a
profile), the block turns sampling on in that profile and back off after
it: run the program with `strata record --paused` to record only the
block. Otherwise the block is recorded into its own file: through the
preloaded agent's control commands when it was started with
STRATA_AGENT=1, or by loading the agent into this process (docs/python.md
says what that mode sees). `python -m strata app.py` runs a program under
`strata record`.
"""
import os
import sys
import threading
import warnings

from . import _agent
from ._agent import AgentError

__all__ = ["profile", "status", "AgentError"]
__version__ = "0.1.0"


def status():
    """The agent's state in this process (starting it in standby if it was
    not loaded): pid, python, mode, rate, sampling, samples, dropped,
    threads, output."""
    return _agent.status()


class _ThreadHook:
    """While a block runs with a dlopen'ed agent, threads started through
    `threading` register themselves (with their names) before running any
    Python code; the agent's /proc scan finds the others."""

    def __init__(self):
        self.prev = None
        self.active = False

    def _hook(self, frame, event, arg):
        if self.active:
            try:
                _agent.register_current_thread(threading.current_thread().name)
            except Exception:
                pass
        sys.setprofile(self.prev)
        if self.prev is not None:
            return self.prev(frame, event, arg)
        return None

    def install(self):
        get = getattr(threading, "getprofile", None)
        self.prev = get() if get else getattr(threading, "_profile_hook", None)
        self.active = True
        threading.setprofile(self._hook)

    def remove(self):
        self.active = False
        threading.setprofile(self.prev)


class profile:
    """Records what runs inside a `with` block (or between start() and
    stop()).

    path: the .strata file to write (default "strata.out"). Ignored, with a
        warning, when the program already runs under `strata record`: the
        block then goes to that recording.
    rate: samples per second per thread (default: the agent's, 1000).
    """

    _active = None

    def __init__(self, path=None, rate=None):
        self.path = path
        self.rate = rate
        self._mode = None
        self._was_on = False
        self._hook = None

    def start(self):
        if profile._active is not None:
            raise AgentError("a strata.profile block is already running in this process")
        opts = "rate=%d" % self.rate if self.rate else ""
        st = _agent.status(opts)
        if st.get("output"):
            # Under strata record: sampling on for the block, in its file.
            if self.path and os.path.abspath(self.path) != st["output"]:
                warnings.warn("strata: this process is already recorded to %s (strata record); the block is "
                              "recorded there, not in %s" % (st["output"], self.path), stacklevel=3)
            self._was_on = st.get("sampling") == "on"
            _agent.command("start")
            self._mode = "toggle"
        else:
            path = os.path.abspath(self.path or "strata.out")
            if _agent.dlopened():
                _agent.name_threads()
                self._hook = _ThreadHook()
                self._hook.install()
            req = "attach\ncreate=1\npath=%s\n" % path
            if self.rate:
                req += "rate=%d\n" % self.rate
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                _agent.command(req, fd)
            except AgentError:
                if self._hook:
                    self._hook.remove()
                    self._hook = None
                raise
            finally:
                os.close(fd)
            self.path = path
            self._mode = "attach"
        profile._active = self
        return self

    def stop(self):
        if profile._active is not self:
            return
        profile._active = None
        try:
            if self._mode == "toggle":
                if not self._was_on:
                    _agent.command("stop")
            elif self._mode == "attach":
                _agent.command("detach")
        finally:
            if self._hook:
                self._hook.remove()
                self._hook = None
            self._mode = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
