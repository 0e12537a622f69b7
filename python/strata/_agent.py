"""The agent in this process, driven through its control commands.

The agent (libstrata-agent.so) takes the same commands from code in the
process as from its control socket (docs/control.md): `status`, `start`,
`stop`, `attach`, `detach`, `dump`. This module finds it:

- preloaded (`strata record`, or LD_PRELOAD with STRATA_AGENT=1): its
  exported functions are in the process's global symbol scope;
- not loaded: it is loaded with ctypes (dlopen) and started for this
  process, in standby, with threads registered by thread id (see
  docs/python.md for what that can and cannot see).
"""
import ctypes
import os
import shutil
import sys
import threading

_lib = None
_lock = threading.Lock()
_dlopened = False


class AgentError(RuntimeError):
    """The agent refused a command, or could not be found or started."""


def packaged_cli():
    """The strata executable inside this package (the wheel), or None."""
    cand = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "strata")
    return cand if os.access(cand, os.X_OK) else None


def agent_dir():
    """The directory holding libstrata-agent.so and the per-version builds."""
    env = os.environ.get("STRATA_AGENT_DIR")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    # The wheel: <site-packages>/strata/lib/strata/, beside bin/strata
    # (the same layout as an installed prefix, so the CLI finds it too).
    # Installed with make install (and the build tree):
    # <prefix>/lib/strata/python/strata/.
    for cand in (os.path.join(here, "lib", "strata"), os.path.normpath(os.path.join(here, "..", ".."))):
        if os.path.exists(os.path.join(cand, "libstrata-agent.so")):
            return cand
    cli = strata_cli(required=False)
    if cli:
        cand = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(cli)), "..", "lib", "strata"))
        if os.path.exists(os.path.join(cand, "libstrata-agent.so")):
            return cand
    return None


def strata_cli(required=True):
    """The `strata` executable: STRATA_CLI, inside or next to this package,
    or on PATH."""
    env = os.environ.get("STRATA_CLI")
    if env:
        return env
    cand = packaged_cli()
    if cand:
        return cand
    here = os.path.dirname(os.path.abspath(__file__))
    # <prefix>/lib/strata/python/strata -> <prefix>/bin/strata
    cand = os.path.normpath(os.path.join(here, "..", "..", "..", "..", "bin", "strata"))
    if os.access(cand, os.X_OK):
        return cand
    found = shutil.which("strata")
    if found or not required:
        return found
    raise AgentError("cannot find the strata command: put it on PATH or set STRATA_CLI")


def _bind(lib):
    lib.strata_agent_command.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    lib.strata_agent_command.restype = ctypes.c_int
    lib.strata_agent_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.strata_agent_load.restype = ctypes.c_int
    lib.strata_agent_register_thread.argtypes = [ctypes.c_char_p]
    lib.strata_agent_register_thread.restype = ctypes.c_int
    lib.strata_agent_name_thread.argtypes = [ctypes.c_int, ctypes.c_char_p]
    lib.strata_agent_name_thread.restype = ctypes.c_int
    return lib


def _find():
    global _lib, _dlopened
    if _lib is not None:
        return _lib
    try:
        # Preloaded: the agent's exports resolve from the global scope.
        glob = ctypes.CDLL(None)
        glob.strata_agent_command
        _lib = _bind(glob)
        return _lib
    except AttributeError:
        pass
    d = agent_dir()
    if not d:
        raise AgentError("cannot find libstrata-agent.so: set STRATA_AGENT_DIR to the directory holding it")
    path = os.path.join(d, "libstrata-agent.so")
    try:
        # RTLD_LOCAL (ctypes' default): nothing in the process binds to
        # the agent's interposers after the fact.
        _lib = _bind(ctypes.CDLL(path))
    except OSError as e:
        raise AgentError("cannot load %s: %s" % (path, e))
    _dlopened = True
    return _lib


def command(req, fd=-1):
    """Runs one control command; returns the reply's key=value pairs."""
    lib = _find()
    buf = ctypes.create_string_buffer(8192)
    rc = lib.strata_agent_command(req.encode(), fd, buf, len(buf))
    reply = buf.value.decode(errors="replace")
    if rc != 0:
        msg = reply[7:] if reply.startswith("error: ") else reply
        raise AgentError(msg.strip())
    out = {}
    for line in reply.splitlines()[1:]:
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out


def status(options=""):
    """The agent's state, starting it in this process first if needed."""
    with _lock:
        try:
            return command("status")
        except AgentError as e:
            if "not active" not in str(e):
                raise
        lib = _find()
        err = ctypes.create_string_buffer(1024)
        if lib.strata_agent_load(options.encode(), err, len(err)) != 0:
            raise AgentError(err.value.decode(errors="replace"))
        return command("status")


def dlopened():
    """Whether the agent was loaded by this module (threads found by tid)."""
    return _dlopened


def name_threads():
    """Gives the agent the names of the threads that exist now."""
    lib = _find()
    for t in threading.enumerate():
        tid = getattr(t, "native_id", None)
        if tid:
            lib.strata_agent_name_thread(tid, t.name.encode(errors="replace"))


def register_current_thread(name):
    lib = _find()
    lib.strata_agent_register_thread(name.encode(errors="replace"))
