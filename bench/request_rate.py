"""Request rate: what a run asks of a fast and of a slow service, per second of motion."""

from __future__ import annotations

from bench.common import PI05, ActClock, Context, accept, fixed_observation, log
from bench.report import Section, Table
from bench.stats import fmt

IN_FLIGHT = (1, 2, 4)
# Fast: no simulated inference (about a millisecond on loopback). Slow: the hosted service's
# median for a two-view pi05 observation (docs/control-loop.md).
SERVICES = (("fast (~1 ms)", None), ("slow (600 ms)", 600.0))


def run(ctx: Context) -> Section:
    actions = ctx.pick(150, 45)
    model = ctx.models[PI05]
    horizon = model.open_loop_horizon or model.action_horizon or 1
    section = Section(
        "request_rate",
        "Request rate against a fast and a slow service",
        intro=(
            f"`Policy.run()` of pi05-droid at its {model.control_hz:g} Hz, {actions} commands, "
            f"open-loop horizon {horizon} rows, prefetch on, `max_in_flight` N. Every request "
            "is billed, so a run asks for no more than N chunks per open-loop horizon of "
            "motion, whatever the latency: a fast service is not asked at its own pace. "
            "*Per horizon*: requests / (commands / horizon); the bound is N (plus the first "
            "request). *Requests/s*: per second of motion (`RunOutcome.requests_per_s`)."
        ),
    )
    observation = fixed_observation(model)
    rows = []
    try:
        for name, latency_ms in SERVICES:
            if latency_ms is None:
                ctx.gateway.set_latency(scale=0.0)
            else:
                ctx.latency(latency_ms)
            for in_flight in IN_FLIGHT:
                log(f"request rate: {name}, max_in_flight {in_flight}")
                with ctx.connect(PI05, max_in_flight=in_flight) as policy:
                    policy.wait_until_ready()
                    outcome = policy.run(
                        lambda: observation,
                        ActClock(),
                        max_actions=actions,
                        validate=accept,
                        progress=False,
                    )
                per_horizon = outcome.requests / (outcome.actions / horizon)
                rows.append(
                    [
                        name,
                        str(in_flight),
                        str(outcome.actions),
                        fmt(outcome.motion_s, 2),
                        str(outcome.requests),
                        fmt(outcome.requests_per_s or 0.0, 2),
                        fmt(per_horizon, 2),
                        str(outcome.discarded),
                        str(outcome.underruns),
                        str(outcome.rows_beyond_horizon),
                    ]
                )
    finally:
        ctx.gateway.reset()
    section.tables.append(
        Table(
            "Requests per second of motion, by service latency and requests in flight",
            [
                "service",
                "N",
                "commands",
                "motion s",
                "requests",
                "requests/s",
                "per horizon",
                "discarded",
                "underruns",
                "rows beyond horizon",
            ],
            rows,
            ctx.command("request_rate"),
        )
    )
    return section
