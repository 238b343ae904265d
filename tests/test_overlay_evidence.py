"""Overlay.evidence: where Inductor departs from eager, the compiled candidate is judged
against the current version under Inductor (``cur``). With float inputs that run is
started with the candidate's own runs and dropped unread when it is not needed; without,
it runs only on demand. The workers are stubbed: these tests are about which run is
asked for and read, and that verdicts are those of the one-after-another order."""
from pathlib import Path

import pytest
import torch

from mend.pipeline.executors import Failed, Overlay

NAN = float("nan")


def _obs(*values):
    return {"observations": [{"setting": [],
                              "obs": ([torch.tensor(v)], "", [], [], None, [], [])} for v in values],
            "seen": {}}


class _Started:
    def __init__(self, log, names, replies):
        self.log, self.names, self.replies = log, names, replies

    def results(self):
        self.log.append(("read", tuple(self.names)))
        return [self.replies[n] for n in self.names]

    def drop(self):
        self.log.append(("drop", tuple(self.names)))


def _overlay(tmp_path: Path, replies: dict, float_inputs: bool):
    ex = Overlay.__new__(Overlay)  # the stubs below stand in for the warm server
    log: list = []

    def start(requests, tmp):
        names = [tag.rstrip("0123456789") for _, tag in requests]
        log.append(("start", tuple(names)))
        return _Started(log, names, replies)

    def run_one(request, tmp, tag):
        log.append(("run", tag.rstrip("0123456789")))
        reply = replies[tag.rstrip("0123456789")]
        if isinstance(reply, Exception):
            raise reply
        return reply

    ex.start_workers, ex.run_worker = start, run_one
    ex.run_workers = lambda requests, tmp: start(requests, tmp).results()
    ex.spec, ex.tmp, ex.seed, ex.n, ex.early = "hf:stub", tmp_path, 0, 1, None
    ex.inputs, ex.inputs_path, ex.float_inputs = [((), {})], tmp_path / "inputs.pt", float_inputs
    ex.ref_dir = ex.cand_dir = ex.emit_dir = tmp_path
    ex.cur_files, ex.trial, ex.rel = {"m.py": "x = 1\n"}, {"m.py": "x = 2\n"}, "m.py"
    return ex, log


def _replies(emit, cur):
    return {"emit": _obs(*emit), "ref": _obs(1.0, NAN), "cand": _obs(1.0, NAN), "scan": {"sites": []},
            "cur": _obs(*cur), "ref_ac": _obs(1.0), "cand_ac": _obs(1.0)}


@pytest.mark.parametrize("float_inputs", [True, False])
def test_inductor_departing_from_eager_is_judged_against_the_current_version_under_inductor(tmp_path, float_inputs):
    # eager gives NaN where Inductor gives 0.0, for the current version and the candidate alike
    ex, log = _overlay(tmp_path, _replies(emit=(1.0, 0.0), cur=(1.0, 0.0)), float_inputs)
    ev = ex.evidence([], [])
    assert ev["passed"]
    if float_inputs:  # started beside the candidate's runs, then read
        assert log[:2] == [("start", ("emit", "ref", "cand", "ref_ac", "cand_ac", "scan")), ("start", ("cur",))]
        assert ("read", ("cur",)) in log and ("drop", ("cur",)) not in log
    else:  # asked for only when needed
        assert ("start", ("cur",)) not in log and ("run", "cur") in log


def test_a_candidate_that_departs_from_the_current_version_under_inductor_fails(tmp_path):
    ex, _ = _overlay(tmp_path, _replies(emit=(1.0, 0.0), cur=(1.0, 5.0)), True)
    with pytest.raises(Failed, match="differential test failed"):
        ex.evidence([], [])


def test_the_started_current_run_is_dropped_unread_when_eager_agrees(tmp_path):
    replies = _replies(emit=(1.0, NAN), cur=(1.0, NAN))
    ex, log = _overlay(tmp_path, replies, True)
    assert ex.evidence([], [])["passed"]
    assert ("drop", ("cur",)) in log and ("read", ("cur",)) not in log


def test_a_candidate_that_differs_under_autocast_fails(tmp_path):
    """The example once more under torch.autocast(bfloat16), eager: bit-exact, or the candidate
    fails naming autocast (a side computed in bfloat16 there, where torch.where promotes)."""
    replies = _replies(emit=(1.0, NAN), cur=(1.0, NAN))
    ex, _ = _overlay(tmp_path, {**replies, "cand_ac": _obs(1.0078125)}, True)
    with pytest.raises(Failed, match=r"under autocast\(.*bfloat16\), eager: .*values differ"):
        ex.evidence([], [])
    ex, _ = _overlay(tmp_path, replies, True)
    assert "eager/autocast(<the inputs' device>, bfloat16)/example" in ex.evidence([], [])["modes"]


