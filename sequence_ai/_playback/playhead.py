"""``Playhead``: which command of the installed chunk is due, at what speed, and the seam to the
next chunk. The commands themselves come from ``playback.commands_for``; this unit decides
which chunk plays and when it would come to rest. Driving thread only.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable, Optional

from ..events import ChunkInstalled, InstructionHandedOver, RunEvent, SpeedChanged
from ..types import Prediction
from .pacing import Pacer
from .playback import Command, InstalledRows, commands_for, ramp_rows_for
from .seam import SeamLimits, fade_length, seam_jump, shift_seam
from .speed import PlaybackSpeed, auto_speed, next_speed

__all__ = ["Installed", "Playhead", "Playing", "RowsReport", "installed_events"]

Row = list[float]
# Fewest commands a seam's offset fades over after a hand-over (targets only). Longer than a
# request's latency in commands, so the offset a chunk inherits shrinks from seam to seam.
HANDOVER_BLEND = 20


@dataclass
class Playing:
    """The installed chunk."""

    number: int
    sequence: int
    # Playback position of its row 0: the position at its observation's capture.
    origin: float
    captured: float
    # Chunk position where its open-loop horizon (counted from its due row) ends.
    horizon_end: float
    speed: float
    # The instruction its rows were computed with.
    instruction: Optional[str] = None


@dataclass(frozen=True)
class Installed:
    """What ``Playhead.install`` did: when its first command is due, the seam's jump."""

    first_due: float
    seam_jump: Optional[float]
    previous_speed: float
    # What it replaced: the chunk that was playing (None: the first), its commands not played.
    previous: Optional[Playing] = None
    dropped_rows: int = 0


class Playhead:
    """The chunk playing, its commands left, the playback speed and the rest ramp's time."""

    def __init__(
        self, period_s: float, speed_setting: PlaybackSpeed, gripper_dims: Sequence[int],
        smooth_seam: int, angle_dims: Sequence[int] = (),
        seam_limits: Optional[SeamLimits] = None,
    ) -> None:
        self.period = period_s
        self.speed_setting = speed_setting
        self.gripper_dims = list(gripper_dims)
        # Target angles (ee_absolute's roll, pitch, yaw): by the shortest arc at every seam.
        self.angle_dims = list(angle_dims)
        self.smooth_seam = smooth_seam
        # What a seam's fade keeps its rows within (None: smooth_seam alone decides).
        self.seam_limits = seam_limits
        # A hand-over happened in this run: seams are shifted, not blended (install).
        self.shifting = False
        self.pacer = Pacer()
        self.playing: Optional[Playing] = None
        self.tail: deque[Command] = deque()
        self.speed = 1.0 if isinstance(speed_setting, str) else float(speed_setting)
        # The deadline the tail comes to rest by (None: it does not): once the tail is played
        # out, the run waits for that deadline rather than for another chunk.
        self.rest_deadline: Optional[float] = None
        # How long before max_seconds an answer must land to be played: the rest ramp's time.
        self.ramp_s = 0.0
        self.last_row: Optional[Row] = None

    def speed_for(
        self, chunk_rows: int, latency_s: Optional[float], latency_high_s: Optional[float],
        in_flight: int, *, first_latency_s: Optional[float] = None,
    ) -> float:
        """The playback speed of the chunk being installed."""
        if latency_s is None and first_latency_s is not None:
            # No warm sample yet: the first request's own round trip, with the spread the
            # latency average starts from (a cold start in it errs on the slow, safe side).
            latency_s, latency_high_s = first_latency_s, 2.0 * first_latency_s
        target = auto_speed(
            chunk_rows=chunk_rows, period_s=self.period, latency_s=latency_s,
            latency_high_s=latency_high_s, in_flight=in_flight,
        )
        # The first chunk starts from rest: no seam to keep the speed change small at.
        previous = target if self.playing is None else self.speed
        return next_speed(self.speed_setting, previous, target)

    def horizon_left(self, position: float) -> float:
        """Commands left before the playing chunk leaves its open-loop horizon."""
        playing = self.playing
        assert playing is not None
        ahead = max(0.0, playing.horizon_end - (position - playing.origin)) / playing.speed
        return min(ahead, len(self.tail))

    def install(
        self,
        rows: list[Row],
        playing: Playing,
        *,
        due: float,
        horizon: int,
        absolute: bool,
        chunk_rows: int,
        deadline: Optional[float],
        at_most: int,
    ) -> Optional[Installed]:
        """Play ``rows`` from row ``due`` on at ``playing.speed``; None (nothing changed) when
        too little time is left before ``deadline`` to bring it to rest."""
        speed = playing.speed
        ramp_rows = ramp_rows_for(self.period, chunk_rows)
        # A full rest ramp at this speed, in commands.
        ramp_commands = 2 * ramp_rows / speed
        first_due = self.pacer.upcoming(self.period)
        # Come to rest a period before max_seconds: an act() goal ends at rest, not mid-stride.
        rest_within = (
            None if deadline is None else math.ceil((deadline - first_due) / self.period) - 1
        )
        if rest_within is not None and self.rest_deadline is not None and (
            rest_within <= ramp_commands
        ):
            return None
        commands = commands_for(
            rows, due, speed=speed, horizon=horizon, absolute=absolute,
            gripper_dims=self.gripper_dims, ramp_rows=ramp_rows,
            rest_within=rest_within, at_most=at_most, angle_dims=self.angle_dims,
        )
        if not commands:
            return None
        jump = self._jump(commands)
        dropped, replaced = len(self.tail), self.playing
        # A hand-over's plan set off from where the old one was a request ago: from then on
        # each chunk is shifted onto the last command, the offset fading over HANDOVER_BLEND
        # commands or more (the next chunks inherit what is left of it).
        if replaced is not None and replaced.instruction != playing.instruction:
            self.shifting = True
        self.tail = deque(self._blend(commands, absolute, self.shifting))
        previous, self.speed = self.speed, speed
        self.ramp_s = (ramp_commands + 1) * self.period
        resting = rest_within is not None and len(commands) >= rest_within
        self.rest_deadline = deadline if resting else None
        self.playing = playing
        return Installed(
            first_due=first_due, seam_jump=jump, previous_speed=previous, previous=replaced,
            dropped_rows=dropped,
        )

    def _jump(self, commands: list[Command]) -> Optional[float]:
        # Measured on the rows act will receive, before any blending can hide the jump.
        if self.last_row is None:
            return None
        return seam_jump(commands[0].row, self.last_row, self.gripper_dims, self.angle_dims)

    def _blend(self, commands: list[Command], absolute: bool, handover: bool) -> list[Command]:
        """Blend the seam away over ``smooth_seam`` commands where the rows are targets: the
        new plan starts where the old one would have gone next (its first unplayed command,
        else the last one) and the offset fades, the plan's own speed kept (a hand-over's:
        from the last command, at least over HANDOVER_BLEND); over more commands where fewer
        would step beyond ``seam_limits``."""
        n = max(self.smooth_seam, HANDOVER_BLEND) if handover else self.smooth_seam
        if self.last_row is None or n <= 0 or not absolute:
            return commands
        anchor = self.last_row if handover or not self.tail else self.tail[0].row
        blended = [list(command.row) for command in commands]
        if self.seam_limits is not None:
            # From where the old plan was going when that can be kept within the limits, else
            # from the last command (the old plan's next step may itself be near a limit).
            for start in (anchor, self.last_row):
                fade = fade_length(
                    blended, start, self.last_row, n, self.seam_limits.step,
                    self.gripper_dims, self.angle_dims,
                )
                if fade is not None:
                    anchor, n = start, fade
                    break
        shift_seam(blended, anchor, n, self.gripper_dims, self.angle_dims, self.seam_limits)
        return [dataclasses.replace(command, row=row) for command, row in zip(commands, blended)]

    def next_command(self) -> Command:
        return self.tail.popleft()

    def played(self, command: Command) -> float:
        """``command`` went to act: the playback position of the next one."""
        playing = self.playing
        assert playing is not None
        self.last_row = command.row
        return playing.origin + command.position + command.advance

    def stop(self) -> None:
        self.tail.clear()


