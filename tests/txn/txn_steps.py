"""Helpers shared by the transaction tests: run a statement in a thread, and wait - with a
bound, polling shared memory rather than sleeping a fixed time - until it is blocked."""

from __future__ import annotations

import threading
import time

RC, RR = "read committed", "repeatable read"
WAIT_LIMIT_S = 20.0  # bound on every poll loop: a hang becomes a failure, not a timeout


class Step:
    """Run one statement in a thread and keep its result or its exception."""

    def __init__(self, fn, name="step"):
        self.result = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn):
        try:
            self.result = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            self.error = e

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self):
        self._thread.join(WAIT_LIMIT_S)
        assert not self._thread.is_alive(), "step still blocked"
        if self.error is not None:
            raise self.error
        return self.result


def poll(cond, what: str, step: Step | None = None) -> None:
    """Poll (bounded) until ``cond()``; fail early if ``step`` ended meanwhile."""
    end = time.monotonic() + WAIT_LIMIT_S
    while not cond():
        if step is not None and step.done:
            raise AssertionError(f"step ended before {what}: result {step.result!r}, "
                                 f"error {step.error!r}")
        assert time.monotonic() < end, f"never: {what}"
        time.sleep(0.001)


def wait_blocked(inst, sess, step: Step, on_xid: int) -> None:
    """Poll until ``sess`` sleeps waiting for transaction ``on_xid``."""
    slot = sess.backend.slot
    poll(lambda: int(inst.seg.proc_wait_xid[slot]) == on_xid,
         f"slot {slot} waits for xid {on_xid}", step)


def wait_any_done(*steps: Step) -> None:
    poll(lambda: any(s.done for s in steps), "some step finished")


def key(k):
    return lambda r: r[0] == k


def add(d):
    return lambda r: (r[0], r[1] + d)
