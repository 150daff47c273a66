package skiff.compat.clients;

import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.FileInputStream;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Apache Kafka 4.4 Java producer, transactional producer and consumer, case by case,
 * against one broker reached over several listeners.
 *
 * <p>Arguments: {@code <topic-prefix> <NAME>=<client.properties> ... -- <case> ...}. Each
 * properties file holds bootstrap.servers and the listener's security settings. The listeners
 * run in parallel, each its cases in order; every case prints one JSON line on stdout:
 * {@code {"listener", "case", "ok", "error", "ms", ...what the client saw}}. The program
 * asserts nothing: tests/compat/kafka/test_java_clients.py compares what was sent with what
 * came back.
 */
public final class ClientCases {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration POLL = Duration.ofMillis(100);
    private static final long CASE_TIMEOUT_MS = 60_000;

    private final String listener;
    private final Properties base;
    private final String prefix;
    private String step = "";  // what the running case was doing, reported if it fails

    private ClientCases(String listener, Properties base, String prefix) {
        this.listener = listener;
        this.base = base;
        this.prefix = prefix;
    }

    public static void main(String[] args) throws Exception {
        String prefix = args[0];
        Map<String, Properties> listeners = new LinkedHashMap<>();
        List<String> cases = new ArrayList<>();
        boolean inCases = false;
        for (int i = 1; i < args.length; i++) {
            if (args[i].equals("--")) {
                inCases = true;
            } else if (inCases) {
                cases.add(args[i]);
            } else {
                String[] kv = args[i].split("=", 2);
                Properties p = new Properties();
                try (InputStream in = new FileInputStream(kv[1])) {
                    p.load(in);
                }
                listeners.put(kv[0], p);
            }
        }
        ExecutorService pool = Executors.newFixedThreadPool(listeners.size());
        List<Future<?>> done = new ArrayList<>();
        for (Map.Entry<String, Properties> e : listeners.entrySet()) {
            ClientCases runner = new ClientCases(e.getKey(), e.getValue(), prefix);
            done.add(pool.submit(() -> runner.runAll(cases)));
        }
        for (Future<?> f : done) {
            f.get();
        }
        pool.shutdown();
        pool.awaitTermination(10, TimeUnit.SECONDS);
        System.out.flush();
        System.exit(0);  // consumer/producer threads of a failed case must not keep the JVM up
    }

    private void runAll(List<String> cases) {
        for (String c : cases) {
            Map<String, Object> out = new LinkedHashMap<>();
            step = "";
            out.put("listener", listener);
            out.put("case", c);
            long start = System.currentTimeMillis();
            try {
                out.putAll(run(c));
                out.put("ok", true);
            } catch (Throwable t) {
                out.put("ok", false);
                out.put("step", step);
                StringWriter sw = new StringWriter();
                t.printStackTrace(new PrintWriter(sw));
                out.put("error", sw.toString());
            }
            out.put("ms", System.currentTimeMillis() - start);
            emit(out);
        }
    }

