"""One scripted step of a Kafka 4.4 command-line tool, run against Kafka and against Skiff.

    pair = BrokerPair(kafka=kafka_ref.bootstrap, skiff=node.bootstrap)
    k, s = pair.run("kafka-topics", "--bootstrap-server", "{bootstrap}", "--list")
    pair.same("topics.list", "kafka-topics", "--bootstrap-server", "{bootstrap}", "--list")

`run` starts the tool twice at once (two JVMs, one per broker), `{bootstrap}` standing for
each broker's address (and `{name}` for each side's value of a name in `kafka_names` /
`skiff_names`, such as a log directory), and returns both results normalised (`Output`):
what legitimately differs between two brokers started apart is replaced by a placeholder
(their addresses, those names' values as `<name>`, topic ids and other uuids,
epoch-millisecond timestamps, member ids), stack-trace frames are dropped and column padding
is collapsed, so the text left is what a user reads.

`same(step, ...)` asserts both outputs (exit code, stdout, stderr) are equal, after the
rewrites of an accepted difference for that step (tests/compat/kafka/tool_differences.py)
are applied to both. An accepted difference must still be one: if the outputs agree without
its rewrites the step fails, so the list never outlives the behaviour it excuses.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tests.support.kafka_ref import tool

Rewrite = tuple[str, str]  # (regex, replacement), applied line by line with re.MULTILINE


@dataclass(frozen=True)
class Difference:
    """What Skiff's output may differ by in one step, and why."""

    reason: str
    rewrites: tuple[Rewrite, ...] = ()
    same_exit_code: bool = True  # False: one refuses what the other accepts


@dataclass(frozen=True)
class Output:
    returncode: int
    stdout: str
    stderr: str

    def rewritten(self, rewrites: Iterable[Rewrite]) -> Output:
        out, err = self.stdout, self.stderr
        for pattern, repl in rewrites:
            out = re.sub(pattern, repl, out, flags=re.MULTILINE)
            err = re.sub(pattern, repl, err, flags=re.MULTILINE)
        return Output(self.returncode, out.strip(), err.strip())

    def text(self) -> str:
        return (f"exit {self.returncode}\n--- stdout ---\n{self.stdout}\n"
                f"--- stderr ---\n{self.stderr}")


_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_TOPIC_ID = re.compile(r"(TopicId: ?)[A-Za-z0-9_-]{22}\b")
_MILLIS = re.compile(r"\b1[6-9]\d{11}\b")  # epoch milliseconds, 2020 .. 2033
_FRAME = re.compile(r"^\s+at [\w$.<>/]+\(.*\)\s*$|^\s+\.\.\. \d+ more\s*$")
_PADDING = re.compile(r"[ \t]+")


@dataclass
class BrokerPair:
    kafka: str
    skiff: str
    # both brokers' other addresses (a cluster's other nodes) -> the same placeholder
    kafka_others: Sequence[str] = ()
    skiff_others: Sequence[str] = ()
    # what `{name}` in a step's arguments stands for on each side (e.g. a log dir)
    kafka_names: Mapping[str, str] = field(default_factory=dict)
    skiff_names: Mapping[str, str] = field(default_factory=dict)
    differences: dict[str, Difference] = field(default_factory=dict)
    timeout: float = 120.0

    def _normalise(self, text: str, addresses: Sequence[str],
                   names: Mapping[str, str] | None = None) -> str:
        for name, value in sorted((names or {}).items(), key=lambda nv: -len(nv[1])):
            text = text.replace(value, f"<{name}>")
        for i, addr in enumerate(addresses):
            text = text.replace(addr, f"<broker{i}>")
        text = _UUID.sub("<uuid>", text)
        text = _TOPIC_ID.sub(r"\1<id>", text)
        text = _MILLIS.sub("<ms>", text)
        lines = [_PADDING.sub(" ", line).strip() for line in text.splitlines()
                 if not _FRAME.match(line)]
        return "\n".join(lines).strip()

    def run(self, script: str, *args: str, input_text: str | None = None,
            normalise: Callable[[str], str] | None = None) -> tuple[Output, Output]:
        """The step against Kafka and Skiff at once; both outputs normalised."""
        targets = ((self.kafka, [self.kafka, *self.kafka_others], self.kafka_names),
                   (self.skiff, [self.skiff, *self.skiff_others], self.skiff_names))

        def one(target: tuple[str, list[str], Mapping[str, str]]) -> Output:
            bootstrap, addresses, names = target
            argv = [a.replace("{bootstrap}", bootstrap) for a in args]
            for name, value in names.items():
                argv = [a.replace(f"{{{name}}}", value) for a in argv]
            try:
                proc = tool(script, *argv, timeout=self.timeout, input_text=input_text)
            except subprocess.TimeoutExpired as exc:
                raise AssertionError(f"{script} {' '.join(argv)} ran over {self.timeout}s") \
                    from exc
            out = self._normalise(proc.stdout, addresses, names)
            err = self._normalise(proc.stderr, addresses, names)
            if normalise is not None:
                out, err = normalise(out), normalise(err)
            return Output(proc.returncode, out, err)

        with ThreadPoolExecutor(2) as pool:
            kafka_out, skiff_out = pool.map(one, targets)
        return kafka_out, skiff_out

    def same(self, step: str, script: str, *args: str, input_text: str | None = None,
             normalise: Callable[[str], str] | None = None) -> Output:
        """Run the step on both and assert the outputs agree (modulo the accepted difference
        registered for `step`). Returns Kafka's normalised output."""
        kafka_out, skiff_out = self.run(script, *args, input_text=input_text,
                                        normalise=normalise)
        assert_same(step, kafka_out, skiff_out, self.differences)
        return kafka_out


def assert_same(step: str, kafka_out: Output, skiff_out: Output,
                differences: dict[str, Difference]) -> None:
    diff = differences.get(step)
    if diff is None:
        assert skiff_out == kafka_out, (
            f"step {step!r}: Skiff's output differs from Kafka 4.4's\n"
            f"=== Kafka 4.4 ===\n{kafka_out.text()}\n=== Skiff ===\n{skiff_out.text()}")
        return
    assert skiff_out != kafka_out, (
        f"step {step!r} is listed as an accepted difference ({diff.reason}) but the outputs "
        "now agree: remove it from tests/compat/kafka/tool_differences.py")
    k, s = kafka_out.rewritten(diff.rewrites), skiff_out.rewritten(diff.rewrites)
    if not diff.same_exit_code:
        k = Output(0, k.stdout, k.stderr)
        s = Output(0, s.stdout, s.stderr)
    assert s == k, (
        f"step {step!r}: Skiff's output differs from Kafka 4.4's beyond the accepted "
        f"difference ({diff.reason})\n=== Kafka 4.4 (rewritten) ===\n{k.text()}\n"
        f"=== Skiff (rewritten) ===\n{s.text()}")


def only_lines(prefix: str) -> Callable[[str], str]:
    """A normaliser keeping the lines that start with `prefix` (a listing on a shared broker)."""
    def keep(text: str) -> str:
        return "\n".join(line for line in text.splitlines() if line.startswith(prefix))
    return keep
