"""--native on stripped objects: names, lines and inlined functions come
from a separate debug file, found by build id in a debug directory
(/usr/lib/debug, or STRATA_DEBUG_DIRS), by .gnu_debuglink next to the
object, or from a debuginfod server when DEBUGINFOD_URLS is set; and an
object replaced since the recording (another build at its path) is looked
up by the build id recorded.

The extension is cburn.c (tests/func/programs/native), built -O2 -g, then
split the way distributions ship it: a stripped object and its debug file
(objcopy --only-keep-debug). The debuginfod server is a small HTTP server
in the test answering /buildid/ID/debuginfo and /buildid/ID/executable, the
two requests of debuginfod's protocol that strata's lookups make; it
records what it was asked.
"""
import http.server
import re
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import PROGRAMS, func_row, strata

NATIVE = PROGRAMS / "native"
CBURN_C = NATIVE / "cburn.c"
INLINED = NATIVE / "inlined.py"


def build_id(path):
    out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, check=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def build(python, out, opt="-O2"):
    inc = subprocess.run([str(python.exe), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", opt, "-I" + inc, "-o", str(out), str(CBURN_C)], check=True)
    return out


@pytest.fixture
def split(debian_python, tmp_path):
    """A profile of the stripped extension, the full build, its debug file,
    and the build id they share."""
    full = build(debian_python, tmp_path / "full.so")
    dbg = tmp_path / "strata_cburn.debug"
    so = tmp_path / "lib" / "strata_cburn.so"
    so.parent.mkdir()
    subprocess.run(["objcopy", "--only-keep-debug", str(full), str(dbg)], check=True)
    subprocess.run(["objcopy", "--strip-all", str(full), str(so)], check=True)
    assert subprocess.run(["nm", str(so)], capture_output=True, text=True).stdout.strip() == ""
    bid = build_id(so)
    assert bid == build_id(full) == build_id(dbg)
    out = tmp_path / "s.strata"
    r = strata("record", "-o", out, "--native", "--", debian_python.exe, INLINED, so, "0.8")
    assert r.returncode == 0, r.stderr
    return {"profile": out, "so": so, "full": full, "debug": dbg, "id": bid, "tmp": tmp_path,
            "python": debian_python}


def named(profile, env=None):
    """Whether the report names churn_inner, inlined under churn_mid, and
    the share of samples in it; else the share in strata_cburn.so+0x..."""
    r = strata("report", "--json", profile, env=env)
    assert r.returncode == 0, r.stderr
    import json
    rep = json.loads(r.stdout)
    inner = [f for f in rep["functions"] if f["name"] == "churn_inner"]
    unnamed = [f for f in rep["functions"] if f["name"].startswith("strata_cburn.so+0x")]
    if inner:
        st = strata("convert", profile, "-f", "collapsed", env=env).stdout
        assert re.search(r";churn \(.*cburn\.c:\d+\);churn_mid \(.*cburn\.c:\d+\);churn_inner \(", st), st[:2000]
        assert not unnamed, unnamed
        return True, inner[0]["self"] / rep["samples"]
    return False, sum(f["self"] for f in unnamed) / rep["samples"]


def env_with(**kw):
    import os
    env = dict(os.environ)
    for k in ("DEBUGINFOD_URLS", "STRATA_DEBUG_DIRS"):
        env.pop(k, None)
    env.update({k: str(v) for k, v in kw.items()})
    return env


def test_stripped_object_without_debug_file(split):
    ok, share = named(split["profile"], env=env_with())
    assert not ok and share > 0.8, share


def test_debug_file_by_build_id(split):
    """D/.build-id/xx/yyyy.debug, D given in STRATA_DEBUG_DIRS (as
    /usr/lib/debug is searched for the *-dbgsym packages)."""
    d = split["tmp"] / "debugroot"
    link = d / ".build-id" / split["id"][:2] / (split["id"][2:] + ".debug")
    link.parent.mkdir(parents=True)
    link.write_bytes(split["debug"].read_bytes())
    ok, share = named(split["profile"], env=env_with(STRATA_DEBUG_DIRS="/nonexistent:%s" % d))
    assert ok and share > 0.8, share


def test_debug_file_by_debuglink(split, tmp_path):
    """.gnu_debuglink names the debug file, found in .debug/ beside the
    object with no setting at all."""
    so = split["so"]
    linked = tmp_path / "linked.so"
    subprocess.run(["objcopy", "--add-gnu-debuglink=%s" % split["debug"], str(so), str(linked)], check=True,
                   cwd=str(split["debug"].parent))
    # Same code, same build id: the recorded object still matches.
    linked.replace(so)
    (so.parent / ".debug").mkdir()
    (so.parent / ".debug" / split["debug"].name).write_bytes(split["debug"].read_bytes())
    assert build_id(so) == split["id"]
    ok, share = named(split["profile"], env=env_with())
    assert ok and share > 0.8, share


class Debuginfod:
    """A minimal debuginfod server: GET /buildid/ID/{debuginfo,executable}."""

    def __init__(self, files):
        self.files = files  # (id, kind) -> bytes
        self.asked = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.asked.append(self.path)
                m = re.match(r"^/buildid/([0-9a-f]+)/(debuginfo|executable)$", self.path)
                body = outer.files.get((m.group(1), m.group(2))) if m else None
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def debuginfod():
    servers = []

    def start(files):
        s = Debuginfod(files)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def test_debug_file_from_debuginfod(split, debuginfod):
    """DEBUGINFOD_URLS: libdwfl asks the server for the debug file of the
    stripped object's build id."""
    srv = debuginfod({(split["id"], "debuginfo"): split["debug"].read_bytes()})
    env = env_with(DEBUGINFOD_URLS=srv.url, DEBUGINFOD_CACHE_PATH=split["tmp"] / "cache")
    ok, share = named(split["profile"], env=env)
    assert ok and share > 0.8, share
    assert "/buildid/%s/debuginfo" % split["id"] in srv.asked, srv.asked
    # Served once: the client's cache answers the next report.
    before = len(srv.asked)
    assert named(split["profile"], env=env)[0]
    assert len(srv.asked) == before, srv.asked


def test_replaced_object_found_by_recorded_build_id(split, debuginfod):
    """Another build now at the object's path (reinstalled since the
    recording) is not trusted; the recorded build is found by its build id:
    its executable from debuginfod, or its debug file from debuginfod or a
    debug directory."""
    other = build(split["python"], split["tmp"] / "other.so", opt="-O1")
    assert build_id(other) != split["id"]
    other.replace(split["so"])
    ok, _ = named(split["profile"], env=env_with())
    assert not ok
    # The executable (here the unstripped build: same build id).
    srv = debuginfod({(split["id"], "executable"): split["full"].read_bytes()})
    env = env_with(DEBUGINFOD_URLS=srv.url, DEBUGINFOD_CACHE_PATH=split["tmp"] / "cache1")
    ok, share = named(split["profile"], env=env)
    assert ok and share > 0.8, (share, srv.asked)
    assert "/buildid/%s/executable" % split["id"] in srv.asked, srv.asked
    # Only the debug file.
    srv = debuginfod({(split["id"], "debuginfo"): split["debug"].read_bytes()})
    env = env_with(DEBUGINFOD_URLS=srv.url, DEBUGINFOD_CACHE_PATH=split["tmp"] / "cache2")
    ok, share = named(split["profile"], env=env)
    assert ok and share > 0.8, (share, srv.asked)
    # Only a debug directory.
    d = split["tmp"] / "debugroot2"
    link = d / ".build-id" / split["id"][:2] / (split["id"][2:] + ".debug")
    link.parent.mkdir(parents=True)
    link.write_bytes(split["debug"].read_bytes())
    ok, share = named(split["profile"], env=env_with(STRATA_DEBUG_DIRS=d))
    assert ok and share > 0.8, share
    # The report still says which object it was.
    r = strata("report", "--json", split["profile"], env=env_with(STRATA_DEBUG_DIRS=d))
    import json
    inner = func_row(json.loads(r.stdout), "churn_inner")
    assert Path(inner["module"]) == split["so"], inner
