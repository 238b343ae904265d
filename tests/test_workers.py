"""Warm verification workers (issue 13): children forked from a preloaded forkserver give the
same verdicts as fresh interpreters, start without torch's import, and keep isolation."""
import json
import os
import sys
from pathlib import Path

import pytest

from mend.errors import MendError
from mend.worker import run_worker


def _user_package(tmp_path):
    pkg = tmp_path / "mend_warm_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(
        "import torch\nfrom torch import nn\n\nCALLS = []\n\n\nclass Block(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n    def forward(self, x):\n"
        "        CALLS.append(1)\n        h = self.fc(x)\n        if h.sum() > 0:\n            y = h * 2.0\n"
        "        else:\n            y = h - 1.0\n        return y\n")
    (tmp_path / "mend_warm_build.py").write_text(
        "import torch\n\nfrom mend_warm_pkg.model import Block\n\n\ndef make():\n"
        "    torch.manual_seed(0)\n    return Block(), (torch.randn(2, 4),)\n")
    return "mend_warm_build:make"


def _scan_request(tmp_path, target):
    return {"target": target, "action": "scan"}


def test_warm_child_scans_like_a_fresh_interpreter(tmp_path, monkeypatch):
    target = _user_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEND_WORKERS", "warm")
    warm = run_worker(_scan_request(tmp_path, target), tmp_path, "warm")
    monkeypatch.setenv("MEND_WORKERS", "fresh")
    fresh = run_worker(_scan_request(tmp_path, target), tmp_path, "fresh")
    assert warm == fresh
    assert (warm["graph_count"], warm["graph_break_count"]) == (2, 1)


def test_children_do_not_share_module_state(tmp_path, monkeypatch):
    # the model appends to a module-level list on every call: a second child must start from
    # an empty list (a fresh import), so both scans are equal, and the parent never imported it
    target = _user_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEND_WORKERS", "warm")
    first = run_worker(_scan_request(tmp_path, target), tmp_path, "a")
    second = run_worker(_scan_request(tmp_path, target), tmp_path, "b")
    assert first == second and "mend_warm_pkg.model" not in sys.modules


def test_a_failing_child_reports_its_last_stderr_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEND_WORKERS", "warm")
    with pytest.raises(MendError, match="verification worker failed for no_such_module_xyz:make: .*no_such_module_xyz"):
        run_worker({"target": "no_such_module_xyz:make", "action": "scan"}, tmp_path, "bad")


