"""A real OpenTelemetry Collector for the continuous-profiling tests
(test_send.py): built once by scripts/otelcol.sh from the Go module proxy
(OTLP receiver, file exporter; core v0.165.0, contrib v0.165.1), started on
a loopback port with the profiles feature gate on, its file exporter's
JSON read back and resolved through the request's dictionary."""
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_BIN = []


def collector_binary():
    if not _BIN:
        out = subprocess.run([str(ROOT / "scripts" / "otelcol.sh"), "path"], capture_output=True, text=True,
                             timeout=3600)
        if out.returncode != 0:
            pytest.fail("the OpenTelemetry Collector could not be built (scripts/otelcol.sh):\n" + out.stderr)
        _BIN.append(out.stdout.strip())
    return _BIN[0]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Collector:
    """One collector process: OTLP/HTTP on 127.0.0.1:port (TLS with
    cert/key), profiles written as JSON lines to out."""

    def __init__(self, tmp, port=None, cert=None, key=None):
        self.tmp = Path(tmp)
        self.port = port or free_port()
        self.cert, self.key = cert, key
        self.proc = None
        self.outs = []
        self.n = 0

    def start(self):
        self.n += 1
        out = self.tmp / ("otelcol-%d-%d.json" % (self.port, self.n))
        self.outs.append(out)
        tls = ""
        if self.cert:
            tls = "        tls:\n          cert_file: %s\n          key_file: %s\n" % (self.cert, self.key)
        cfg = self.tmp / ("otelcol-%d-%d.yaml" % (self.port, self.n))
        cfg.write_text(
            "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%d\n%s"
            "exporters:\n  file:\n    path: %s\n    flush_interval: 100ms\n"
            "service:\n  telemetry:\n    metrics:\n      level: none\n"
            "  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [file]\n"
            % (self.port, tls, out))
        self.log = open(self.tmp / ("otelcol-%d-%d.log" % (self.port, self.n)), "w")
        self.proc = subprocess.Popen([collector_binary(), "--config=%s" % cfg,
                                      "--feature-gates=service.profilesSupport"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            assert self.proc.poll() is None, "the collector exited: " + self.logtext()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise AssertionError("the collector did not listen within 60 s: " + self.logtext())

    def logtext(self):
        self.log.flush()
        return (self.tmp / Path(self.log.name).name).read_text()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def requests(self):
        """Every request received so far, as Request objects, in order."""
        reqs = []
        for out in self.outs:
            if out.exists():
                for line in out.read_text().splitlines():
                    if not line.strip():
                        continue
                    try:
                        data = json.loads(line)
                    except ValueError:
                        break  # the last line, still being written
                    reqs.append(Request(data))
        return reqs

    def wait_for(self, pred, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            reqs = self.requests()
            if pred(reqs):
                return reqs
            time.sleep(0.2)
        return self.requests()


def _int(v):
    return int(v) if v not in (None, "") else 0


def _anyvalue(v, strings=()):
    if "stringValue" in v:
        return v["stringValue"]
    if "stringValueStrindex" in v:
        return strings[_int(v["stringValueStrindex"])]
    if "intValue" in v:
        return int(v["intValue"])
    if "boolValue" in v:
        return v["boolValue"]
    if "doubleValue" in v:
        return v["doubleValue"]
    return None


class Request:
    """One received export, resolved: per resource its attributes and, per
    profile (one per sample type), samples as (stack, value, attributes)
    with stack = [(function, file, line, frame type, mapping file,
    build id)] leaf first."""

    def __init__(self, data):
        self.raw = data
        d = data.get("dictionary", {})
        self.strings = d.get("stringTable", [""])
        s = self.strings
        self.attrs = []
        for a in d.get("attributeTable", []):
            self.attrs.append((s[_int(a.get("keyStrindex"))], _anyvalue(a.get("value", {}), s)))
        funcs = [(s[_int(f.get("nameStrindex"))], s[_int(f.get("filenameStrindex"))], _int(f.get("startLine")))
                 for f in d.get("functionTable", [])]
        maps = []
        for m in d.get("mappingTable", []):
            at = dict(self.attrs[i] for i in m.get("attributeIndices", []))
            maps.append((s[_int(m.get("filenameStrindex"))], at.get("process.executable.build_id.gnu")))
        self.locations = []
        for loc in d.get("locationTable", []):
            at = dict(self.attrs[i] for i in loc.get("attributeIndices", []))
            mp = maps[_int(loc.get("mappingIndex"))] if maps else ("", None)
            lines = [(funcs[_int(ln.get("functionIndex"))][0], funcs[_int(ln.get("functionIndex"))][1],
                      _int(ln.get("line"))) for ln in loc.get("lines", [])]
            self.locations.append((lines, at.get("profile.frame.type"), mp[0], mp[1]))
        self.stacks = [[_int(i) for i in st.get("locationIndices", [])] for st in d.get("stackTable", [])]
        self.resources = []
        for rp in data.get("resourceProfiles", []):
            # The Collector may move keys and string values into the
            # dictionary (keyStrindex, stringValueStrindex).
            res = {a.get("key") or s[_int(a.get("keyStrindex"))]: _anyvalue(a.get("value", {}), s)
                   for a in rp.get("resource", {}).get("attributes", [])}
            profiles = []
            for sp in rp.get("scopeProfiles", []):
                for p in sp.get("profiles", []):
                    st = p.get("sampleType", {})
                    samples = []
                    for smp in p.get("samples", []):
                        frames = []
                        for li in self.stacks[_int(smp.get("stackIndex"))]:
                            lines, ftype, mfile, bid = self.locations[li]
                            for fn, file, line in lines:
                                frames.append((fn, file, line, ftype, mfile, bid))
                        at = dict(self.attrs[i] for i in smp.get("attributeIndices", []))
                        samples.append((frames, sum(_int(v) for v in smp.get("values", [])), at))
                    profiles.append({"type": s[_int(st.get("typeStrindex"))], "unit": s[_int(st.get("unitStrindex"))],
                                     "time": _int(p.get("timeUnixNano")), "duration": _int(p.get("durationNano")),
                                     "samples": samples, "scope": sp.get("scope", {})})
            self.resources.append((res, profiles))

    def profile(self, i=0, type_="samples"):
        res, profiles = self.resources[i]
        return next(p for p in profiles if p["type"] == type_)

    def total(self, i=0):
        return sum(v for _, v, _ in self.profile(i)["samples"])

    def self_of(self, name, i=0):
        """Samples whose leaf frame is function `name`."""
        return sum(v for frames, v, _ in self.profile(i)["samples"] if frames and frames[0][0] == name)
