"""Any sequence of appends, truncations, rolls, DeleteRecords and reopens (clean or not)
gives a valid log whose reads return exactly what was appended and not removed."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from loghelpers import FakeClock

from broker.log import LogConfig, PartitionLog, TopicPartition
from broker.protocol.compression import Compression
from broker.protocol.records import Record, build_batch

CFG = LogConfig(segment_bytes=600, index_interval_bytes=64, segment_index_bytes=96)

op_st = st.one_of(
    st.tuples(
        st.just("append"),
        st.integers(1, 5),
        st.integers(0, 60),
        st.booleans(),
        st.sampled_from([Compression.NONE, Compression.SNAPPY, Compression.ZSTD]),
    ),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("roll")),
    st.tuples(st.just("reopen"), st.booleans()),
    st.tuples(st.just("delete_records"), st.floats(0, 1)),
    st.tuples(st.just("flush")),
)


@settings(max_examples=120, deadline=None)
@given(st.lists(op_st, min_size=1, max_size=30))
def test_reads_return_exactly_what_was_appended(ops):
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"

        def open_log(clean: bool, rp: int = 0, start: int = 0) -> PartitionLog:
            return PartitionLog(
                d,
                TopicPartition("t", 0),
                CFG,
                clock=clock,
                clean_shutdown=clean,
                recovery_point=rp,
                log_start_offset=start,
            )

        plog = open_log(True)
        model: dict[int, bytes] = {}
        epoch = 0
        for op in ops:
            kind = op[0]
            if kind == "append":
                _, n, size, bump, codec = op
                epoch += bump
                vals = [b"%d-%d-" % (len(model), i) + b"v" * size for i in range(n)]
                r = plog.append_as_leader(
                    build_batch(
                        [Record(timestamp=clock.now, key=b"k", value=v) for v in vals],
                        compression=codec,
                    ),
                    epoch,
                    clock.now,
                )
                for i, v in enumerate(vals):
                    model[r.base_offset + i] = v
            elif kind == "truncate":
                target = int(op[1] * plog.log_end_offset)
                plog.truncate_to(target)
                model = {o: v for o, v in model.items() if o < plog.log_end_offset}
                if target < plog.log_start_offset:
                    model = {}
            elif kind == "roll":
                plog.roll()
            elif kind == "flush":
                plog.flush()
            elif kind == "delete_records":
                target = plog.log_start_offset + int(
                    op[1] * (plog.log_end_offset - plog.log_start_offset)
                )
                plog.delete_records_before(target)
            elif kind == "reopen":
                clean = op[1]
                rp, start = plog.recovery_point, plog.log_start_offset
                if clean:
                    plog.close()
                else:
                    del plog  # crash without damage: nothing may be lost
                plog = open_log(clean, rp, start)
            clock.advance(7)
            start = plog.log_start_offset
            expected = [(o, v) for o, v in sorted(model.items()) if o >= start]
            got = [(r.offset, r.value) for r in plog.read_records(start)]
            assert got == expected, kind
            assert plog.log_end_offset == (max(model) + 1 if model else plog.log_end_offset)
            assert plog.log_start_offset <= plog.log_end_offset
        plog.close()
