"""ament_python package `sequence_ai_ros`: the sequence_ai client, the ROS 2 node, the local
gateway (`sequence_ai_gateway`, a service of its own whose dependencies are the `gateway` extra)
and the lab (`sequence_ai_lab`: the simulated robots, the demo, the evaluation, the episode tools).

The dependency lists below are the single source of truth: the Makefile reads them with
.ci/requirements.py so the development venv gets them without installing this package.
"""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "sequence_ai_ros"
# sequence_ai_descriptions: robots as data (robot.json per robot), read by the gateway and the sim.
PYTHON_PACKAGES = (
    "sequence_ai", "sequence_ai_gateway", "sequence_ai_descriptions", PACKAGE, "sequence_ai_lab"
)
DESCRIPTIONS = sorted(glob("sequence_ai_descriptions/*/robot.json"))

# The client needs httpx, and msgpack for a deployment's worker bodies (1.0.3: Ubuntu 22.04's);
# numpy/Pillow are only for JPEG encoding and reading arrays as arrays.
INSTALL_REQUIRES = ["httpx", "msgpack>=1.0.3"]

# What the Python 3.9 venv holds to run the client tests: proves the client needs only httpx.
CLIENT_TEST = ["pytest>=7", "pytest-timeout>=2.1", "hypothesis>=6.50"]

EXTRAS_REQUIRE = {
    # sequence-base: the platform's wire contract (pydantic models, msgpack) the gateway's
    # platform room checks its answers with; cryptography: its worker's self-signed certificate.
    "gateway": ["fastapi>=0.100", "uvicorn>=0.22", "pillow>=9", "numpy>=1.21", "trustme>=1.0",
                "sequence-base==0.7.0", "cryptography>=3.4"],
    "image": ["pillow>=9", "numpy>=1.21"],
    # record: goals and `python -m sequence_ai_lab.episodes`. mcap 1.6 is the first whose
    # Writer.flush() closes a chunk on demand (a killed node's file reads back to it).
    "episodes": ["mcap>=1.6", "matplotlib>=3.5"],
    # `export-lerobot` in its own environment (Python >= 3.12 and torch: make lerobot-venv):
    # LeRobot's dataset writer (v3 datasets from 0.4), rosbags to decode without rclpy.
    "lerobot": ["lerobot[dataset]>=0.4", "mcap>=1.6", "rosbags>=0.11", "pillow>=9", "numpy>=1.21"],
    # rosbags: the tests open the episode files with a second, independent reader.
    "test": CLIENT_TEST + ["schemathesis>=3.19", "matplotlib>=3.5", "rosbags>=0.11"],
    "client-test": CLIENT_TEST,
    # mypy 1.6: untyped_calls_exclude (mypy.ini); types-PyYAML: joint_limits.py reads YAML.
    "lint": ["ruff>=0.12", "vermin>=1.6", "mypy>=1.6", "types-PyYAML"],
    # sim_robot's physics world (physics: mujoco): MuJoCo's wheels; 3.17.0 is the version tested
    # (MjSpec's attach_body and set_to_position). The Panda's model comes from SIM_ASSETS.
    "sim": ["mujoco>=3.17"],
}

# The Panda and its hand (XML and meshes) as robosuite ships them. Installed with
# `pip install --no-deps` (the Makefile's setup does): only the asset files are read, found with
# importlib.util.find_spec and never imported, and robosuite's own dependencies (its rendering and
# learning stacks) are heavy and unused. Not an extra for that reason: pip would pull them in.
SIM_ASSETS = ["robosuite==1.5.2"]

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[n for p in PYTHON_PACKAGES for n in (p, p + ".*")]),
    package_data={"sequence_ai_descriptions": ["*/robot.json", "*/README.md"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        # Globbed so the package builds whether or not launch and config files exist yet.
        ("share/" + PACKAGE + "/launch", sorted(glob("launch/*.launch.py"))),
        ("share/" + PACKAGE + "/config", sorted(glob("config/*.yaml") + glob("config/*.xml"))),
        ("share/" + PACKAGE + "/config/adapters", sorted(glob("config/adapters/*.yaml"))),
        # package://sequence_ai_ros/descriptions/<robot>/robot.json
        *[
            ("share/" + PACKAGE + "/descriptions/" + path.split("/")[1], [path])
            for path in DESCRIPTIONS
        ],
    ],
    install_requires=["setuptools"] + INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    python_requires=">=3.9",
    zip_safe=True,
    maintainer="sequence_ai_ros maintainers",
    maintainer_email="maintainers@sequence-ai.invalid",
    description="Drive a ROS 2 arm with a cloud vision-language-action model.",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "sequence_ai_node = sequence_ai_ros.node:main",
            "sim_robot = sequence_ai_lab.robots.sim_robot.robot:main",
            "sim_bimanual = sequence_ai_lab.robots.sim_bimanual.bimanual:main",
            "sim_cartesian = sequence_ai_lab.robots.sim_cartesian.cartesian:main",
            "preflight = sequence_ai_ros.params.preflight:main",
            "vlm_planner = sequence_ai_ros.vlm_planner:main",
            "sequence-ai-gateway = sequence_ai_gateway.__main__:main",
            "sequence-ai = sequence_ai.cli:main",
            "sequence-ai-episodes = sequence_ai_lab.episodes.tools:main",
            "evaluate = sequence_ai_lab.evaluation.cli:main",
        ],
    },
)
