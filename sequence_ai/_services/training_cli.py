"""The fine-tuning verbs of ``sequence-ai``: ``estimate`` and ``train submit|list|show|cancel|
wait``, one readable line per job."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Dict, TextIO

from .._transport.connection import Connection
from .._transport.transport import BASE_URL_ENV
from .training import (
    DEFAULT_WAIT_TIMEOUT_S,
    FIRST_POLL_S,
    MAX_POLL_S,
    TrainingJob,
    cancel_training,
    estimate_training_cost,
    train,
    training_job,
    training_jobs,
)

__all__ = ["HANDLERS", "add_commands"]

Handler = Callable[[argparse.Namespace, TextIO], int]


def _gateway_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--base-url", default=None,
                        help=f"gateway URL (default: ${BASE_URL_ENV}, else production)")
    common.add_argument("--ca-bundle", default=None, metavar="PEM",
                        help="CA bundle to verify the gateway's TLS")
    common.add_argument("--allow-insecure", action="store_true",
                        help="allow plain http:// to a host that is not this machine")
    return common


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``estimate`` and ``train`` to the ``sequence-ai`` parser's subcommands."""
    common = _gateway_options()
    estimate = commands.add_parser(
        "estimate", parents=[common],
        help="quote a fine-tuning job from the catalogue's rates (no key needed)")
    estimate.add_argument("model", nargs="?", help="base model id (short or full)")
    estimate.add_argument("--model", dest="model_option", default=None, help=argparse.SUPPRESS)
    estimate.add_argument("--frames", type=int, required=True, help="frames in the dataset")
    estimate.add_argument("--epochs", type=float, required=True, help="passes over the dataset")

    verbs = commands.add_parser("train", help="fine-tuning jobs: submit, list, show, cancel, wait")
    actions = verbs.add_subparsers(dest="train_command", metavar="ACTION")
    actions.required = True
    submit = actions.add_parser("submit", parents=[common], help="submit a LoRA fine-tune")
    submit.add_argument("base_model", help="base model id, e.g. pi05-droid")
    submit.add_argument("dataset", help="dataset URI: hf://, s3://, gs://, https:// "
                                        "(a local gateway also takes file:// LeRobot folders)")
    submit.add_argument("--epochs", type=float, default=None)
    submit.add_argument("--frames", type=int, default=None,
                        help="claimed frame count (quotes the job; the dataset's count rules)")
    submit.add_argument("--rank", type=int, default=None, help="LoRA rank")
    submit.add_argument("--steps", type=int, default=None)
    submit.add_argument("--learning-rate", type=float, default=None)
    listing = actions.add_parser("list", parents=[common], help="your jobs, newest first")
    listing.add_argument("--status", default=None, help="only jobs in this status")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (max 200)")
    for name, what in (("show", "print one job"), ("cancel", "cancel a queued or running job")):
        one = actions.add_parser(name, parents=[common], help=what)
        one.add_argument("job_id")
    wait = actions.add_parser(
        "wait", parents=[common], help="follow a job until it ends; prints each new status")
    wait.add_argument("job_id")
    wait.add_argument("--timeout", type=float, default=DEFAULT_WAIT_TIMEOUT_S, metavar="S",
                      help="give up waiting after S seconds (the job goes on; default "
                           "%(default)g)")
    wait.add_argument("--poll", type=float, default=FIRST_POLL_S, metavar="S",
                      help="first poll interval; it backs off 1.5x up to --max-poll "
                           "(default %(default)g)")
    wait.add_argument("--max-poll", type=float, default=MAX_POLL_S, metavar="S",
                      help="longest poll interval (default %(default)g)")


def _where(args: argparse.Namespace) -> Connection:
    return Connection(base_url=args.base_url, verify=args.ca_bundle or True,
                      allow_insecure=args.allow_insecure)


def _estimate(args: argparse.Namespace, out: TextIO) -> int:
    model = args.model or args.model_option
    if not model:
        raise ValueError("estimate: expected a base model, e.g. sequence-ai estimate pi05-droid "
                         "--frames 144000 --epochs 3")
    usd = estimate_training_cost(model, frames=args.frames, epochs=args.epochs,
                                 connection=_where(args))
    print(f"{model}: {args.frames} frames x {args.epochs:g} epochs -> ${usd:.2f}", file=out)
    return 0


def _submit(args: argparse.Namespace, out: TextIO) -> int:
    job = train(args.base_model, args.dataset, epochs=args.epochs, frames=args.frames,
                rank=args.rank, steps=args.steps, learning_rate=args.learning_rate,
                connection=_where(args))
    print(job.line(), file=out)
    return 0


def _list(args: argparse.Namespace, out: TextIO) -> int:
    jobs = training_jobs(status=args.status, limit=args.limit, connection=_where(args))
    if not jobs:
        print("no training jobs" + (f" in status {args.status!r}" if args.status else ""),
              file=out)
    for job in jobs:
        print(job.line(), file=out)
    return 0


def _show(args: argparse.Namespace, out: TextIO) -> int:
    print(training_job(args.job_id, connection=_where(args)).line(), file=out)
    return 0


def _cancel(args: argparse.Namespace, out: TextIO) -> int:
    print(cancel_training(args.job_id, connection=_where(args)).line(), file=out)
    return 0


def _wait(args: argparse.Namespace, out: TextIO) -> int:
    def report(job: TrainingJob) -> None:
        print(job.line(), file=out, flush=True)

    try:
        job = training_job(args.job_id, connection=_where(args)).wait(
            timeout=args.timeout, poll_interval=args.poll, max_poll_interval=args.max_poll,
            on_status=report)
    except TimeoutError as exc:
        print(f"sequence-ai train wait: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        # The message says the job goes on and where it stood; Ctrl-C's usual exit status.
        print(f"sequence-ai train wait: {exc}", file=sys.stderr)
        return 130
    if job.status == "succeeded":
        print(f"tuned model: {job.model_id}", file=out)
        return 0
    return 1


TRAIN_HANDLERS: Dict[str, Handler] = {
    "submit": _submit, "list": _list, "show": _show, "cancel": _cancel, "wait": _wait,
}


def _train(args: argparse.Namespace, out: TextIO) -> int:
    return TRAIN_HANDLERS[args.train_command](args, out)


HANDLERS: Dict[str, Handler] = {"estimate": _estimate, "train": _train}
