"""End-to-end runs on real Ray actors with the SIMULATED backend (fast, seeded)."""

import pyarrow.dataset as ds
import pytest

from actors.driver import run
from engine.config import RunConfig
from engine.extract import extract_answer
from engine.results import read_table

pytestmark = pytest.mark.ray


def sim(tmp_path, name, **kw):
    base = dict(backend="simulated", limit=20, agents=6, rounds=3, progress=False, out=str(tmp_path / name))
    base.update(kw)
    return RunConfig.flat(**base)


@pytest.fixture(scope="module")
def mad_and_sparse(ray_local, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    mad = run(sim(tmp, "mad", protocol="mad"))
    sparse = run(sim(tmp, "sparse", protocol="sparse", density=0.4))
    return mad, sparse


def test_mad_writes_every_call_and_question(mad_and_sparse):
    mad, _ = mad_and_sparse
    calls = read_table(mad.out_dir, "calls").to_pandas()
    qs = read_table(mad.out_dir, "questions").to_pandas()
    runs = read_table(mad.out_dir, "runs").to_pandas()
    assert len(calls) == 360 and len(qs) == 20 and len(runs) == 1
    assert calls.groupby("question_id").size().eq(18).all()
    assert sorted(calls["round"].unique()) == [0, 1, 2]
    # exact accounting: question totals are sums of their calls, the run total the sum of questions
    per_q = calls.groupby("question_id")[["prompt_tokens", "completion_tokens"]].sum()
    merged = qs.set_index("question_id")[["prompt_tokens", "completion_tokens"]]
    assert (per_q.sort_index() == merged.sort_index()).all().all()
    assert runs.prompt_tokens[0] == calls.prompt_tokens.sum() == mad.summary["prompt_tokens"]
    assert runs.status[0] == "finished" and runs.simulated[0]
    # every row says it is simulated
    assert calls.simulated.all() and qs.simulated.all() and (calls.backend == "simulated").all()
    # the parsed answer is what extraction reads from the stored text
    assert all(extract_answer(t, "numeric") == a for t, a in zip(calls.text, calls.answer))


def test_mad_agents_read_all_peers_and_sparse_only_neighbours(mad_and_sparse):
    mad, sparse = mad_and_sparse
    mc = read_table(mad.out_dir, "calls").to_pandas()
    sc = read_table(sparse.out_dir, "calls").to_pandas()
    later = mc[mc["round"] > 0]
    assert later.peers.map(len).eq(5).all()
    assert all(a not in list(p) for a, p in zip(later.agent_id, later.peers))
    sl = sc[sc["round"] > 0]
    ring = {i: sorted({(i - 1) % 6, (i + 1) % 6}) for i in range(6)}
    assert all(list(p) == ring[a] for a, p in zip(sl.agent_id, sl.peers))
    assert (sc[sc["round"] == 0].peers.map(len) == 0).all()


def test_sparse_saves_prompt_tokens_with_same_completions(mad_and_sparse):
    mad, sparse = mad_and_sparse
    assert sparse.summary["n_calls"] == mad.summary["n_calls"] == 360
    assert sparse.summary["completion_tokens"] == mad.summary["completion_tokens"]
    saving = 1 - sparse.summary["prompt_tokens"] / mad.summary["prompt_tokens"]
    assert 0.25 < saving < 0.6, saving


def test_rows_reach_disk_while_the_run_is_going(ray_local, tmp_path):
    seen = []
    cfg = sim(tmp_path, "stream", limit=12, agents=3, rounds=3, sim_latency_s=0.03, max_batch=4)

    def probe(state):
        path = tmp_path / "stream" / "calls"
        files = list(path.glob("*.parquet")) if path.exists() else []
        rows = ds.dataset([str(f) for f in files]).count_rows() if files else 0
        seen.append((state["questions_done"], rows))

    result = run(cfg, progress_cb=probe)
    assert result.summary["n_questions"] == 12
    assert any(done < 12 and rows > 0 for done, rows in seen), seen


def test_cot_sc_probmad_shapes(ray_local, tmp_path):
    cot = run(sim(tmp_path, "cot", protocol="cot", limit=5))
    assert cot.summary["n_calls"] == 5
    sc = run(sim(tmp_path, "sc", protocol="sc", agents=4, limit=5))
    assert sc.summary["n_calls"] == 20
    calls = read_table(sc.out_dir, "calls").to_pandas()
    assert (calls["round"] == 0).all() and (calls.kind == "first").all()
    pm = run(sim(tmp_path, "pm", protocol="probmad", density=0.5, agents=4, rounds=3, limit=10))
    pc = read_table(pm.out_dir, "calls").to_pandas()
    later = pc[pc["round"] > 0]
    frac = later.peers.map(len).sum() / (len(later) * 3)
    assert 0.3 < frac < 0.7  # each peer read with probability 0.5
    assert set(later.kind) <= {"debate", "self_check"}
    assert all((k == "self_check") == (len(p) == 0) for k, p in zip(later.kind, later.peers))


def test_same_config_same_results(ray_local, tmp_path):
    a = run(sim(tmp_path, "a", limit=6, agents=3, rounds=2))
    b = run(sim(tmp_path, "b", limit=6, agents=3, rounds=2))
    ta = read_table(a.out_dir, "calls").to_pandas().sort_values(["question_id", "round", "agent_id"])
    tb = read_table(b.out_dir, "calls").to_pandas().sort_values(["question_id", "round", "agent_id"])
    assert a.run_id == b.run_id
    assert list(ta.text) == list(tb.text)


def test_rerun_resumes_without_repeating_finished_questions(ray_local, tmp_path):
    from actors.driver import DebateRunner
    from engine.tasks import arithmetic_questions

    cfg = sim(tmp_path, "resume", limit=6, agents=3, rounds=2)
    qs = arithmetic_questions(6, seed=0)
    with DebateRunner() as runner:
        first = runner.run(cfg, questions=qs[:3])
        replica_ids = set(map(str, runner._replicas.values()))
        second = runner.run(cfg, questions=qs)  # same config, same --out: only the 3 new ones run
        assert set(map(str, runner._replicas.values())) == replica_ids  # replica reused, not restarted
    assert first.run_id == second.run_id and second.resumed == 3
    half = first.summary["completion_tokens"]  # made by the first attempt
    assert first.generated_tokens == half and second.generated_tokens == second.summary["completion_tokens"] - half
    qrows = read_table(second.out_dir, "questions").to_pandas()
    assert sorted(qrows.question_id) == sorted(q.qid for q in qs)  # each question exactly once
    assert second.summary["n_questions"] == 6 and second.summary["n_calls"] == 6 * 3 * 2
    calls = read_table(second.out_dir, "calls").to_pandas()
    assert len(calls) == 36 and calls.attempt.nunique() == 2
    assert len(read_table(second.out_dir, "runs")) == 1
    third = run(cfg, questions=qs)  # everything done: nothing is debated
    assert third.resumed == 6 and len(read_table(third.out_dir, "calls")) == 36
    assert third.generated_tokens == 0  # the summary then gives no rate (app.cli.rate_text)


def test_placement_resources_put_a_model_on_a_custom_resource(tmp_path):
    """Per-model Ray options: the run's placement_resources override the backend default."""
    from actors.layout import placement_options

    cfg = RunConfig.flat(placement_resources={"big": {"num_gpus": 1, "resources": {"strong_gpu": 1}}})
    assert placement_options(cfg, "big", {"num_cpus": 2}) == {
        "num_cpus": 2,
        "num_gpus": 1,
        "resources": {"strong_gpu": 1},
    }
    assert placement_options(cfg, "small", {"num_cpus": 2}) == {"num_cpus": 2}
    with pytest.raises(ValueError, match="unknown key"):
        placement_options(RunConfig.flat(placement_resources={"m": {"gpus": 1}}), "m", {})


def test_replica_layout_replicas_per_model_and_tensor_parallel():
    """Pure layout: K replicas per model (per-model override), agents round-robin and sticky,
    tensor parallel = a placement group of T GPU bundles whose first bundle also holds the replica
    actor's CPU and custom resources (the actor itself takes no GPU), so the actor fits its bundle."""
    from actors.layout import assign_replicas, replica_layout

    cfg = RunConfig.flat(
        backend="vllm",
        replicas=2,
        models="big*2,small*4",
        placement_resources={
            "big": {"replicas": 1, "tensor_parallel_size": 4, "resources": {"strong_gpu": 1}},
            "small": {"resources": {"weak_gpu": 1}},
        },
    )
    layout = replica_layout(cfg, ["big", "small"], gpu=True)
    assert [len(layout[m]) for m in ("big", "small")] == [1, 2]
    big, small = layout["big"][0], layout["small"][0]
    assert big.bundles == ({"CPU": 1.0, "GPU": 1.0, "strong_gpu": 1.0},) + ({"GPU": 1.0},) * 3
    assert big.backend_options["tensor_parallel_size"] == 4
    assert big.actor_options["num_gpus"] == 0 and big.actor_options["resources"] == {"strong_gpu": 1}
    for k, v in {"CPU": big.actor_options["num_cpus"], **big.actor_options["resources"]}.items():
        assert big.bundles[0][k] >= v  # the replica actor fits bundle 0 (Ray rejected it before)
    # one GPU + a custom resource: a one-bundle group, the actor holding the GPU inside it
    assert small.bundles == ({"CPU": 1.0, "GPU": 1.0, "weak_gpu": 1.0},) and small.actor_options["num_gpus"] == 1
    assert (
        small.actor_options["max_restarts"] == cfg.tuning.max_restarts
        and small.actor_options["max_task_retries"] == cfg.tuning.call_retries
    )
    placed = assign_replicas(["big", "small", "small", "big", "small", "small"], layout)
    assert [(p.model, p.index) for p in placed] == [
        ("big", 0),
        ("small", 0),
        ("small", 1),
        ("big", 0),
        ("small", 0),
        ("small", 1),
    ]
    # CPU: the node's cores are split over all replicas, no placement group; tensor parallel needs GPUs
    cpu = replica_layout(RunConfig.flat(replicas=2, replica_cpus=None), ["m"], gpu=False)["m"]
    assert len(cpu) == 2 and cpu[0].key(RunConfig()) != cpu[1].key(RunConfig()) and cpu[0].bundles == ()
    with pytest.raises(ValueError, match="tensor-parallel 2 .* needs --backend vllm and GPUs"):
        replica_layout(RunConfig.flat(backend="vllm", tensor_parallel=2, device="cpu"), ["m"], gpu=False)


def test_two_replicas_share_the_agents_and_give_the_same_results(ray_local, tmp_path):
    from actors.driver import DebateRunner

    with DebateRunner() as runner:
        one = runner.run(sim(tmp_path, "one", limit=6, agents=4, rounds=2, protocol="mad"))
        two = runner.run(sim(tmp_path, "two", limit=6, agents=4, rounds=2, protocol="mad", replicas=2))
    assert len(two.replica_stats) == 2
    # agents 0,2 -> replica 0 (kept from the first run, whose 48 requests it also counts); 1,3 -> replica 1
    assert [s["requests"] for s in two.replica_stats] == [48 + 24, 24]
    key = lambda r: (r["question_id"], r["round"], r["agent_id"], r["text"], r["prompt_tokens"])  # noqa: E731
    assert sorted(map(key, read_table(one.out_dir, "calls").to_pylist())) == sorted(
        map(key, read_table(two.out_dir, "calls").to_pylist())
    )
    assert one.run_id == two.run_id  # replicas are an engine knob: same run


def test_turns_and_requests_travel_micro_batched(ray_local, tmp_path):
    """Many questions in flight: an agent's turns share Ray calls, and so do its replica requests
    (actors/batching.py), without changing a single result."""
    from actors.driver import DebateRunner

    with DebateRunner() as runner:
        res = runner.run(sim(tmp_path, "mb", limit=20, agents=4, rounds=3, protocol="mad"))
    turns = 20 * 4 * 3
    assert res.batching["agent_turns"] == turns
    assert res.batching["agent_calls"] < turns / 2  # at least two turns per call on average
    stats = res.replica_stats[0]
    assert stats["requests"] == turns and stats["stream_calls"] < turns / 2
    assert res.summary["n_calls"] == turns and res.summary["n_errors"] == 0
