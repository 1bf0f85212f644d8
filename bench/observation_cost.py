"""Section 5: encode() cost and size per view, and the node's Image → observation path."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from typing import Any

import numpy as np

import sequence_ai
from bench.common import PI05, Context, log, noisy, perf, rendered_frame, request_bytes
from bench.report import Section, Table
from bench.stats import Summary, fmt, ratio, times
from sequence_ai_gateway.service.serving import BYTES_PER_KB, PER_KB_MS

SIZES = ((1280, 720), (640, 480))
NOISE_SIGMA = 3.0


def _time(fn: Callable[[], Any], reps: int) -> Summary:
    fn()
    samples = []
    for _ in range(reps):
        t0 = perf()
        fn()
        samples.append(perf() - t0)
    return Summary.of(samples).scaled(1000.0)


def _image_message(frame: np.ndarray) -> Any:
    from sensor_msgs.msg import Image

    msg = Image()
    msg.height, msg.width = frame.shape[:2]
    msg.encoding = "rgb8"
    msg.step = msg.width * 3
    msg.data = frame.tobytes()
    return msg


def _encode_row(model: Any, frame: np.ndarray, size: str, content: str, reps: int) -> list[str]:
    cost = _time(lambda: sequence_ai.encode(frame, model), reps)
    size_kb = len(sequence_ai.encode(frame, model)) / 1024.0
    return [size, content, fmt(cost.median), fmt(cost.p99), fmt(cost.max), fmt(size_kb, 1)]


def _breakdown(
    frame: np.ndarray, target: tuple[int, int], reps: int
) -> tuple[list[list[str]], str]:
    """The steps encode() takes, timed one by one, plus a faster resize for comparison."""
    from PIL import Image as PILImage

    lanczos = PILImage.Resampling.LANCZOS
    image = PILImage.fromarray(frame)
    w, h = image.size
    crop_h = min(h, round(w * 9 / 16))
    top = (h - crop_h) // 2
    box = (0, top, w, top + crop_h)
    cropped = image.crop(box)
    small = cropped.resize(target, lanczos)

    def jpeg() -> bytes:
        buffer = io.BytesIO()
        small.save(buffer, format="JPEG", quality=95)
        return buffer.getvalue()

    data = jpeg()
    factor = max(1, min(cropped.size[0] // target[0], cropped.size[1] // target[1]))
    reference = np.asarray(small, dtype=np.int16)

    def change(other: Any) -> str:
        diff = np.abs(reference - np.asarray(other, dtype=np.int16))
        return f"{diff.mean():.2f} on average (max {int(diff.max())} of 255)"

    gap_change = change(cropped.resize(target, lanczos, reducing_gap=2.0))
    reduce_change = change(cropped.reduce(factor).resize(target, lanczos))
    parts = [
        ("array → PIL image", _time(lambda: PILImage.fromarray(frame), reps)),
        ("centre crop", _time(lambda: image.crop(box).load(), reps)),
        ("Lanczos resize of the full frame", _time(lambda: cropped.resize(target, lanczos),
                                                   reps)),
        ("Lanczos resize, reducing_gap=2.0",
         _time(lambda: cropped.resize(target, lanczos, reducing_gap=2.0), reps)),
        (f"reduce({factor}) then Lanczos",
         _time(lambda: cropped.reduce(factor).resize(target, lanczos), reps)),
        ("JPEG q95 save", _time(jpeg, reps)),
        ("base64", _time(lambda: base64.b64encode(data), reps)),
    ]
    rows = [[name, fmt(summary.median), fmt(summary.p99)] for name, summary in parts]
    full, gap, reduced = parts[2][1], parts[3][1], parts[4][1]
    note = (
        f"a full-frame Lanczos resize takes {full.median:.2f} ms; with reducing_gap=2.0 "
        f"{gap.median:.2f} ms ({times(ratio(gap.median, full.median))}, pixels change by "
        f"{gap_change}); reduce({factor}) first {reduced.median:.2f} ms "
        f"({times(ratio(reduced.median, full.median))}, pixels change by {reduce_change})."
    )
    return rows, note


# JPEG options that keep the decoded pixels: (label, Pillow save options).
LOSSLESS_OPTIONS = (
    ("q95, Pillow defaults", {}),
    ("q95, optimize=True (the client's)", {"optimize": True}),
    ("q95, optimize=True, progressive=True", {"optimize": True, "progressive": True}),
)


def _size_rows(model: Any, frame: np.ndarray, content: str) -> list[list[str]]:
    """Bytes per view and per request of each lossless JPEG option, and the latency they cost
    at the gateway's per-kB rate; pixels compared with the plain encoding's."""
    from PIL import Image as PILImage

    width, height = model.training_frame_size or (320, 180)
    image = PILImage.fromarray(frame).resize(
        (width, height), PILImage.Resampling.LANCZOS, reducing_gap=2.0
    )
    encoded = {}
    for label, options in LOSSLESS_OPTIONS:
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=95, **options)
        encoded[label] = buffer.getvalue()
    plain_label = LOSSLESS_OPTIONS[0][0]
    reference = np.asarray(PILImage.open(io.BytesIO(encoded[plain_label])))
    plain_body = None
    rows = []
    for label, data in encoded.items():
        observation = sequence_ai.observation(
            model, images={view: data for view in model.camera_views},
            joints=[0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785], gripper=[0.0],
            instruction="put the cup in the sink",
        )
        body = request_bytes(model, observation)
        plain_body = body if plain_body is None else plain_body
        same = np.array_equal(np.asarray(PILImage.open(io.BytesIO(data))), reference)
        view = next(iter(observation.view_bytes.values()))
        rows.append([
            content, label, fmt(view / BYTES_PER_KB, 2), fmt(body / BYTES_PER_KB, 2),
            fmt(body / BYTES_PER_KB * PER_KB_MS, 0), str(plain_body - body),
            fmt((plain_body - body) / BYTES_PER_KB * PER_KB_MS, 1), "yes" if same else "NO",
        ])
    return rows


def _node_row(model: Any, frame: np.ndarray, size: str, reps: int) -> list[str]:
    from sequence_ai_ros.inputs.image_conversion import image_to_array

    messages = {view: _image_message(frame) for view in model.camera_views}
    joints = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]

    def node_path() -> Any:
        arrays = {view: image_to_array(msg) for view, msg in messages.items()}
        return sequence_ai.observation(model, images=arrays, joints=joints, gripper=[0.0],
                                       instruction="put the cup in the sink")

    convert = _time(lambda: [image_to_array(m) for m in messages.values()], reps)
    total = _time(node_path, reps)
    views = len(messages)
    return [size, str(views), fmt(convert.median, 3), fmt(total.median), fmt(total.p99),
            fmt(total.max), fmt(total.median / views)]


def run(ctx: Context) -> Section:
    reps = ctx.pick(60, 5)
    model = ctx.models[PI05]
    width, height = model.training_frame_size or (320, 180)
    section = Section(
        "observation_cost",
        "Observation cost",
        intro=(
            f"`sequence_ai.encode(frame, pi05-droid)`: centre crop to 16:9, resize to "
            f"{width}×{height}, JPEG q95, base64, {reps} repetitions per row. Frames "
            "are the simulated arm's render, and the same render with Gaussian sensor noise "
            f"(sigma {NOISE_SIGMA:g}), closer to what a real camera's JPEG weighs. kB are the "
            "base64 bytes sent per view."
        ),
    )
    rows = []
    steps_rows = []
    for w, h in SIZES:
        render = rendered_frame("exterior_1", w, h)
        for content, frame in (("render", render), ("render + noise", noisy(render, NOISE_SIGMA))):
            log(f"observation cost: encode {w}x{h} {content}")
            rows.append(_encode_row(model, frame, f"{w}×{h}", content, reps))
        steps, note = _breakdown(noisy(render, NOISE_SIGMA), (width, height), reps)
        steps_rows += [[f"{w}×{h}", *row] for row in steps]
        section.notes.append(f"{w}×{h}: {note}")
    section.tables.append(Table("encode() per view", [
        "frame", "content", "median ms", "p99 ms", "max ms", "kB per view"],
        rows, ctx.command("observation_cost")))
    section.tables.append(Table("Where encode() spends its time (noisy frame)", [
        "frame", "step", "median ms", "p99 ms"], steps_rows, ctx.command("observation_cost")))

    log("observation cost: bytes of lossless JPEG options")
    render = rendered_frame("exterior_1", 1280, 720)
    size_rows = _size_rows(model, render, "render") + _size_rows(
        model, noisy(render, NOISE_SIGMA), "render + noise"
    )
    section.tables.append(Table(
        "Observation bytes: lossless JPEG options (1280×720 frame → 320×180, both views)",
        ["content", "encoding", "kB per view (base64)", "request body kB",
         f"latency at {PER_KB_MS:g} ms/kB", "bytes saved vs defaults", "ms saved",
         "pixels identical"],
        size_rows, ctx.command("observation_cost"),
        note=(
            "The gateway's latency model charges every kB of request body (docs/gateway.md); "
            "kB are 1000 bytes as there. Optimised Huffman tables and progressive scans both "
            "keep the decoded pixels identical (checked here); the client uses the first: "
            "progressive JPEG saves about 1 % more but decodes more slowly and is not "
            "supported by every decoder a service may use. Quality stays 95."
        ),
    ))

    try:
        import sequence_ai_ros.inputs.image_conversion  # noqa: F401
    except ImportError as exc:
        section.notes.append(f"node path not measured: {exc} (needs the ROS workspace)")
        return section
    log("observation cost: node Image → observation path")
    node_rows = [
        _node_row(model, noisy(rendered_frame("exterior_1", w, h), NOISE_SIGMA), f"{w}×{h}", reps)
        for w, h in SIZES
    ]
    section.tables.append(Table(
        "The node's path: sensor_msgs/Image (rgb8) → image_to_array → observation()",
        ["frame", "views", "Image → array ms (all views)", "observation ms (median)", "p99 ms",
         "max ms", "ms per view"],
        node_rows, ctx.command("observation_cost"),
        note=(
            "This is what the node's observe() does on the control loop's thread once per "
            "chunk request (plus reading the latest-message cache)."
        ),
    ))
    return section
