"""Reliability round 4 beside the arm (issue 33 items 5, 8, 9), each a row of the fault matrix:
pruning leaves a user's bag in record_dir alone, a killed recording is repaired when a recorder
next starts, the episode tools answer every unreadable entry with one line, and the gateway's
training API refuses oversized fields and never reads a dataset on its event loop."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.episode_files import (
    KILLED_MESSAGES,
    bad_entries,
    killed_recording,
    opens_in_mcap_and_rosbags,
    start_recorder,
    users_bag,
    write_episode,
)
from support.gateway_fixture import run_gateway
from support.gateway_support import PI05
from support.node_harness import SAG, node_parameters
from support.ros_support import NodeSystem, holds_until_next_goal, key_file_for
from support.safety_support import (
    FILES_CELLS,
    FILES_SIDE,
    TRAINING_CELLS,
    TRAINING_SIDE,
    MatrixRow,
    NodeCell,
    invalid_arm_commands,
    jumps,
    new_threads,
    record,
)
from support.waiting import wait_for

from sequence_ai_gateway.service.training import MAX_ACTIVE_JOBS_PER_KEY, MAX_INFO_JSON_BYTES
from sequence_ai_lab.episodes import reader
from sequence_ai_lab.episodes.tools import PROG, main
from sequence_ai_ros.episodes.folder import folder_id
from sequence_ai_ros.params.spec_table import SPECS

pytest.importorskip("rosbags")

GOAL_S = 30.0
GOAL_ACTIONS = 16
MB = 1_000_000
BIG_URI_SUBMITS = 100


def _row(cells: tuple[NodeCell, ...], side: str, name: str) -> MatrixRow:
    (cell,) = [c for c in cells if c.name == name]
    return record(side, cell, cell.expected)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----- 5. pruning spares what the recorder did not write -----


def test_a_users_bag_in_record_dir_survives_a_recorded_goal(
    safety_ros_context: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "episodes"
    folder.mkdir()
    mine = folder_id(folder)
    precious = users_bag(folder / "0000_my_precious_bag.mcap", 1_200_000, like_episode=True)
    before = _digest(precious)
    old = [
        write_episode(
            folder / f"2026010{k}T000000_000000Z_pi05-droid_old.mcap", mine, pad_bytes=600_000
        )
        for k in (1, 2)
    ]
    row = _row(FILES_CELLS, FILES_SIDE, "foreign_mcap_pruned")
    nodes = NodeSystem(safety_ros_context, "files_prune")
    with run_gateway() as gw:
        try:
            _, arm = nodes.start(
                **node_parameters(
                    gw.url,
                    key_file_for(tmp_path, gw.api_key),
                    record="goals",
                    record_dir=str(folder),
                    record_max_mb=1.0,
                )
            )
            arm.configure_and_activate()
            threads = threading.enumerate()
            start = arm.command_count()
            handle, _ = arm.send_goal("a recorded goal", GOAL_S, GOAL_ACTIONS)
            arm.result(handle)
            wait_for(
                lambda: (v := arm.node_status()) and v["recording"].startswith("last "),
                what="the goal's episode closed",
            )
            intact = precious.exists() and _digest(precious) == before
            pruned = sum(not p.exists() for p in old)
            row.observed = (
                f"user's file {'intact' if intact else 'GONE'}; {pruned} own "
                f"episode{'s' if pruned != 1 else ''} pruned"
            )
            commands = arm.commands_since(start)
            row.invalid_steps = len(invalid_arm_commands([c.values for c in commands])) + len(
                jumps(commands, SPECS["max_step"].default, SAG)
            )
            ignore = nodes.pool_prefixes()
            wait_for(lambda: not new_threads(threads, ignore), what="the goal's threads to end")
            row.leaked = len(new_threads(threads, ignore))
            next_start = arm.command_count()
            handle, _ = arm.send_goal("the goal after the fault", GOAL_S, GOAL_ACTIONS)
            _, result = arm.result(handle)
            row.next_run = result.reason
            row.holds = holds_until_next_goal(arm, start, next_start)
        finally:
            nodes.close()
    assert row.verdict == "pass", row
    assert sorted(p.name for p in folder.glob("*.mcap"))[:2] == [precious.name, old[1].name]


# ----- 8. a killed recording, and what the tools make of unreadable entries -----


@pytest.mark.slow
def test_a_killed_recording_is_repaired_when_a_recorder_next_starts(tmp_path: Path) -> None:
    row = _row(FILES_CELLS, FILES_SIDE, "killed_recording")
    path = killed_recording(
        tmp_path / "20261201T000000_000000Z_pi05-droid_goal.mcap", folder_id(tmp_path)
    )
    threads = threading.enumerate()
    said: list[str] = []
    errors: list[str] = []
    start_recorder(tmp_path, said.append, errors.append).close(30.0)
    repaired = reader.read(path).finished and not errors and len(said) == 1
    opened = opens_in_mcap_and_rosbags(path) if repaired else 0
    row.observed = (
        "repaired at start; opens in mcap and rosbags"
        if repaired and opened == KILLED_MESSAGES
        else f"finished {reader.read(path).finished}, errors {errors}"
    )
    row.holds = row.invalid_steps = 0  # no arm: nothing was commanded
    row.leaked = len(new_threads(threads))
    row.next_run = f"exit {main(['show', str(path)])}"
    assert row.verdict == "pass", row


def test_the_tools_answer_each_unreadable_entry_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = _row(FILES_CELLS, FILES_SIDE, "unreadable_entries")
    mine = folder_id(tmp_path)
    entries = bad_entries(tmp_path, mine)
    threads = threading.enumerate()
    wrong = []
    for kind, path in entries.items():
        for verb in ("show", "plot"):
            code = main([verb, str(path)])
            said = _said(capsys)
            if code != 1 or len(said) != 1 or str(path) not in said[0]:
                wrong.append(f"{verb} {kind}: exit {code}, {said}")
    code = main(["list", str(tmp_path)])
    said = _said(capsys)
    if code != 1 or len(said) != len(entries) - 1:  # the missing path is not in the folder
        wrong.append(f"list: exit {code}, {said}")
    row.observed = "; ".join(wrong) or "one stderr line naming each, exit 1, no traceback"
    row.holds = row.invalid_steps = 0  # no arm: nothing was commanded
    row.leaked = len(new_threads(threads))
    good = write_episode(tmp_path / "20261201T000000_000000Z_pi05-droid_goal.mcap", mine)
    row.next_run = f"exit {main(['show', str(good)])}"
    assert row.verdict == "pass", row


def _said(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The tool's lines on stderr (a ROS node of an earlier test may log there too)."""
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith(PROG)]