def test_the_autocast_runs_force_the_predicates_as_the_eager_runs_do(tmp_path):
    """helper-38: the example may take the float32 side only; the autocast runs force each
    predicate both ways like the eager ones (the worker runs every setting of `force`)."""
    for force in ([], [12]):
        requests = {}
        replies = {**_replies(emit=(1.0, NAN), cur=(1.0, NAN)), "candc": _obs(1.0, NAN)}
        ex, _ = _overlay(tmp_path, replies, True)
        start = ex.start_workers

        def record(reqs, tmp, start=start, requests=requests):
            requests.update({tag.rstrip("0123456789"): req for req, tag in reqs})
            return start(reqs, tmp)

        ex.start_workers = record
        assert ex.evidence(force, [])["passed"]
        assert requests["ref_ac"]["force"] == requests["cand_ac"]["force"] == requests["ref"]["force"] == force
        assert requests["cand_ac"]["autocast"] == "bfloat16" and requests["ref_ac"]["limit"] == 1


def test_a_failed_current_run_fails_the_candidate_with_its_reason(tmp_path):
    from mend.errors import MendError

    replies = _replies(emit=(1.0, 0.0), cur=(1.0, 0.0))
    replies["cur"] = MendError("verification worker failed for hf:stub: boom")
    ex, _ = _overlay(tmp_path, replies, True)
    with pytest.raises(Failed, match="boom"):
        ex.evidence([], [])


# -- in process: Dynamo's own error while tracing ---------------------------------------------

class _Sub(torch.nn.Module):
    def forward(self, a, b):
        return a * 2 - b


class _SubOnlyCompiled(torch.nn.Module):
    """Like _Sub eagerly, but under torch.compile it also subtracts ``a - b[:2]`` (a shape
    error only compiled code meets)."""

    def forward(self, a, b):
        if torch.compiler.is_compiling():
            a = a + (a - b[:2]) * 0
        return a * 2 - b


def test_dynamo_tracing_errors_are_compared_against_the_compiled_original():
    from verifier.differential import differential_test

    good = (torch.randn(4), torch.randn(4))
    bad = (torch.randn(4), torch.randn(3))   # a - b raises in eager; Dynamo raises TorchRuntimeError
    # the same model: both raise on `bad` under compile, with Dynamo's exception: accepted
    ev = differential_test(_Sub(), _Sub(), good, extra_inputs=[bad], max_examples=2, train=False)
    assert ev.passed, ev
    # a mended model that raises only when compiled, on inputs where the original does not
    ev = differential_test(_Sub(), _SubOnlyCompiled(), (torch.randn(4), torch.randn(1)),
                           extra_inputs=[(torch.randn(4), torch.randn(4))], max_examples=2, train=False)
    assert not ev.passed and "TorchRuntimeError" in (ev.reason or ""), ev


def test_per_sample_1d_inputs_follow_the_drawn_batch():
    from hypothesis import given, settings

    from verifier.differential import inputs_strategy

    seen = []

    @settings(max_examples=30, deadline=None, database=None)
    @given(inputs_strategy((torch.randn(16, 8), torch.randn(16), torch.randn(8), torch.randn(5)), edge=False))
    def draw(values):
        x, per_sample, per_feature, other = values
        seen.append(x.shape[0])
        assert per_sample.shape == (x.shape[0],)          # labels/returns beside features: resized with them
        assert per_feature.shape == (8,) and other.shape == (5,)

    draw()
    assert len(set(seen)) > 1   # the batch did vary

    @settings(max_examples=10, deadline=None, database=None)
    @given(inputs_strategy((torch.randn(16),), edge=False))
    def alone(values):
        assert values[0].shape == (16,)   # no tensor of two or more dimensions shows a batch: kept

    alone()


def test_the_worker_observes_under_autocast_when_asked(tmp_path):
    """`autocast` in an observe request runs the inputs under torch.autocast (the linear side of
    the fixture is bfloat16 there), `limit` keeps the first inputs only."""
    from mend.worker import _observe_all
    from tests.conftest import FIXTURES

    torch.save([((torch.ones(2, 4),), {}), ((torch.ones(3, 4),), {})], tmp_path / "inputs.pt")
    base = {"target": str(FIXTURES / "autocast_branch_dtype.py"), "inputs": str(tmp_path / "inputs.pt")}
    plain = _observe_all(base)["observations"]
    amp = _observe_all({**base, "autocast": "bfloat16", "limit": 1})["observations"]
    assert [o["obs"][0][0].dtype for o in plain] == [torch.float32, torch.float32]
    assert [o["obs"][0][0].dtype for o in amp] == [torch.bfloat16]
