"""Grants inside docker sessions (issue 23 item 1; docs/sessions.md "Grants in sessions"): the
cases of test_session_grants.py (an allowed route reaches the upstream with the host-side credential
and another is refused; one route_max_calls budget across the session's calls; max_calls per call;
a profile without allow_in_sessions refused, marked permission) run against a real docker session
container (runc and runsc), whose snippets reach the broker through the per-session directory mounted at
open and a per-call socket in it. Plus what is docker's own: the call's socket is gone after the
call, the directory cannot be listed from inside, cells and ungranted snippets see no socket, and
the directory goes with the session. Docker lane. Standard library only."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import test_session_grants as qs  # noqa: E402  (a module, so its quickjs class is not collected here)
from test_docker_sessions import BASE, _Prereq  # noqa: E402
from test_sessions import out  # noqa: E402

PROBE = r"""
const fs = require('fs');
const sock = process.env.HOST_API_SOCKET || '';
let listing;
try { listing = fs.readdirSync('/run/plimsoll-session').length + ' entries'; } catch (e) { listing = e.code; }
let old = '';
try { old = fs.readFileSync('/work/last-sock.txt', 'utf8'); } catch (e) {}
let reach = 'none';
if (old) reach = fs.existsSync(old) ? 'exists' : 'gone';
if (sock) fs.writeFileSync('/work/last-sock.txt', sock);
console.log(JSON.stringify({sock, listing, reach}));
"""


class DockerSessionGrants(_Prereq, qs.SessionGrants):
    RUNTIME = "runc"

    @classmethod
    def daemon_env(cls):
        cls.check_prereqs()
        cls.rundir = tempfile.mkdtemp(prefix="plimsoll-sg-")  # 0700, ours: the grant socket base
        return dict(BASE, SANDBOX_DOCKER_RUNTIME=cls.RUNTIME, SANDBOX_SESSION_IDLE="1m",
                    RUNTIME_DIRECTORY=cls.rundir)

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        left = os.listdir(cls.rundir)
        os.rmdir(cls.rundir) if not left else None
        assert not left, "the daemon left grant directories behind: %r" % left

    def session_dirs(self):
        return sorted(n for n in os.listdir(self.rundir) if n.startswith("plimsoll-session-%d-" % self.d.proc.pid))

    def probe(self, sid, profile):
        msg = {"protocol": 3, "sessionId": sid, "javascript": {"code": PROBE}}
        if profile:
            msg["javascript"]["grantProfile"] = profile
        return json.loads(self.lines(self.d.call("SessionRun", msg, token="alice-tok"))[0])

    def test_the_calls_socket_lives_for_its_call_only(self):
        before = self.session_dirs()
        sid = self.open()
        dirs = self.session_dirs()
        self.assertEqual(len(dirs), len(before) + 1, dirs)
        mode = os.stat(os.path.join(self.rundir, [d for d in dirs if d not in before][0])).st_mode & 0o777
        self.assertEqual(mode, 0o711)
        first = self.probe(sid, "sess")
        self.assertRegex(first["sock"], r"^/run/plimsoll-session/[0-9a-f]{32}\.sock$")
        self.assertEqual(first["listing"], "EACCES")  # the guest cannot list the names
        second = self.probe(sid, "sess")
        self.assertNotEqual(second["sock"], first["sock"])  # a fresh random name per call
        self.assertEqual(second["reach"], "gone")  # the first call's socket went with it
        third = self.probe(sid, None)  # an ungranted snippet: no socket named, the last one gone
        self.assertEqual((third["sock"], third["reach"]), ("", "gone"))
        # a cell never carries a grant: no socket in its environment
        st, _, data, _ = self.d.call("SessionRun", {"protocol": 3, "sessionId": sid, "cell": {
            "language": "python", "code": "import os\nprint(repr(os.environ.get('HOST_API_SOCKET')))"}},
            token="alice-tok")
        self.assertEqual(st, 200, data)
        self.assertEqual(out(json.loads(data)).strip(), "None")
        self.close(sid)
        self.assertEqual(self.session_dirs(), before)  # the session's directory went with it


class DockerSessionGrantsRunsc(DockerSessionGrants):
    """The same under gVisor (tier kernel): the host socket is reached through runsc's host-UDS
    support (docker-setup.sh registers runsc with --host-uds=open)."""
    RUNTIME = "runsc"


if __name__ == "__main__":
    unittest.main(verbosity=2)