# ----- 9. the training API's bounds -----


@pytest.fixture(scope="module")
def gateway() -> Iterator[Any]:
    with run_gateway() as handle:
        yield handle


def _submit(http: httpx.Client, key: str, **changes: Any) -> httpx.Response:
    body = {"base_model": PI05, "dataset": "s3://lab/episodes", "method": "lora", **changes}
    return http.post("/v1/train", json=body, headers={"Authorization": f"Bearer {key}"})


def _training_row(
    gateway: Any, name: str, fault: Callable[[httpx.Client], str], following: dict[str, str]
) -> None:
    """Cause the fault, then a well-formed submit (`following`'s fields): the row's figures."""
    gateway.reset()
    row = _row(TRAINING_CELLS, TRAINING_SIDE, name)
    threads = threading.enumerate()
    with httpx.Client(base_url=gateway.url, trust_env=False, timeout=30.0) as http:
        row.observed = fault(http)
        row.holds = row.invalid_steps = 0  # no arm: nothing was commanded
        wait_for(lambda: not new_threads(threads), what="the requests' threads to end")
        row.leaked = len(new_threads(threads))
        after = _submit(http, gateway.api_key, **following)
        row.next_run = "accepted" if after.status_code == 200 else f"{after.status_code}"
    assert row.verdict == "pass", row