class RowsReport:
    """``on_rows``: what will be played from when, and again when the schedule slipped."""

    def __init__(
        self, on_rows: Optional[Callable[[InstalledRows], object]], period_s: float
    ) -> None:
        self._on_rows = on_rows
        self._period = period_s
        # Calls so far; due time of the last report's first row, commands played since.
        self._reports = 0
        self._due = 0.0
        self._played = 0

    def installed(self, first_due: float, playing: Playing, commands: list[Command]) -> None:
        """Tell ``on_rows`` what will be played from ``first_due`` on."""
        self._due = first_due
        self._played = 0
        if self._on_rows is None:
            return
        self._reports += 1
        speed = playing.speed
        beyond = [k for k, command in enumerate(commands) if command.beyond_horizon]
        # The ramp starts where a command advances the plan less than the speed.
        slowing = [k for k, command in enumerate(commands) if command.advance < speed - 1e-9]
        self._on_rows(InstalledRows(
            rows=[list(command.row) for command in commands],
            first_due=first_due,
            period_s=self._period,
            speed=speed,
            sequence=self._reports,
            chunk=playing.number,
            start=commands[0].position if commands else 0.0,
            horizon_index=beyond[0] if beyond else len(commands),
            ramp_index=slowing[0] if slowing else len(commands),
        ))

    def retime(
        self, due: float, playing: Playing, command: Command, tail: Sequence[Command]
    ) -> None:
        """A step handed out more than half a period off the reported schedule (the driving
        thread was late): report the remaining rows again, from this one, at their new times."""
        expected = self._due + self._played * self._period
        if abs(due - expected) > self._period / 2:
            self.installed(due, playing, [command, *tail])

    def played(self) -> None:
        self._played += 1


def installed_events(
    now: float, prediction: Prediction, playing: Playing, installed: Installed, commands: int
) -> list[RunEvent]:
    """What one installation tells the run's observers: the chunk, a speed change, and a
    hand-over when it is the first chunk of a new instruction."""
    events: list[RunEvent] = [ChunkInstalled(
        time=now, prediction=prediction, number=playing.number, sequence=playing.sequence,
        speed=playing.speed, action_space=prediction.action_chunk.action_space,
        seam_jump=installed.seam_jump, commands=commands,
    )]
    if playing.speed != installed.previous_speed:
        events.append(SpeedChanged(
            time=now, speed=playing.speed, previous=installed.previous_speed
        ))
    replaced = installed.previous
    if replaced is not None and replaced.instruction != playing.instruction:
        events.append(InstructionHandedOver(
            time=now, instruction=playing.instruction, previous=replaced.instruction,
            dropped_rows=installed.dropped_rows,
        ))
    return events