@pytest.mark.parametrize("mode", ["warm", "fresh"])
def test_a_rewrite_that_makes_the_model_raise_is_named_as_such(tmp_path, monkeypatch, mode):
    # hf:newest/reformer: a candidate's eager check raised, and the decline read "the model
    # rejected its example inputs", as if the user's inputs were wrong; the original runs
    target = _user_package(tmp_path)
    overlay = tmp_path / "overlay" / "mend_warm_pkg"
    overlay.mkdir(parents=True)
    source = (tmp_path / "mend_warm_pkg" / "model.py").read_text()
    (overlay / "model.py").write_text(source.replace("y = h * 2.0", "y = torch.where(True, h, h)"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEND_WORKERS", mode)
    with pytest.raises(MendError, match="^mend_warm_build:make: with the rewritten source the model "
                                        "raised on its example inputs, which the original runs on: TypeError"):
        run_worker({"target": target, "action": "scan", "overlay": str(tmp_path / "overlay")}, tmp_path, "raises")
    # without an overlay, the same failure still blames the inputs
    (tmp_path / "mend_warm_pkg" / "model.py").write_text(source.replace("y = h * 2.0", "y = torch.where(True, h, h)"))
    with pytest.raises(MendError, match="the model rejected its example inputs in eager mode: TypeError"):
        run_worker({"target": target, "action": "scan"}, tmp_path, "plain")


def test_the_warm_worker_imports_no_model_file_or_user_code():
    """The overlay must be able to replace model files and user modules in every child."""
    import subprocess

    code = ("import sys, mend._warm; mend._warm._preload(); bad = [m for m in sys.modules if m.split('.')[0] in "
            "('mend_warm_pkg', 'mend_warm_build') or '.modeling_' in m and m.startswith('transformers.models.')]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0 and json.loads(out.stdout.strip().replace("'", '"')) == [], out.stderr


@pytest.mark.slow
def test_fix_verdicts_are_the_same_warm_and_fresh(tmp_path, monkeypatch):
    """The whole overlay pipeline, once through warm children and once through fresh
    interpreters: the same rewrites, obligations' results, evidence and declines."""
    from mend.pipeline import fix

    target = _user_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    docs = []
    for mode in ("warm", "fresh"):
        monkeypatch.setenv("MEND_WORKERS", mode)
        docs.append(_untimed(json.loads(json.dumps(fix(target, unsafe_fixes=True, max_examples=3).to_json(),
                                                   default=str))))
    assert docs[0]["rewrites"] and docs[0] == docs[1]


def _untimed(doc):
    """``doc`` without its timings (every key ending in ``seconds``)."""
    if isinstance(doc, dict):
        return {k: _untimed(v) for k, v in doc.items() if not k.endswith("seconds")}
    if isinstance(doc, list):
        return [_untimed(v) for v in doc]
    return doc


def test_an_overlay_of_a_preloaded_module_runs_in_a_fresh_interpreter(tmp_path, monkeypatch):
    """transformers.modeling_utils is preloaded: a request whose overlay replaces it cannot be
    served by a warm child (its old code would run); it is rerun in a fresh interpreter."""
    pytest.importorskip("transformers")
    import transformers.modeling_utils as mu

    overlay = tmp_path / "overlay" / "transformers"
    overlay.mkdir(parents=True)
    (overlay / "modeling_utils.py").write_text(Path(mu.__file__).read_text() + "\nMEND_OVERLAY_MARK = 1\n")
    target = _user_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEND_WORKERS", "warm")
    doc = run_worker({"target": target, "action": "scan", "overlay": str(tmp_path / "overlay")}, tmp_path, "stale")
    assert doc["graph_break_count"] == 1
    assert "already imported" in (tmp_path / "stale.log").read_text()


def test_concurrent_requests_each_get_their_own_answer(tmp_path, monkeypatch):
    """run_workers sends several requests to the warm server at once (two children at a
    time): each result comes back in the order asked, a failing one as its MendError, and the
    others are unaffected; the replies, which arrive in the order children end, are matched
    by id."""
    from mend.worker import run_workers

    target = _user_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEND_WORKERS", "warm")
    monkeypatch.setenv("MEND_JOBS", "2")
    alone = run_worker(_scan_request(tmp_path, target), tmp_path, "alone")
    results = run_workers([(_scan_request(tmp_path, target), "c1"),
                           ({"target": "no_such_module_xyz:make", "action": "scan"}, "c2"),
                           (_scan_request(tmp_path, target), "c3")], tmp_path)
    assert results[0] == alone and results[2] == alone
    assert isinstance(results[1], MendError) and "no_such_module_xyz" in str(results[1])


def test_a_killed_server_is_restarted_and_given_the_unanswered_jobs(tmp_path, monkeypatch):
    from mend.worker import _WarmServer, run_workers

    target = _user_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEND_WORKERS", "warm")
    wait = _WarmServer.wait.__func__
    killed = []

    def kill_then_wait(cls, job_id):
        if not killed:  # the jobs are submitted and running: the OOM killer takes the server
            killed.append(cls.proc.pid)
            cls.proc.kill()
            cls.proc.wait()
        return wait(cls, job_id)

    monkeypatch.setattr(_WarmServer, "wait", classmethod(kill_then_wait))
    results = run_workers([(_scan_request(tmp_path, target), "k1"), (_scan_request(tmp_path, target), "k2")], tmp_path)
    assert killed and _WarmServer.proc.pid != killed[0]
    assert results[0] == results[1] and results[0]["graph_break_count"] == 1


def test_a_dropped_run_is_never_read_and_does_not_block_the_next(tmp_path, monkeypatch):
    """start_workers submits at once (mend fix starts a candidate's Inductor run with its
    facts); a run dropped unread leaves no reply behind for a later wait, and the runs after
    it still get their own answers."""
    from mend.worker import _WarmServer, start_workers

    target = _user_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEND_WORKERS", "warm")
    dropped = start_workers([(_scan_request(tmp_path, target), "d1")], tmp_path)
    kept = start_workers([(_scan_request(tmp_path, target), "d2")], tmp_path)
    dropped.drop()
    assert kept.results()[0]["graph_break_count"] == 1
    later = start_workers([({"target": "no_such_module_xyz:make", "action": "scan"}, "d3")], tmp_path).results()
    assert isinstance(later[0], MendError)
    assert dropped.ids[0] not in _WarmServer.done  # its reply, if it came, was not kept
    _WarmServer.stop()  # a later server is never sent it again
    assert dropped.ids[0] not in _WarmServer.pending and not _WarmServer.discard


def test_fresh_mode_starts_nothing_before_results(tmp_path, monkeypatch):
    from mend.worker import start_workers

    target = _user_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEND_WORKERS", "fresh")
    started = start_workers([(_scan_request(tmp_path, target), "f1")], tmp_path)
    assert started.ids is None and not (tmp_path / "f1.out").exists()
    assert started.results()[0]["graph_break_count"] == 1


def test_an_overlay_scan_names_the_package_path_in_its_stacks(tmp_path, monkeypatch):
    """A scan served from an overlay (a mended library file in a scratch folder) reports the
    package's path in each site's stack, as for the installed file, not the scratch folder's:
    two runs of one row gave different JSON only by that folder (benchmarks/run_mend_cost.py,
    longformer and bart@fp16, "identical JSON: NO")."""
    target = _user_package(tmp_path)
    overlay = tmp_path / "overlay" / "mend_warm_pkg"
    overlay.mkdir(parents=True)
    for name in ("__init__.py", "model.py"):
        (overlay / name).write_text((tmp_path / "mend_warm_pkg" / name).read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEND_WORKERS", "fresh")
    doc = run_worker({"target": target, "action": "scan", "overlay": str(tmp_path / "overlay")}, tmp_path, "ov")
    (site,) = doc["sites"]
    assert site["file"] == "mend_warm_pkg/model.py" and site["overlay"]
    files = [frame["file"] for frame in site["stack"]]
    assert "mend_warm_pkg/model.py" in files
    assert not any(str(tmp_path / "overlay") in f for f in files), files


def test_stopping_an_idle_server_does_not_wait_for_its_teardown(tmp_path, monkeypatch):
    """With every reply read, the server holds nothing anyone waits for: stop() kills it
    instead of waiting about 1 s for its interpreter to tear torch down."""
    import signal

    from mend.worker import _WarmServer, run_workers

    target = _user_package(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEND_WORKERS", "warm")
    assert run_workers([(_scan_request(tmp_path, target), "i1")], tmp_path)[0]["graph_break_count"] == 1
    proc = _WarmServer.proc
    _WarmServer.stop()
    assert proc.returncode == -signal.SIGKILL and _WarmServer.proc is None


_ISA_SCRIPT = """import json, mend._warm as w
w._probe_vec_isa()
from torch._inductor import cpu_vec_isa as i
print(json.dumps([[str(x) for x in i.valid_vec_isa_list()], str(w._isa_cache_path())]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Inductor's vector-ISA probe is cached on Linux only")
def test_the_vector_isa_answers_are_kept_in_mends_cache(tmp_path):
    """The warm server probes the C++ compiler's vector ISAs once per machine and keeps the
    answers in MEND_CACHE_DIR; a later server reads them instead of compiling. Shown by
    flipping every answer in the file: the next server believes the file."""
    import subprocess

    env = dict(os.environ, MEND_CACHE_DIR=str(tmp_path))

    def server_isas():
        run = subprocess.run([sys.executable, "-c", _ISA_SCRIPT], capture_output=True, text=True, env=env, timeout=300)
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout.strip().splitlines()[-1])

    probed, path = server_isas()
    answers = json.loads(Path(path).read_text())
    assert Path(path).parent == tmp_path and {k for k, v in answers.items() if v} == set(probed)
    if not answers:
        pytest.skip("this CPU offers no vector ISA that Inductor probes")
    Path(path).write_text(json.dumps({k: not v for k, v in answers.items()}))
    believed, _ = server_isas()
    assert set(believed) == {k for k, v in answers.items() if not v}
    Path(path).write_text("not json")  # an unreadable file is probed again, and rewritten
    again, _ = server_isas()
    assert again == probed and json.loads(Path(path).read_text()) == answers
