"""Options as values: one ``Connection`` for every entry point, ``RunOptions`` for run/act;
the keyword forms stay, and mixing the two is refused."""

from __future__ import annotations

import dataclasses

import pytest
from support.policy_support import PI05, Robot

import sequence_ai
from sequence_ai import Connection, RunOptions


def connection_to(gateway) -> Connection:
    return Connection(api_key=gateway.api_key, base_url=gateway.url)


def test_a_connection_is_a_frozen_value_whose_repr_hides_the_key() -> None:
    where = Connection(api_key="seq_secret_value_123", base_url="http://127.0.0.1:1")
    assert "seq_secret_value_123" not in repr(where) and "api_key=set" in repr(where)
    with pytest.raises(dataclasses.FrozenInstanceError):
        where.base_url = "http://elsewhere"  # type: ignore[misc]
    assert dataclasses.replace(where, timeout_s=2.0).timeout_s == 2.0
    with pytest.raises(TypeError, match="allow_insecure is 'yes'"):
        Connection(allow_insecure="yes")  # type: ignore[arg-type]


def test_every_entry_point_takes_a_connection(gw) -> None:
    where = connection_to(gw)
    assert [row.short_id for row in sequence_ai.models(endpoint="act", connection=where)]
    reply = sequence_ai.chat(
        "sim-planner", [{"role": "user", "content": "Task: pick up the cup"}], connection=where
    )
    assert reply.text
    assert (
        sequence_ai.estimate_training_cost("pi05-droid", frames=1000, epochs=1, connection=where)
        > 0
    )
    assert isinstance(sequence_ai.training_jobs(connection=where), list)
    with sequence_ai.connect(PI05, connection=where) as policy:
        assert policy.ready()[0]
        assert gw.url in repr(policy)


def test_the_keyword_forms_still_reach_the_same_service(gw) -> None:
    by_value = sequence_ai.models(connection=connection_to(gw))
    by_keywords = sequence_ai.models(api_key=gw.api_key, base_url=gw.url, timeout_s=5.0)
    assert [row.id for row in by_keywords] == [row.id for row in by_value]


def test_mixing_a_connection_with_its_keywords_or_a_typo_is_refused(gw) -> None:
    where = connection_to(gw)
    with pytest.raises(TypeError, match="connection= and api_key="):
        sequence_ai.connect(PI05, connection=where, api_key=gw.api_key)
    with pytest.raises(TypeError, match="'base_ulr'; did you mean 'base_url'"):
        sequence_ai.models(base_ulr=gw.url)
    with pytest.raises(TypeError, match="expected a sequence_ai.Connection"):
        sequence_ai.train("pi05-droid", "s3://x", connection={"base_url": gw.url})
    assert gw.act_requests() == 0


def test_run_and_act_take_run_options_whole(gw) -> None:
    robot = Robot()
    options = RunOptions(
        observe=robot.observe, act=robot.act, max_actions=6, validate=robot.validate
    )
    with sequence_ai.connect(PI05, connection=connection_to(gw)) as policy:
        assert policy.run(options=options).actions == 6
        bounded = dataclasses.replace(options, max_actions=None, max_seconds=30.0)
        outcome = policy.act("wave", options=dataclasses.replace(bounded, until=lambda: True))
        assert outcome.ending is sequence_ai.Ending.UNTIL
    assert len(robot.acts) == 6


def test_run_options_and_keywords_do_not_mix(gw) -> None:
    robot = Robot()
    options = RunOptions(observe=robot.observe, act=robot.act, max_actions=3)
    with sequence_ai.connect(PI05, connection=connection_to(gw)) as policy:
        with pytest.raises(TypeError, match="options= and max_actions"):
            policy.run(options=options, max_actions=4)
        with pytest.raises(TypeError, match="options= and observe"):
            policy.run(robot.observe, options=options)
        with pytest.raises(TypeError, match="needs max_actions"):
            policy.run(options=dataclasses.replace(options, max_actions=None))
        with pytest.raises(ValueError, match="do not pass max_actions"):
            policy.act("wave", options=dataclasses.replace(options, max_seconds=1.0))
        with pytest.raises(TypeError, match="max_seconds"):
            policy.act("wave", options=dataclasses.replace(options, max_actions=None))
        with pytest.raises(TypeError, match="expected a sequence_ai.RunOptions"):
            policy.run(options={"max_actions": 3})  # type: ignore[arg-type]
    assert robot.observations == [] and gw.act_requests() == 0
