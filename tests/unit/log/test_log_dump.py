import struct

from loghelpers import batch

from broker.log import LogConfig
from broker.log.dump import main
from broker.protocol.compression import Compression


def make_log(open_log, clock):
    plog = open_log(LogConfig(segment_bytes=100_000, index_interval_bytes=100))
    for i in range(12):
        plog.append_as_leader(
            batch(2, tag=i, compression=Compression.GZIP if i % 2 else 0), 5, clock.now
        )
    plog.close()
    return plog.dir


def test_dump_prints_batches_records_and_indexes(open_log, clock, capsys):
    d = make_log(open_log, clock)
    seg = d / "00000000000000000000"
    rc = main(
        [
            str(seg.with_suffix(".log")),
            str(seg.with_suffix(".index")),
            str(seg.with_suffix(".timeindex")),
            str(d / "leader-epoch-checkpoint"),
            "--verify",
            "--print-data",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.count("baseOffset: ") == 12 and out.count("| offset: ") == 24
    assert "baseOffset: 2 lastOffset: 3 count: 2" in out and "compresscodec: gzip" in out
    assert "partitionLeaderEpoch: 5" in out and "isvalid: true" in out
    assert "| offset: 3 CreateTime: " in out and "key: k payload: 1:1:xxxxx" in out
    assert "offset: 5 position: " in out  # index entries
    assert "epoch: 5 startOffset: 0" in out
    assert out.count("Verification passed") == 3


def test_verify_reports_bad_crc_and_bad_index(open_log, clock, capsys):
    d = make_log(open_log, clock)
    seg = d / "00000000000000000000"
    log = bytearray(seg.with_suffix(".log").read_bytes())
    log[40] ^= 0x10  # inside the first batch's CRC-covered bytes
    seg.with_suffix(".log").write_bytes(log)
    assert main([str(seg.with_suffix(".log")), "--verify"]) == 1
    assert "isvalid: false" in capsys.readouterr().out
    idx = bytearray(seg.with_suffix(".index").read_bytes())
    struct.pack_into(">i", idx, 4, 7)  # first entry points mid-batch
    seg.with_suffix(".index").write_bytes(idx)
    assert main([str(seg.with_suffix(".index")), "--verify"]) == 1
    assert "does not match the log" in capsys.readouterr().out


def test_truncated_log_and_bad_arguments(open_log, clock, capsys, tmp_path):
    d = make_log(open_log, clock)
    log = d / "00000000000000000000.log"
    log.write_bytes(log.read_bytes()[:-5])
    assert main([str(log)]) == 1
    assert "Found invalid data" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.log")]) == 1
    assert main([]) == 2


def test_preallocated_indexes_before_their_first_entry(open_log, clock, capsys):
    """Kafka's active segment: its .index and .timeindex preallocated (zeros) before the first
    entry is written. That is no entry, not an entry (offset base, position 0) / (timestamp
    0, offset base) that the log contradicts; a closed segment's lone zero entry stays one."""
    d = make_log(open_log, clock)
    seg = d / "00000000000000000000"
    idx, tidx = seg.with_suffix(".index"), seg.with_suffix(".timeindex")
    idx.write_bytes(bytes(8 * 1000))
    tidx.write_bytes(bytes(12 * 1000))
    assert main([str(idx), str(tidx), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "offset: " not in out.replace("Dumping", "") and out.count("Verification passed") == 2
    # one zero entry and nothing after it (a trimmed file): a real entry, checked against the
    # log; the first batch holds offsets 0-1, so (offset 0, position 0) does not match it
    idx.write_bytes(bytes(8))
    assert main([str(idx), "--verify"]) == 1
    assert "Index entry offset: 0 position: 0 does not match the log" in capsys.readouterr().out