def _listed(http: httpx.Client, key: str) -> int:
    answer = http.get("/v1/train", headers={"Authorization": f"Bearer {key}"})
    return len(answer.json()["data"])


@pytest.mark.slow  # over half a second of wall time
def test_submits_with_a_1_9_mb_dataset_uri_are_refused_and_keep_nothing(gateway: Any) -> None:
    def fault(http: httpx.Client) -> str:
        uri = "s3://lab/" + "x" * 1_900_000
        answers = [_submit(http, gateway.api_key, dataset=uri) for _ in range(BIG_URI_SUBMITS)]
        named = sum(
            a.status_code == 422 and a.json()["detail"].startswith("dataset is ") for a in answers
        )
        return f"{named} x 422 naming dataset; {_listed(http, gateway.api_key)} jobs kept"

    _training_row(gateway, "dataset_uri_1_9_mb", fault, {})


def test_a_326_character_base_model_is_refused(gateway: Any) -> None:
    def fault(http: httpx.Client) -> str:
        answer = _submit(http, gateway.api_key, base_model="accounts/sequences/models/" + "p" * 300)
        named = answer.status_code == 422 and answer.json()["detail"].startswith("base_model")
        return "422 naming base_model" if named else f"{answer.status_code} {answer.text[:80]}"

    _training_row(gateway, "base_model_300_chars", fault, {})


@pytest.mark.slow  # over half a second of wall time
def test_a_submit_past_the_keys_active_jobs_is_429(gateway: Any) -> None:
    def fault(http: httpx.Client) -> str:
        for _ in range(MAX_ACTIVE_JOBS_PER_KEY):
            assert _submit(http, gateway.api_key).status_code == 200
        answer = _submit(http, gateway.api_key)
        # One cancelled makes room for the next submit.
        oldest = http.get(
            "/v1/train", params={"limit": 1}, headers={"Authorization": f"Bearer {gateway.api_key}"}
        )
        http.delete(
            f"/v1/train/{oldest.json()['data'][0]['id']}",
            headers={"Authorization": f"Bearer {gateway.api_key}"},
        )
        named = (
            answer.status_code == 429
            and f"at most {MAX_ACTIVE_JOBS_PER_KEY}" in answer.json()["detail"]
        )
        return "429 naming the bound" if named else f"{answer.status_code} {answer.text[:80]}"

    _training_row(gateway, "job_flood", fault, {})


def _fifo(info: Path) -> None:
    os.mkfifo(info)


def _over_bound(info: Path) -> None:
    info.write_bytes(b"")
    os.truncate(info, MAX_INFO_JSON_BYTES + 1)


@pytest.mark.parametrize(
    "name, make, said",
    [
        ("fifo_info_json", _fifo, "not a regular file"),
        ("info_json_over_1_mb", _over_bound, f"at most {MAX_INFO_JSON_BYTES}"),
    ],
)
def test_a_dataset_info_json_that_is_no_small_regular_file_is_refused_and_the_gateway_answers(
    gateway: Any, tmp_path: Path, name: str, make: Callable[[Path], object], said: str
) -> None:
    (tmp_path / "bad" / "meta").mkdir(parents=True)
    make(tmp_path / "bad" / "meta" / "info.json")
    (tmp_path / "good" / "meta").mkdir(parents=True)
    (tmp_path / "good" / "meta" / "info.json").write_text('{"total_frames": 30}')

    def fault(http: httpx.Client) -> str:
        answer = _submit(http, gateway.api_key, dataset=(tmp_path / "bad").as_uri())
        health = http.get("/v1/health").status_code
        named = (
            answer.status_code == 422
            and "meta/info.json" in answer.json()["detail"]
            and said in answer.json()["detail"]
        )
        if named and health == 200:
            (cell,) = [c for c in TRAINING_CELLS if c.name == name]
            return cell.expected
        return f"{answer.status_code} {answer.text[:120]}; health {health}"

    _training_row(gateway, name, fault, {"dataset": (tmp_path / "good").as_uri()})