    private static synchronized void emit(Map<String, Object> out) {
        try {
            System.out.println(JSON.writeValueAsString(out));
            System.out.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    private Map<String, Object> run(String c) throws Exception {
        switch (c) {
            case "acks": return acks();
            case "idempotence": return idempotence();
            case "codecs": return codecs();
            case "headers": return headers();
            case "timestamps": return timestamps();
            case "max_message": return maxMessage();
            case "transactions": return transactions();
            case "fencing": return fencing();
            case "read_committed": return readCommitted();
            case "group_range": return group("range", "org.apache.kafka.clients.consumer.RangeAssignor");
            case "group_cooperative": return group("cooperative", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
            case "group_consumer_protocol": return group("kip848", null);
            case "static_membership": return staticMembership();
            case "offsets": return offsets();
            default: throw new IllegalArgumentException("unknown case " + c);
        }
    }

    // ---- clients -------------------------------------------------------------------------

    private String topic(String name) {
        return prefix + "-" + listener.toLowerCase() + "-" + name;
    }

    private Properties props(Map<String, Object> extra) {
        Properties p = new Properties();
        p.putAll(base);
        p.put("client.id", "java-" + listener.toLowerCase());
        p.putAll(extra);
        return p;
    }

    private KafkaProducer<byte[], byte[]> producer(Map<String, Object> extra) {
        // Kafka's defaults (delivery.timeout.ms 120 s): a loaded machine has needed more than 30 s
        return new KafkaProducer<>(props(extra), new ByteArraySerializer(), new ByteArraySerializer());
    }

    private KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> extra) {
        Map<String, Object> m = new HashMap<>();
        m.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        m.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        m.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        m.putAll(extra);
        return new KafkaConsumer<>(props(m), new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    private Admin admin() {
        return Admin.create(props(Map.of()));
    }

    private void create(String topic, int partitions, Map<String, String> configs) throws Exception {
        try (Admin a = admin()) {
            a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs)))
                .all().get(30, TimeUnit.SECONDS);
            // CreateTopics answers once the controller has the topic; the leader serves it
            // only after applying that record. An idempotent producer's first two requests
            // around that moment lose the first one on Kafka 4.4 (KAFKA-15591, fixed in 4.5):
            // wait until ListOffsets, which only the leader answers, is served everywhere.
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int p = 0; p < partitions; p++) {
                latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
            }
            // the admin's metadata may not have the new topic yet (seen once on Kafka 4.4 itself:
            // UnknownTopicOrPartitionException), so ask again until it does
            long deadline = System.currentTimeMillis() + 30_000;
            while (true) {
                try {
                    a.listOffsets(latest).all().get(30, TimeUnit.SECONDS);
                    return;
                } catch (java.util.concurrent.ExecutionException e) {
                    if (!(e.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException)
                            || System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                    Thread.sleep(100);
                }
            }
        }
    }

    private void awaitEndOffset(TopicPartition tp, long end) throws Exception {
        try (Admin a = admin()) {
            long deadline = System.currentTimeMillis() + 30_000;
            while (a.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp)
                    .get(30, TimeUnit.SECONDS).offset() < end) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException(tp + " did not reach offset " + end);
                }
                Thread.sleep(20);
            }
        }
    }

    private static byte[] b(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    private static String s(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    private static String sha256(byte[] b) throws Exception {
        StringBuilder sb = new StringBuilder();
        for (byte x : MessageDigest.getInstance("SHA-256").digest(b)) {
            sb.append(String.format("%02x", x));
        }
        return sb.toString();
    }

    private static Map<String, Object> meta(RecordMetadata m) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("p", m.partition());
        out.put("o", m.offset());
        out.put("ts", m.timestamp());
        return out;
    }

    private static Map<String, Object> rec(ConsumerRecord<byte[], byte[]> r) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("p", r.partition());
        out.put("o", r.offset());
        out.put("k", s(r.key()));
        if (r.value() != null && r.value().length > 256) {
            out.put("vlen", r.value().length);
            out.put("vsha", sha256(r.value()));
        } else {
            out.put("v", s(r.value()));
        }
        out.put("ts", r.timestamp());
        out.put("tt", r.timestampType().name);
        List<List<String>> hs = new ArrayList<>();
        for (Header h : r.headers()) {
            hs.add(Arrays.asList(h.key(), s(h.value())));
        }
        out.put("h", hs);
        return out;
    }

    /** Every record of `topic` from the beginning to the end offsets the consumer sees now. */
    private List<Map<String, Object>> readAll(String topic, String isolation) throws Exception {
        try (KafkaConsumer<byte[], byte[]> c = consumer(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
            List<TopicPartition> tps = c.partitionsFor(topic).stream()
                .map(pi -> new TopicPartition(topic, pi.partition())).collect(Collectors.toList());
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            List<Map<String, Object>> out = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline) {
                boolean atEnd = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp) < end.get(tp)) {
                        atEnd = false;
                    }
                }
                if (atEnd) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(POLL)) {
                    out.add(rec(r));
                }
            }
            return out;
        }
    }

    private static String errorName(Throwable t) {
        Throwable x = t;
        while ((x instanceof java.util.concurrent.ExecutionException
                || x instanceof org.apache.kafka.common.KafkaException && x.getClass() == org.apache.kafka.common.KafkaException.class)
               && x.getCause() != null) {
            x = x.getCause();
        }
        return x.getClass().getSimpleName();
    }

    // ---- producer ------------------------------------------------------------------------

    private Map<String, Object> acks() throws Exception {
        String t = topic("acks");
        create(t, 1, Map.of());
        Map<String, Object> sent = new LinkedHashMap<>();
        long t0 = System.currentTimeMillis();
        List<Long> phases = new ArrayList<>();
        for (String acks : List.of("0", "1", "all")) {
            List<Map<String, Object>> metas = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of(ProducerConfig.ACKS_CONFIG, acks))) {
                List<Future<RecordMetadata>> fs = new ArrayList<>();
                for (int i = 0; i < 5; i++) {
                    fs.add(p.send(new ProducerRecord<>(t, b("acks" + acks + "-k" + i), b("acks" + acks + "-v" + i))));
                }
                p.flush();
                for (Future<RecordMetadata> f : fs) {
                    metas.add(meta(f.get()));
                }
            }
            sent.put(acks, metas);
            if (acks.equals("0")) {
                // nothing tells an acks=0 producer that its requests were appended, and the
                // next producer's connection may be served first (seen on Kafka 4.4 itself,
                // a loaded machine): the next one starts once all five are in the log
                awaitEndOffset(new TopicPartition(t, 0), 5);
            }
            phases.add(System.currentTimeMillis() - t0);
        }
        List<Map<String, Object>> recs = readAll(t, "read_uncommitted");
        phases.add(System.currentTimeMillis() - t0);
        return Map.of("sent", sent, "records", recs, "phases", phases);
    }

    private Map<String, Object> idempotence() throws Exception {
        String t = topic("idempotence");
        create(t, 3, Map.of());
        List<Map<String, Object>> metas = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true",
                ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5",
                ProducerConfig.LINGER_MS_CONFIG, "2",
                ProducerConfig.BATCH_SIZE_CONFIG, "512"))) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < 300; i++) {
                fs.add(p.send(new ProducerRecord<>(t, i % 3, b("k" + i), b("idem-" + i))));
            }
            p.flush();
            for (Future<RecordMetadata> f : fs) {
                metas.add(meta(f.get()));
            }
        }
        return Map.of("sent", metas, "records", readAll(t, "read_uncommitted"));
    }

    private Map<String, Object> codecs() throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        for (String codec : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
            String t = topic("codec-" + codec);
            create(t, 1, Map.of());
            List<Map<String, Object>> metas = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of(
                    ProducerConfig.COMPRESSION_TYPE_CONFIG, codec, ProducerConfig.LINGER_MS_CONFIG, "20"))) {
                List<Future<RecordMetadata>> fs = new ArrayList<>();
                for (int i = 0; i < 40; i++) {
                    String v = codec + "-" + i + "-" + "abcdefgh".repeat(i % 7 + 1);
                    fs.add(p.send(new ProducerRecord<>(t, b(codec + "-k" + i), b(v))));
                }
                p.flush();
                for (Future<RecordMetadata> f : fs) {
                    metas.add(meta(f.get()));
                }
            }
            out.put(codec, Map.of("sent", metas, "records", readAll(t, "read_uncommitted")));
        }
        return Map.of("codecs", out);
    }

    private Map<String, Object> headers() throws Exception {
        String t = topic("headers");
        create(t, 1, Map.of());
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            List<Header> hs = List.of(
                new RecordHeader("dup", b("first")), new RecordHeader("z", b("")),
                new RecordHeader("nul", (byte[]) null), new RecordHeader("dup", b("second")),
                new RecordHeader("a", b("x")), new RecordHeader("ünï", b("ħ€")),
                new RecordHeader("dup", b("third")));
            p.send(new ProducerRecord<>(t, (Integer) null, b("with-headers"), b("v0"), hs)).get();
            p.send(new ProducerRecord<>(t, b("no-headers"), b("v1"))).get();
            p.send(new ProducerRecord<byte[], byte[]>(t, (Integer) null, (byte[]) null, (byte[]) null,
                List.<Header>of(new RecordHeader("only", (byte[]) null)))).get();
        }
        return Map.of("records", readAll(t, "read_uncommitted"));
    }

    private Map<String, Object> timestamps() throws Exception {
        String t = topic("timestamps");
        create(t, 1, Map.of("retention.ms", "-1"));  // timestamps 0, 1 and 2001: not for retention
        long now = System.currentTimeMillis();
        List<Long> stamps = Arrays.asList(0L, 1L, 1_000_000_000_000L, now - 86_400_000L, now - 5_000L, null);
        List<Map<String, Object>> metas = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < stamps.size(); i++) {
                metas.add(meta(p.send(new ProducerRecord<>(t, 0, stamps.get(i), b("ts" + i), b("v" + i))).get()));
            }
        }
        return Map.of("stamps", stamps, "before_ms", now, "after_ms", System.currentTimeMillis(),
                      "sent", metas, "records", readAll(t, "read_uncommitted"));
    }

    private static int varintSize(int v) {
        int z = (v << 1) ^ (v >> 31);
        int n = 1;
        while ((z & 0xffffff80) != 0) {
            n++;
            z >>>= 7;
        }
        return n;
    }

    /** The size of a v2 batch holding one record (no key, no headers) with a value of `n` bytes. */
    private static int batchSize(int n) {
        int body = 1 + 1 + 1 + varintSize(-1) + varintSize(n) + n + varintSize(0);
        return 61 + varintSize(body) + body;
    }

    private Map<String, Object> maxMessage() throws Exception {
        int limit = 50_000;
        String t = topic("max-message");
        create(t, 1, Map.of("max.message.bytes", Integer.toString(limit)));
        int n = limit - 100;
        while (batchSize(n + 1) <= limit) {
            n++;
        }
        byte[] atLimit = new byte[n];
        byte[] overLimit = new byte[n + 1];
        Arrays.fill(atLimit, (byte) 'a');
        Arrays.fill(overLimit, (byte) 'b');
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("limit", limit);
        out.put("at_limit_batch", batchSize(n));
        out.put("over_limit_batch", batchSize(n + 1));
        out.put("at_limit_len", n);
        out.put("at_limit_sha", sha256(atLimit));
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none"))) {
            out.put("at_limit", meta(p.send(new ProducerRecord<>(t, null, atLimit)).get()));
            try {
                out.put("over_limit", meta(p.send(new ProducerRecord<>(t, null, overLimit)).get()));
            } catch (Exception e) {
                out.put("over_limit_error", errorName(e));
            }
            // the producer goes on after the refusal
            out.put("after", meta(p.send(new ProducerRecord<>(t, b("k"), b("after"))).get()));
        }
        out.put("records", readAll(t, "read_uncommitted"));
        return out;
    }

    // ---- transactions --------------------------------------------------------------------

    private KafkaProducer<byte[], byte[]> txProducer(String tid) {
        return producer(Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid,
                               ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000"));
    }

    private Map<String, Object> transactions() throws Exception {
        String t = topic("txn");
        String in = topic("txn-in");
        String group = topic("txn-group");
        create(t, 2, Map.of());
        create(in, 1, Map.of());
        try (KafkaProducer<byte[], byte[]> p = txProducer(topic("tx"))) {
            step = "initTransactions";
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < 5; i++) {
                p.send(new ProducerRecord<>(t, i % 2, b("c1-" + i), b("c1-" + i)));
            }
            step = "commit 1";
            p.commitTransaction();
            step = "transaction 2";
            p.beginTransaction();
            for (int i = 0; i < 5; i++) {
                p.send(new ProducerRecord<>(t, i % 2, b("a-" + i), b("a-" + i)));
            }
            p.flush();
            step = "abort 2";
            p.abortTransaction();
            step = "transaction 3";
            p.beginTransaction();
            for (int i = 0; i < 5; i++) {
                p.send(new ProducerRecord<>(t, i % 2, b("c2-" + i), b("c2-" + i)));
            }
            step = "sendOffsetsToTransaction";
            p.sendOffsetsToTransaction(Map.of(new TopicPartition(in, 0), new OffsetAndMetadata(42, "tx-meta")),
                                       new ConsumerGroupMetadata(group));
            step = "commit 3";
            p.commitTransaction();
        }
        Map<String, Object> committed = new LinkedHashMap<>();
        try (Admin a = admin()) {
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                    a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS).entrySet()) {
                committed.put(e.getKey().toString(), Arrays.asList(e.getValue().offset(), e.getValue().metadata()));
            }
        }
        return Map.of("committed_offsets", committed,
                      "read_committed", readAll(t, "read_committed"),
                      "read_uncommitted", readAll(t, "read_uncommitted"));
    }

    private Map<String, Object> fencing() throws Exception {
        String t = topic("fencing");
        create(t, 1, Map.of());
        String tid = topic("fenced-tx");
        Map<String, Object> out = new LinkedHashMap<>();
        KafkaProducer<byte[], byte[]> first = txProducer(tid);
        try {
            first.initTransactions();
            first.beginTransaction();
            first.send(new ProducerRecord<>(t, b("first-1"), b("first-1"))).get();
            try (KafkaProducer<byte[], byte[]> second = txProducer(tid)) {
                second.initTransactions();  // fences the first and aborts its transaction
                try {
                    first.send(new ProducerRecord<>(t, b("first-2"), b("first-2"))).get();
                    out.put("first_send_error", null);
                } catch (Exception e) {
                    out.put("first_send_error", errorName(e));
                }
                try {
                    first.commitTransaction();
                    out.put("first_commit_error", null);
                } catch (Exception e) {
                    out.put("first_commit_error", errorName(e));
                }
                second.beginTransaction();
                Future<RecordMetadata> sent = second.send(
                    new ProducerRecord<>(t, b("second-1"), b("second-1")));
                commitAfterSend(second, "second", sent);
            }
        } finally {
            first.close(Duration.ofSeconds(5));
        }
        // fenced with nothing sent in between: the old epoch reaches the coordinator in EndTxn
        KafkaProducer<byte[], byte[]> third = txProducer(tid);
        try {
            third.initTransactions();
            third.beginTransaction();
            third.send(new ProducerRecord<>(t, b("third-1"), b("third-1"))).get();
            try (KafkaProducer<byte[], byte[]> fourth = txProducer(tid)) {
                fourth.initTransactions();
                try {
                    third.commitTransaction();
                    out.put("commit_only_error", null);
                } catch (Exception e) {
                    out.put("commit_only_error", errorName(e));
                }
                fourth.beginTransaction();
                Future<RecordMetadata> sent = fourth.send(
                    new ProducerRecord<>(t, b("second-2"), b("second-2")));
                commitAfterSend(fourth, "fourth", sent);
            }
        } finally {
            third.close(Duration.ofSeconds(5));
        }
        out.put("read_committed", readAll(t, "read_committed"));
        return out;
    }

    /** Commits; a failed commit says what became of the send before it (its offset, its
     * error, or not done), which tells a refused EndTxn from a refused Produce. */
    private static void commitAfterSend(KafkaProducer<byte[], byte[]> p, String who,
                                        Future<RecordMetadata> sent) {
        try {
            p.commitTransaction();
        } catch (RuntimeException e) {
            String send;
            if (!sent.isDone()) {
                send = "not done";
            } else {
                try {
                    RecordMetadata m = sent.get();
                    send = "appended at " + m.topic() + "-" + m.partition() + "@" + m.offset();
                } catch (Exception err) {
                    send = "failed: " + err.getCause();
                }
            }
            throw new IllegalStateException(who + "'s commit failed; its send " + send, e);
        }
    }

    private Map<String, Object> readCommitted() throws Exception {
        String t = topic("lso");
        create(t, 1, Map.of());
        TopicPartition tp = new TopicPartition(t, 0);
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaProducer<byte[], byte[]> plain = producer(Map.of())) {
            plain.send(new ProducerRecord<>(t, b("plain-0"), b("plain-0"))).get();
            plain.send(new ProducerRecord<>(t, b("plain-1"), b("plain-1"))).get();
        }
        try (KafkaProducer<byte[], byte[]> p = txProducer(topic("lso-tx"));
             KafkaConsumer<byte[], byte[]> rc = consumer(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"));
             KafkaConsumer<byte[], byte[]> ru = consumer(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted"))) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < 3; i++) {
                p.send(new ProducerRecord<>(t, b("open-" + i), b("open-" + i)));
            }
            p.flush();
            out.put("open_end_read_committed", rc.endOffsets(List.of(tp)).get(tp));
            out.put("open_end_read_uncommitted", ru.endOffsets(List.of(tp)).get(tp));
            rc.assign(List.of(tp));
            rc.seekToBeginning(List.of(tp));
            List<Map<String, Object>> seen = new ArrayList<>();
            long until = System.currentTimeMillis() + 2_000;
            while (System.currentTimeMillis() < until) {
                for (ConsumerRecord<byte[], byte[]> r : rc.poll(POLL)) {
                    seen.add(rec(r));
                }
            }
            out.put("open_read_committed", seen);
            out.put("open_position_read_committed", rc.position(tp));
            p.commitTransaction();
            // EndTxn is answered once the commit is decided; the markers follow, so the
            // last stable offset moves shortly after commitTransaction() returns
            long lsoDeadline = System.currentTimeMillis() + 15_000;
            long lso = rc.endOffsets(List.of(tp)).get(tp);
            while (lso == 2 && System.currentTimeMillis() < lsoDeadline) {
                Thread.sleep(50);
                lso = rc.endOffsets(List.of(tp)).get(tp);
            }
            out.put("committed_end_read_committed", lso);
            List<Map<String, Object>> after = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 15_000;
            while (after.size() < 3 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : rc.poll(POLL)) {
                    after.add(rec(r));
                }
            }
            out.put("committed_read_committed", after);
        }
        return out;
    }

    // ---- consumer groups -----------------------------------------------------------------

    /** Records what the rebalance listener was told, in order. */
    private static final class Events implements ConsumerRebalanceListener {
        final List<List<Object>> events = new ArrayList<>();

        private static List<Integer> ps(Collection<TopicPartition> tps) {
            return tps.stream().map(TopicPartition::partition).sorted().collect(Collectors.toList());
        }

        @Override
        public synchronized void onPartitionsRevoked(Collection<TopicPartition> tps) {
            events.add(List.of("revoked", ps(tps)));
        }

        @Override
        public synchronized void onPartitionsAssigned(Collection<TopicPartition> tps) {
            events.add(List.of("assigned", ps(tps)));
        }

        @Override
        public synchronized void onPartitionsLost(Collection<TopicPartition> tps) {
            events.add(List.of("lost", ps(tps)));
        }

        synchronized List<List<Object>> snapshot() {
            return new ArrayList<>(events);
        }
    }

    private static Set<Integer> owned(KafkaConsumer<byte[], byte[]> c) {
        return c.assignment().stream().map(TopicPartition::partition).collect(Collectors.toCollection(TreeSet::new));
    }

    private Map<String, Object> groupConfig(String group, String assignor, String instance) {
        Map<String, Object> m = new HashMap<>();
        m.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        if (assignor == null) {
            m.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        } else {
            m.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
            m.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
            m.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        }
        if (instance != null) {
            m.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
        }
        return m;
    }

    /** Polls every consumer in turn until `done` holds; records go to `sink` per consumer. */
    private static void pollUntil(List<KafkaConsumer<byte[], byte[]>> cs, List<List<Map<String, Object>>> sink,
                                  java.util.function.BooleanSupplier done, String what) throws Exception {
        long deadline = System.currentTimeMillis() + CASE_TIMEOUT_MS;
        while (!done.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("timed out waiting for " + what);
            }
            for (int i = 0; i < cs.size(); i++) {
                for (ConsumerRecord<byte[], byte[]> r : cs.get(i).poll(POLL)) {
                    sink.get(i).add(rec(r));
                }
            }
        }
    }

    private Map<String, Object> describe(String group) throws Exception {
        try (Admin a = admin()) {
            ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS).get(group);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("type", d.type().toString());
            out.put("state", d.groupState().toString());
            out.put("assignor", d.partitionAssignor());
            List<Map<String, Object>> members = new ArrayList<>();
            for (MemberDescription m : d.members()) {
                Map<String, Object> md = new LinkedHashMap<>();
                md.put("instance", m.groupInstanceId().orElse(null));
                md.put("client_id", m.clientId());
                md.put("partitions", m.assignment().topicPartitions().stream()
                    .map(TopicPartition::partition).sorted().collect(Collectors.toList()));
                members.add(md);
            }
            members.sort((x, y) -> x.get("partitions").toString().compareTo(y.get("partitions").toString()));
            out.put("members", members);
            Map<String, Object> offsets = new LinkedHashMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                    a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS).entrySet()) {
                offsets.put(Integer.toString(e.getKey().partition()), e.getValue().offset());
            }
            out.put("committed", offsets);
            return out;
        }
    }

    private void produceSpread(String t, int partitions, int perPartition) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < partitions * perPartition; i++) {
                p.send(new ProducerRecord<>(t, i % partitions, b("k" + i), b("v" + i)));
            }
            p.flush();
        }
    }

    /**
     * Two members join one group on a 4-partition topic (the second after the first owns
     * everything); records produced once the assignment settled are read by their owners;
     * both commit; the group is described before they leave.
     */
    private Map<String, Object> group(String name, String assignor) throws Exception {
        String t = topic("group-" + name);
        String group = topic("g-" + name);
        create(t, 4, Map.of());
        Events e1 = new Events();
        Events e2 = new Events();
        Map<String, Object> out = new LinkedHashMap<>();
        List<List<Map<String, Object>>> got = List.of(new ArrayList<>(), new ArrayList<>());
        try (KafkaConsumer<byte[], byte[]> c1 = consumer(groupConfig(group, assignor, null));
             KafkaConsumer<byte[], byte[]> c2 = consumer(groupConfig(group, assignor, null))) {
            c1.subscribe(List.of(t), e1);
            pollUntil(List.of(c1), got, () -> owned(c1).size() == 4, "the first member to own 4 partitions");
            out.put("first_alone", owned(c1));
            c2.subscribe(List.of(t), e2);
            List<KafkaConsumer<byte[], byte[]>> both = List.of(c1, c2);
            pollUntil(both, got, () -> owned(c1).size() + owned(c2).size() == 4
                      && !owned(c1).isEmpty() && !owned(c2).isEmpty(), "two members owning 2 partitions each");
            out.put("owned", List.of(owned(c1), owned(c2)));
            produceSpread(t, 4, 10);
            pollUntil(both, got, () -> got.get(0).size() + got.get(1).size() >= 40, "40 records");
            out.put("owned_after", List.of(owned(c1), owned(c2)));
            c1.commitSync();
            c2.commitSync();
            out.put("records", got);
            out.put("group", describe(group));
            out.put("events", List.of(e1.snapshot(), e2.snapshot()));
        }
        return out;
    }

    /**
     * Two static members (group.instance.id a and b); a closes without leaving the group
     * (static members do not send LeaveGroup), a new consumer with instance id a takes its
     * place and gets the same partitions back, and b sees no rebalance.
     */
    private Map<String, Object> staticMembership() throws Exception {
        String t = topic("static");
        String group = topic("g-static");
        String assignor = "org.apache.kafka.clients.consumer.RangeAssignor";
        create(t, 4, Map.of());
        Map<String, Object> out = new LinkedHashMap<>();
        Events ea = new Events();
        Events eb = new Events();
        Events ea2 = new Events();
        List<List<Map<String, Object>>> got = List.of(new ArrayList<>(), new ArrayList<>());
        try (KafkaConsumer<byte[], byte[]> b1 = consumer(groupConfig(group, assignor, "b"))) {
            KafkaConsumer<byte[], byte[]> a1 = consumer(groupConfig(group, assignor, "a"));
            a1.subscribe(List.of(t), ea);
            b1.subscribe(List.of(t), eb);
            pollUntil(List.of(a1, b1), got, () -> owned(a1).size() == 2 && owned(b1).size() == 2,
                      "two static members owning 2 partitions each");
            out.put("owned", List.of(owned(a1), owned(b1)));
            out.put("group", describe(group));
            a1.close(Duration.ofSeconds(10));
            int bEvents = eb.snapshot().size();
            try (KafkaConsumer<byte[], byte[]> a2 = consumer(groupConfig(group, assignor, "a"))) {
                a2.subscribe(List.of(t), ea2);
                pollUntil(List.of(a2, b1), got, () -> !owned(a2).isEmpty(), "the replacement to own partitions");
                long until = System.currentTimeMillis() + 3_000;
                pollUntil(List.of(a2, b1), got, () -> System.currentTimeMillis() > until, "3 s");
                out.put("owned_after", List.of(owned(a2), owned(b1)));
                out.put("b_events_before", eb.snapshot().subList(0, bEvents));
                out.put("b_events_after", eb.snapshot().subList(bEvents, eb.snapshot().size()));
                out.put("a_events", ea.snapshot());
                out.put("a2_events", ea2.snapshot());
                out.put("group_after", describe(group));
            }
        }
        return out;
    }

    // ---- offsets -------------------------------------------------------------------------

    private Map<String, Object> offsets() throws Exception {
        String t = topic("offsets");
        create(t, 1, Map.of());
        TopicPartition tp = new TopicPartition(t, 0);
        long base = System.currentTimeMillis() - 600_000;
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(t, 0, base + i * 1000L, b("k" + i), b("v" + i)));
            }
            p.flush();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("base", base);
        try (KafkaConsumer<byte[], byte[]> c = consumer(Map.of())) {
            out.put("beginning", c.beginningOffsets(List.of(tp)).get(tp));
            out.put("end", c.endOffsets(List.of(tp)).get(tp));
            Map<String, Object> times = new LinkedHashMap<>();
            for (long q : List.of(0L, base, base + 3500, base + 9000, base + 9001, System.currentTimeMillis())) {
                OffsetAndTimestamp o = c.offsetsForTimes(Map.of(tp, q)).get(tp);
                times.put(Long.toString(q), o == null ? null : List.of(o.offset(), o.timestamp()));
            }
            out.put("for_times", times);
            c.assign(List.of(tp));
            c.seek(tp, 5);
            List<Map<String, Object>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 15_000;
            while (got.isEmpty() && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(POLL)) {
                    got.add(rec(r));
                }
            }
            out.put("after_seek_5", got);
            c.seekToEnd(List.of(tp));
            out.put("position_end", c.position(tp));
            c.seekToBeginning(List.of(tp));
            out.put("position_beginning", c.position(tp));
            try (Admin a = admin()) {
                a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(3))).all().get(30, TimeUnit.SECONDS);
            }
            out.put("beginning_after_delete", c.beginningOffsets(List.of(tp)).get(tp));
            c.seekToBeginning(List.of(tp));
            out.put("position_beginning_after_delete", c.position(tp));
        }
        return out;
    }
}
