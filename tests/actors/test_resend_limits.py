"""The resend limits, counted exactly without Ray: the coordinator resends a turn whose agent
group died at most ``call_retries`` times, and an agent resends a request whose replica died at
most ``AgentSetup.retries`` times, through the actors' own classes with fake handles."""

import asyncio

import pytest
import ray

from actors.agent_actor import AgentGroupActor, AgentSetup
from actors.coordinator_actor import CoordinatorActor
from engine.config import RunConfig
from engine.prompts import PromptSet
from engine.protocols import AgentCall
from engine.records import GenRequest, GenResult, Turn
from engine.tasks import Question

Q = Question(qid="q1", task="numeric", text="What is 1+1?", gold="2")


def plain(actor_class):
    """An instance of a ``@ray.remote`` class's own code, outside Ray (its methods called directly)."""
    return actor_class.__ray_metadata__.modified_class()


class Remote:
    """A fake actor method: ``.remote(...)`` calls ``fn``."""

    def __init__(self, fn):
        self.remote = fn


class DyingReplica:
    """A replica handle whose first ``deaths`` streams die (RayActorError); later ones answer."""

    def __init__(self, deaths: int):
        self.deaths, self.streams = deaths, 0
        self.generate_stream = Remote(self._stream)

    async def _stream(self, requests):
        self.streams += 1
        if self.streams <= self.deaths:
            raise ray.exceptions.RayActorError()

        async def chunk():
            return [(i, GenResult(f"reply {r.seed}", 3, 2, 0.0)) for i, r in enumerate(requests)]

        yield chunk()


def generate(retries: int, deaths: int):
    replica = DyingReplica(deaths)
    spec = RunConfig.flat(agents=1, backend="simulated").agent_specs()[0]
    setup = AgentSetup(0, spec, PromptSet.for_task("numeric"), True, replica, retries=retries)
    req = GenRequest([{"role": "user", "content": "x"}], seed=9)
    res = asyncio.run(plain(AgentGroupActor)._generate(setup, replica, req))
    return res, replica.streams


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_an_agent_sends_a_request_to_a_dead_replica_exactly_retries_plus_one_times(retries):
    res, sent = generate(retries, deaths=10)
    assert sent == retries + 1, (retries, sent)
    assert res.error is not None and res.finish_reason == "error" and res.text == ""
    assert f"after {retries + 1} attempts" in res.error and "RayActorError" in res.error


def test_an_agent_gets_the_reply_of_its_last_allowed_resend():
    res, sent = generate(retries=2, deaths=2)
    assert sent == 3 and res.error is None and res.text == "reply 9"


class DyingGroup:
    """An agent group handle whose turn streams all die (RayActorError); counts what it gets."""

    def __init__(self):
        self.configures, self.streams = 0, 0
        self.configure = Remote(self._configure)
        self.turns = Remote(self._turns)

    async def _configure(self, setups):
        self.configures += 1
        return 1234

    async def _turns(self, turns):
        self.streams += 1
        raise ray.exceptions.RayActorError()
        yield  # an async generator, as the actor's streamed method


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_the_coordinator_resends_a_turn_of_a_dead_group_exactly_call_retries_times(retries):
    group = DyingGroup()
    coord = plain(CoordinatorActor)
    spec = RunConfig.flat(agents=1, backend="simulated").agent_specs()[0]
    setup = AgentSetup(0, spec, PromptSet.for_task("numeric"), True, replica=None)
    cfg = RunConfig.flat(agents=1, backend="simulated", call_retries=retries)

    async def go():
        await coord.setup(cfg, "run", [group], [[setup]], writer=None, backend_label="sim", simulated=True)
        return await coord._call(Turn(Q, AgentCall(agent=0, stage="first"), 0, 5))

    out = asyncio.run(go())
    assert group.streams == retries + 1, (retries, group.streams)
    assert group.configures == 1 + retries  # the run's setup, then once before each resend
    assert coord.progress_state["call_retries"] == retries and coord.progress_state["agent_restores"] == retries
    assert out.record.error.startswith("RayActorError") and out.record.finish_reason == "error"
    assert (out.record.question_id, out.record.round, out.record.agent_id) == ("q1", 0, 0)
