"""The large-frames Fast DDS profile: what it holds, that Fast DDS loads it, who gets it."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.ros_domains import CONFIG_TESTS, domain

from sequence_ai_ros.params import launch as node_launch

# Starts processes or ROS nodes: `-m "not slow"` leaves it out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
PROFILE = ROOT / node_launch.DDS_PROFILE_FILE
FRAME_BYTES = 1280 * 720 * 3
NS = {"dds": "http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles"}


def test_profile_gives_shared_memory_room_for_many_frames_and_keeps_udp() -> None:
    root = ET.parse(PROFILE).getroot()
    descriptors = {
        d.findtext("dds:transport_id", namespaces=NS): d
        for d in root.iterfind(".//dds:transport_descriptor", NS)
    }
    kinds = {name: d.findtext("dds:type", namespaces=NS) for name, d in descriptors.items()}
    assert sorted(kinds.values()) == ["SHM", "UDPv4"]
    (shm,) = [d for d in descriptors.values() if d.findtext("dds:type", namespaces=NS) == "SHM"]
    assert int(shm.findtext("dds:segment_size", namespaces=NS) or 0) >= 10 * FRAME_BYTES
    (participant,) = root.iterfind(".//dds:participant", NS)
    assert participant.get("is_default_profile") == "true"
    assert participant.findtext(".//dds:useBuiltinTransports", namespaces=NS) == "false"
    used = [e.text for e in participant.iterfind(".//dds:userTransports/dds:transport_id", NS)]
    assert sorted(used) == sorted(descriptors)


def test_fast_dds_loads_it_and_maps_the_large_segment() -> None:
    pytest.importorskip("rclpy")
    # A process with the profile creates a node; the new /dev/shm segments show what it mapped.
    probe = (
        "import os, rclpy\n"
        "before = set(os.listdir('/dev/shm'))\n"
        "rclpy.init(); node = rclpy.create_node('profile_probe')\n"
        "sizes = [os.path.getsize('/dev/shm/' + f) for f in set(os.listdir('/dev/shm')) - before]\n"
        "print(max(sizes, default=0)); node.destroy_node(); rclpy.shutdown()\n"
    )
    env = {**os.environ, "ROS_DOMAIN_ID": str(domain(CONFIG_TESTS))}
    for name in node_launch.DDS_PROFILE_ENVS:
        env.pop(name, None)
    env.update(node_launch.dds_profile_env({}))
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Error" not in done.stderr, done.stderr  # Fast DDS reports a bad profile as an Error
    assert int(done.stdout.split()[-1]) >= 10 * FRAME_BYTES


def test_every_ros_process_of_the_plan_gets_the_profile_and_the_gateway_does_not() -> None:
    expected = node_launch.dds_profile_env({})
    assert set(expected) == set(node_launch.DDS_PROFILE_ENVS)
    assert all(Path(path) == PROFILE for path in expected.values())
    for given in ({}, {"sim": "true"}):
        launch = node_launch.launch_for(given)
        for process in launch.processes:
            env = {k: v for k, v in process.env.items() if k in node_launch.DDS_PROFILE_ENVS}
            assert env == (expected if process.node_name else {}), process.label


def test_a_profile_the_environment_names_is_left_alone() -> None:
    for name in node_launch.DDS_PROFILE_ENVS:
        assert node_launch.dds_profile_env({name: "/robot/own_profile.xml"}) == {}


def test_profile_is_installed_to_share_for_the_launch_file() -> None:
    packages = pytest.importorskip("ament_index_python.packages")
    share = Path(packages.get_package_share_directory(node_launch.PACKAGE))
    installed = share / node_launch.DDS_PROFILE_FILE
    assert installed.is_file(), f"{installed} missing: rebuild with `make setup`"
    assert installed.read_text() == PROFILE.read_text()
