"""The error hierarchy: classes, attributes and what their text may contain."""

from __future__ import annotations

import pytest

from sequence_ai.errors import (
    AuthError,
    ChunkExhausted,
    InvalidRequest,
    InvalidResponse,
    OutOfCredit,
    SequencesError,
    Unavailable,
)


@pytest.mark.parametrize(
    "cls", [AuthError, OutOfCredit, InvalidRequest, Unavailable, ChunkExhausted, InvalidResponse]
)
def test_every_error_is_a_sequences_error_with_status_and_body(cls):
    exc = cls("went wrong", status=418, body='{"detail": "x"}')
    assert isinstance(exc, SequencesError)
    assert (exc.status, exc.body, str(exc)) == (418, '{"detail": "x"}', "went wrong")
    with pytest.raises(SequencesError, match="went wrong"):
        raise exc


def test_local_errors_have_no_status_or_body():
    exc = SequencesError("closed")
    assert exc.status is None and exc.body is None


def test_unavailable_carries_the_warming_details():
    exc = Unavailable("loading", status=503, retry_after_s=118.0, warming=True, job_id="job-1")
    assert (exc.retry_after_s, exc.warming, exc.job_id) == (118.0, True, "job-1")
    plain = Unavailable("down")
    assert (plain.retry_after_s, plain.warming, plain.job_id) == (None, False, None)
    assert "warming=True" in repr(exc)


def test_repr_names_the_class_and_leaves_the_body_out():
    exc = AuthError("refused", status=401, body="a" * 10_000)
    assert repr(exc) == "AuthError('refused', status=401)"


def test_classes_are_distinct_so_callers_can_react_differently():
    with pytest.raises(OutOfCredit):
        try:
            raise OutOfCredit("no credit", status=402)
        except AuthError:
            pytest.fail("OutOfCredit must not be caught as AuthError")
