package skiff.compat.share;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Share groups (KIP-932) with Kafka 4.4's KafkaShareConsumer. Prints one JSON line per case
 * with what the consumers received.
 *
 * <ul>
 * <li>{@code enable}: share.version=1 through Admin.updateFeatures (as kafka-features does).
 * <li>{@code disjoint}: four consumers (implicit acknowledgement: every record ACCEPTed) on
 *     one partition; per consumer the offsets it received, and the group as
 *     Admin.describeShareGroups and listGroups(forShareGroups) see it while they poll.
 * <li>{@code explicit}: consumer c1 polls once and ACCEPTs offset 0, RELEASEs 1, REJECTs 2
 *     and leaves 3 unacknowledged; consumer c2 then polls for a while, RELEASEs every record
 *     delivered to it with offset 1 and ACCEPTs the others; every delivery (consumer, offset,
 *     delivery count) in order.
 * <li>{@code renew}: c1 holds one record past its lock duration, RENEWing it (KIP-1222) at
 *     two fifths of it, then ACCEPTs it when its client hands it back; c2 polls all along;
 *     every delivery, and whether c1's acknowledgements failed.
 * <li>{@code renew_off}: the group's share.renew.acknowledge.enable set to false; c1 polls
 *     one record and RENEWs it: the error its commit gets per partition (exception class and
 *     message), then the same record ACCEPTed and that commit's errors.
 * <li>{@code accept}: a topic with {@code count} records; consumer c1 (explicit
 *     acknowledgement) polls until it has {@code accept} records, ACCEPTs those and commits,
 *     leaves the rest it got unacknowledged, and is not closed (the JVM ends with it, as a
 *     crashed consumer would); the offsets it ACCEPTed and the ones it left.
 * <li>{@code drain}: a consumer (implicit acknowledgement) polls until it got {@code expected}
 *     records and then {@code quietMs} more for any redelivery; every offset it got, in order.
 * <li>{@code isolation}: a one-partition topic holding, in order, a committed transaction
 *     (c0-c2), an aborted one (a0-a2), a plain record (p0), a committed transaction (c3) and
 *     one left open (o0); two groups from the earliest offset, {@code group-rc} with
 *     share.isolation.level=read_committed and {@code group-ru} at the default
 *     (read_uncommitted), each drained by one consumer until {@code quietMs} pass without a
 *     record (the open transaction is aborted after); the values each got, in order.
 * <li>{@code speedup}: a one-partition topic with {@code count} records, 5 ms of work (a
 *     sleep) per record, {@code max.poll.records} as given (default 10): a group of one
 *     consumer, then a fresh group of four in parallel threads, each timed from its first
 *     record to the last one acknowledged; both durations, their ratio, when each of the four
 *     got its first record, and the offsets each got.
 * </ul>
 */
public final class ShareCases {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final String bootstrap;

    private ShareCases(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    /** Args: bootstrap, then cases as {@code name:topic:group:number} (or {@code enable}),
     * run in order in this one JVM; one JSON line each. */
    public static void main(String[] args) throws Exception {
        ShareCases c = new ShareCases(args[0]);
        for (int i = 1; i < args.length; i++) {
            String[] a = args[i].split(":");
            String result;
            switch (a[0]) {
                case "enable" -> result = c.enable();
                case "disjoint" -> result = c.disjoint(a[1], a[2], Integer.parseInt(a[3]));
                case "explicit" -> result = c.explicit(a[1], a[2], Long.parseLong(a[3]));
                case "renew" -> result = c.renew(a[1], a[2], Long.parseLong(a[3]));
                case "renew_off" -> result = c.renewOff(a[1], a[2]);
                case "dlq" -> result = c.dlq(a[1], a[2], Boolean.parseBoolean(a[3]));
                case "accept" -> result = c.accept(a[1], a[2], Integer.parseInt(a[3]),
                        Integer.parseInt(a[4]));
                case "drain" -> result = c.drain(a[1], a[2], Integer.parseInt(a[3]),
                        Long.parseLong(a[4]));
                case "isolation" -> result = c.isolation(a[1], a[2], Long.parseLong(a[3]));
                case "speedup" -> result = c.speedup(a[1], a[2], Integer.parseInt(a[3]),
                        a.length > 4 ? Integer.parseInt(a[4]) : 10);
                default -> throw new IllegalArgumentException(a[0]);
            }
            System.out.println(result);
            System.out.flush();
        }
        System.exit(0);
    }

    private Admin admin() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        return Admin.create(p);
    }

    private String enable() throws Exception {
        try (Admin a = admin()) {
            a.updateFeatures(Map.of("share.version",
                    new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)),
                    new UpdateFeaturesOptions()).all().get(30, TimeUnit.SECONDS);
            long deadline = System.currentTimeMillis() + 15000;
            while (System.currentTimeMillis() < deadline) {
                var f = a.describeFeatures().featureMetadata().get().finalizedFeatures().get("share.version");
                if (f != null && f.maxVersionLevel() >= 1) {
                    return "{\"case\": \"enable\", \"share.version\": " + f.maxVersionLevel() + "}";
                }
                Thread.sleep(100);
            }
        }
        return "{\"case\": \"enable\", \"share.version\": 0}";
    }

    /** A one-partition topic with `count` records, and the group reading from the earliest offset. */
    private void prepare(String topic, String group, int count) throws Exception {
        try (Admin a = admin()) {
            a.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        }
        fromEarliest(group);
        Properties p = producerProps();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
            }
        }
    }

    private void fromEarliest(String group) throws Exception {
        setGroupConfig(group, "share.auto.offset.reset", "earliest");
    }

    private void setGroupConfig(String group, String name, String value) throws Exception {
        try (Admin a = admin()) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            a.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                    new ConfigEntry(name, value), AlterConfigOp.OpType.SET))))
                    .all().get(30, TimeUnit.SECONDS);
        }
    }

    private Properties producerProps() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("linger.ms", "0");
        return p;
    }

    private KafkaShareConsumer<String, String> consumer(String group, String clientId, String ackMode,
                                                        int maxPollRecords) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", clientId);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", ackMode);
        p.put("max.poll.records", Integer.toString(maxPollRecords));
        return new KafkaShareConsumer<>(p);
    }

    private String disjoint(String topic, String group, int count) throws Exception {
        prepare(topic, group, count);
        int n = 4;
        Map<Integer, List<Long>> got = new ConcurrentHashMap<>();
        Map<Long, Boolean> seen = new ConcurrentHashMap<>();
        AtomicBoolean done = new AtomicBoolean(false);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        List<Future<?>> futures = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            final int id = i;
            got.put(id, Collections.synchronizedList(new ArrayList<>()));
            futures.add(pool.submit(() -> {
                try (KafkaShareConsumer<String, String> c = consumer(group, "c" + id, "implicit", 5)) {
                    c.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + 60000;
                    long quietUntil = Long.MAX_VALUE;
                    while (System.currentTimeMillis() < Math.min(deadline, quietUntil)) {
                        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(100));
                        for (ConsumerRecord<String, String> r : recs) {
                            got.get(id).add(r.offset());
                            seen.put(r.offset(), true);
                            Thread.sleep(5);  // 5 ms of work per record
                        }
                        if (seen.size() >= count && quietUntil == Long.MAX_VALUE) {
                            // everything delivered: keep polling a little to catch redeliveries
                            quietUntil = System.currentTimeMillis() + 1000;
                        }
                    }
                    c.commitSync();
                }
                return null;
            }));
        }
        // while the four are still polling: the group as Admin describes and lists it
        String described;
        try (Admin a = admin()) {
            long deadline = System.currentTimeMillis() + 60000;
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                Thread.sleep(20);
            }
            ShareGroupDescription d = a.describeShareGroups(List.of(group)).describedGroups()
                    .get(group).get(30, TimeUnit.SECONDS);
            List<String> members = new ArrayList<>();
            for (ShareMemberDescription m : d.members()) {
                members.add("{\"client\": \"" + m.clientId() + "\", \"epoch\": " + m.memberEpoch()
                        + ", \"partitions\": " + m.assignment().topicPartitions().size() + "}");
            }
            Collection<GroupListing> listed = a.listGroups(ListGroupsOptions.forShareGroups()).all()
                    .get(30, TimeUnit.SECONDS);
            String listing = listed.stream().filter(l -> l.groupId().equals(group))
                    .map(l -> "\"" + l.type().map(Object::toString).orElse("?") + "/"
                            + l.groupState().map(Object::toString).orElse("?") + "\"")
                    .reduce((x, y) -> x + ", " + y).orElse("");
            described = "\"state\": \"" + d.groupState() + "\", \"epoch\": " + d.groupEpoch()
                    + ", \"members\": [" + String.join(", ", members) + "], \"listed\": [" + listing + "]";
        }
        for (Future<?> f : futures) {
            f.get(120, TimeUnit.SECONDS);
        }
        pool.shutdown();
        StringBuilder sb = new StringBuilder("{\"case\": \"disjoint\", " + described + ", \"consumers\": [");
        for (int i = 0; i < n; i++) {
            if (i > 0) sb.append(", ");
            sb.append(got.get(i).toString());
        }
        return sb.append("]}").toString();
    }

    private String explicit(String topic, String group, long watchMs) throws Exception {
        prepare(topic, group, 4);
        List<String> deliveries = Collections.synchronizedList(new ArrayList<>());
        Map<String, Object> c1Result = new LinkedHashMap<>();
        try (KafkaShareConsumer<String, String> c1 = consumer(group, "c1", "explicit", 10)) {
            c1.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30000;
            List<ConsumerRecord<String, String>> first = new ArrayList<>();
            while (first.size() < 4 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c1.poll(Duration.ofMillis(200))) {
                    first.add(r);
                    deliveries.add(delivery("c1", r));
                    AcknowledgeType t = switch ((int) r.offset()) {
                        case 0 -> AcknowledgeType.ACCEPT;
                        case 1 -> AcknowledgeType.RELEASE;
                        case 2 -> AcknowledgeType.REJECT;
                        default -> null;
                    };
                    if (t != null) c1.acknowledge(r, t);
                }
                if (first.size() < 4 && !first.isEmpty()) break;
            }
            var committed = c1.commitSync(Duration.ofSeconds(10));
            c1Result.put("errors", committed.values().stream().filter(Optional::isPresent).count());
            // c1 does not poll again: offset 3 stays acquired by it until its lock expires
            try (KafkaShareConsumer<String, String> c2 = consumer(group, "c2", "explicit", 10)) {
                c2.subscribe(List.of(topic));
                long end = System.currentTimeMillis() + watchMs;
                while (System.currentTimeMillis() < end) {
                    for (ConsumerRecord<String, String> r : c2.poll(Duration.ofMillis(100))) {
                        deliveries.add(delivery("c2", r));
                        c2.acknowledge(r, r.offset() == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                    }
                    c2.commitSync(Duration.ofSeconds(10));
                }
            }
        }
        return "{\"case\": \"explicit\", \"c1_commit_errors\": " + c1Result.get("errors")
                + ", \"deliveries\": [" + String.join(", ", deliveries) + "]}";
    }

    private String renew(String topic, String group, long lockMs) throws Exception {
        prepare(topic, group, 1);
        List<String> deliveries = Collections.synchronizedList(new ArrayList<>());
        AtomicBoolean stop = new AtomicBoolean(false);
        long errors = 0;
        try (KafkaShareConsumer<String, String> c1 = consumer(group, "c1", "explicit", 10)) {
            c1.subscribe(List.of(topic));
            ConsumerRecord<String, String> held = null;
            long deadline = System.currentTimeMillis() + 30000;
            while (held == null && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c1.poll(Duration.ofMillis(200))) {
                    held = r;
                    deliveries.add(delivery("c1", r));
                }
            }
            ExecutorService pool = Executors.newSingleThreadExecutor();
            Future<?> watcher = pool.submit(() -> {
                try (KafkaShareConsumer<String, String> c2 = consumer(group, "c2", "explicit", 10)) {
                    c2.subscribe(List.of(topic));
                    while (!stop.get()) {
                        for (ConsumerRecord<String, String> r : c2.poll(Duration.ofMillis(100))) {
                            deliveries.add(delivery("c2", r));
                            c2.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        c2.commitSync(Duration.ofSeconds(10));
                    }
                }
                return null;
            });
            try {
                Thread.sleep(lockMs * 2 / 5);
                c1.acknowledge(held, AcknowledgeType.RENEW);
                errors += c1.commitSync(Duration.ofSeconds(10)).values().stream()
                        .filter(Optional::isPresent).count();
                // past the first lock, within the renewed one
                Thread.sleep(lockMs * 7 / 10);
                // the client hands a renewed record back on a later poll, to be acknowledged
                long until = System.currentTimeMillis() + lockMs / 2;
                boolean accepted = false;
                while (!accepted && System.currentTimeMillis() < until) {
                    for (ConsumerRecord<String, String> r : c1.poll(Duration.ofMillis(50))) {
                        deliveries.add(delivery("c1-again", r));
                        c1.acknowledge(r, AcknowledgeType.ACCEPT);
                        accepted = true;
                    }
                }
                errors += c1.commitSync(Duration.ofSeconds(10)).values().stream()
                        .filter(Optional::isPresent).count();
                Thread.sleep(500);
            } finally {
                stop.set(true);
                watcher.get(60, TimeUnit.SECONDS);
                pool.shutdown();
            }
        }
        return "{\"case\": \"renew\", \"c1_commit_errors\": " + errors + ", \"deliveries\": ["
                + String.join(", ", deliveries) + "]}";
    }

    private String renewOff(String topic, String group) throws Exception {
        prepare(topic, group, 1);
        setGroupConfig(group, "share.renew.acknowledge.enable", "false");
        try (KafkaShareConsumer<String, String> c1 = consumer(group, "c1", "explicit", 10)) {
            c1.subscribe(List.of(topic));
            ConsumerRecord<String, String> held = null;
            long deadline = System.currentTimeMillis() + 30000;
            while (held == null && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c1.poll(Duration.ofMillis(200))) {
                    held = r;
                }
            }
            if (held == null) {
                throw new IllegalStateException("no record delivered");
            }
            c1.acknowledge(held, AcknowledgeType.RENEW);
            List<String> renewErrors = commitErrors(c1);
            List<String> acceptErrors = new ArrayList<>();
            try {
                c1.acknowledge(held, AcknowledgeType.ACCEPT);
                acceptErrors.addAll(commitErrors(c1));
            } catch (RuntimeException e) {
                acceptErrors.add("thrown " + e.getClass().getSimpleName());
            }
            return "{\"case\": \"renew_off\", \"renew_errors\": " + JSON.writeValueAsString(renewErrors)
                    + ", \"accept_errors\": " + JSON.writeValueAsString(acceptErrors) + "}";
        }
    }

    private String dlq(String topic, String group, boolean copy) throws Exception {
        String dlqTopic = "dlq." + topic;
        try (Admin a = admin()) {
            // the records carry 1970 timestamps: a retention check (every 5 min) between the
            // produce and the consume once emptied Kafka's topic in CI
            a.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(Map.of("retention.ms", "-1")),
                    new NewTopic(dlqTopic, 2, (short) 1).configs(
                            Map.of("errors.deadletterqueue.group.enable", "true"))))
                    .all().get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            // the caller made them (with their replicas placed where it wants them)
            if (!(e.getCause() instanceof TopicExistsException)) {
                throw e;
            }
        }
        fromEarliest(group);
        setGroupConfig(group, "errors.deadletterqueue.topic.name", dlqTopic);
        setGroupConfig(group, "errors.deadletterqueue.copy.record.enable", Boolean.toString(copy));
        setGroupConfig(group, "share.delivery.count.limit", "2");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps())) {
            for (int i = 0; i < 4; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, null, 1000L + i, "k" + i, "v" + i);
                r.headers().add("h", ("hv" + i).getBytes());
                producer.send(r).get(30, TimeUnit.SECONDS);
            }
        }
        List<String> steps = new ArrayList<>();
        Set<Long> done = new HashSet<>();
        try (KafkaShareConsumer<String, String> c1 = consumer(group, "c1", "explicit", 10)) {
            c1.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60000;
            while (done.size() < 4 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c1.poll(Duration.ofMillis(200))) {
                    AcknowledgeType t = switch ((int) r.offset()) {
                        case 1 -> AcknowledgeType.REJECT;
                        case 2 -> AcknowledgeType.RELEASE;
                        default -> AcknowledgeType.ACCEPT;
                    };
                    steps.add(r.offset() + ":" + t + ":" + r.deliveryCount().orElse((short) -1));
                    c1.acknowledge(r, t);
                    if (t != AcknowledgeType.RELEASE || r.deliveryCount().orElse((short) 0) >= 2) {
                        done.add(r.offset());
                    }
                }
                commitErrors(c1);
            }
        }
        if (done.size() < 4) {
            throw new IllegalStateException("the share consumer finished " + done.size()
                    + " of 4 records in 60 s: " + steps);
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group + "-reader");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        List<Map<String, Object>> dlqRecords = new ArrayList<>();
        try (KafkaConsumer<String, String> reader = new KafkaConsumer<>(p)) {
            reader.subscribe(List.of(dlqTopic));
            long deadline = System.currentTimeMillis() + 15000;
            while (dlqRecords.size() < 2 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : reader.poll(Duration.ofMillis(200))) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("partition", r.partition());
                    m.put("offset", r.offset());
                    m.put("key", r.key());
                    m.put("value", r.value());
                    m.put("timestamp_type", r.timestampType().toString());
                    m.put("timestamp_is_original", r.timestamp() >= 1000L && r.timestamp() < 1004L);
                    List<String> headers = new ArrayList<>();
                    for (Header h : r.headers()) {
                        headers.add(h.key() + "=" + (h.value() == null ? "null" : new String(h.value())));
                    }
                    m.put("headers", headers);
                    dlqRecords.add(m);
                }
            }
        }
        return "{\"case\": \"dlq\", \"steps\": " + JSON.writeValueAsString(steps)
                + ", \"dlq\": " + JSON.writeValueAsString(dlqRecords) + "}";
    }

    private static List<String> commitErrors(KafkaShareConsumer<String, String> c) {
        List<String> out = new ArrayList<>();
        for (Optional<KafkaException> e : c.commitSync(Duration.ofSeconds(10)).values()) {
            e.ifPresent(x -> out.add(x.getClass().getSimpleName() + ": " + x.getMessage()));
        }
        return out;
    }

    private static String delivery(String consumer, ConsumerRecord<String, String> r) {
        return "{\"consumer\": \"" + consumer + "\", \"offset\": " + r.offset() + ", \"count\": "
                + r.deliveryCount().map(Object::toString).orElse("null") + "}";
    }

    private String accept(String topic, String group, int count, int accept) throws Exception {
        prepare(topic, group, count);
        List<Long> accepted = new ArrayList<>();
        List<Long> left = new ArrayList<>();
        // not closed: the JVM ends holding the rest, as a consumer that crashed would
        KafkaShareConsumer<String, String> c1 = consumer(group, "c1", "explicit", count);
        c1.subscribe(List.of(topic));
        long deadline = System.currentTimeMillis() + 60000;
        while (accepted.size() < accept && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c1.poll(Duration.ofMillis(200))) {
                if (accepted.size() < accept) {
                    c1.acknowledge(r, AcknowledgeType.ACCEPT);
                    accepted.add(r.offset());
                } else {
                    left.add(r.offset());
                }
            }
        }
        long errors = c1.commitSync(Duration.ofSeconds(30)).values().stream()
                .filter(Optional::isPresent).count();
        return "{\"case\": \"accept\", \"commit_errors\": " + errors + ", \"accepted\": "
                + accepted + ", \"left\": " + left + "}";
    }

    private String drain(String topic, String group, int expected, long quietMs) throws Exception {
        List<Long> got = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer(group, "drain", "implicit", 100)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 90000;
            long quietUntil = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, quietUntil)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    got.add(r.offset());
                }
                if (got.size() >= expected && quietUntil == Long.MAX_VALUE) {
                    quietUntil = System.currentTimeMillis() + quietMs;
                }
            }
            c.commitSync(Duration.ofSeconds(30));
        }
        return "{\"case\": \"drain\", \"offsets\": " + got + "}";
    }

    private String isolation(String topic, String group, long quietMs) throws Exception {
        String committed = group + "-rc";
        String uncommitted = group + "-ru";
        try (Admin a = admin()) {
            a.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        }
        setGroupConfig(committed, "share.isolation.level", "read_committed");
        fromEarliest(committed);
        fromEarliest(uncommitted);
        Properties p = producerProps();
        Properties tp = new Properties();
        tp.putAll(p);
        tp.put("transactional.id", topic + "-txn");
        Properties op = new Properties();
        op.putAll(p);
        op.put("transactional.id", topic + "-open");
        List<String> gotCommitted;
        List<String> gotUncommitted;
        try (KafkaProducer<String, String> txn = new KafkaProducer<>(tp);
             KafkaProducer<String, String> plain = new KafkaProducer<>(p);
             KafkaProducer<String, String> open = new KafkaProducer<>(op)) {
            txn.initTransactions();
            txn.beginTransaction();
            for (String v : List.of("c0", "c1", "c2")) {
                txn.send(new ProducerRecord<>(topic, v, v));
            }
            txn.commitTransaction();
            txn.beginTransaction();
            for (String v : List.of("a0", "a1", "a2")) {
                txn.send(new ProducerRecord<>(topic, v, v));
            }
            txn.flush();
            txn.abortTransaction();
            plain.send(new ProducerRecord<>(topic, "p0", "p0")).get(30, TimeUnit.SECONDS);
            txn.beginTransaction();
            txn.send(new ProducerRecord<>(topic, "c3", "c3"));
            txn.commitTransaction();
            open.initTransactions();
            open.beginTransaction();
            open.send(new ProducerRecord<>(topic, "o0", "o0")).get(30, TimeUnit.SECONDS);
            gotCommitted = drainValues(topic, committed, quietMs);
            gotUncommitted = drainValues(topic, uncommitted, quietMs);
            open.abortTransaction();
        }
        return "{\"case\": \"isolation\", \"read_committed\": " + jsonStrings(gotCommitted)
                + ", \"read_uncommitted\": " + jsonStrings(gotUncommitted) + "}";
    }

    /** One consumer's values, in order, until {@code quietMs} pass without a record (at most 60 s). */
    private List<String> drainValues(String topic, String group, long quietMs) throws Exception {
        List<String> got = new ArrayList<>();
        try (KafkaShareConsumer<String, String> c = consumer(group, group, "implicit", 100)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60000;
            long quietUntil = System.currentTimeMillis() + 20000;  // the first record may take a while
            while (System.currentTimeMillis() < Math.min(deadline, quietUntil)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    got.add(r.value());
                    quietUntil = System.currentTimeMillis() + quietMs;
                }
            }
            c.commitSync(Duration.ofSeconds(30));
        }
        return got;
    }

    private static String jsonStrings(List<String> values) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < values.size(); i++) {
            b.append(i == 0 ? "\"" : ", \"").append(values.get(i)).append('"');
        }
        return b.append(']').toString();
    }

    private String speedup(String topic, String group, int count, int maxPollRecords)
            throws Exception {
        prepare(topic, group + "-1", count);
        fromEarliest(group + "-4");
        Worked one = work(topic, group + "-1", 1, count, maxPollRecords);
        Worked four = work(topic, group + "-4", 4, count, maxPollRecords);
        StringBuilder sb = new StringBuilder("{\"case\": \"speedup\", \"count\": " + count
                + ", \"one_ms\": " + one.millis + ", \"four_ms\": " + four.millis
                + ", \"ratio\": " + String.format("%.3f", (double) one.millis / four.millis)
                + ", \"four_starts_ms\": " + four.starts + ", \"one_wait_ms\": " + one.waits
                + ", \"four_waits_ms\": " + four.waits
                + ", \"one\": " + one.got.get(0) + ", \"four\": [");
        for (int i = 0; i < 4; i++) {
            if (i > 0) sb.append(", ");
            sb.append(four.got.get(i));
        }
        return sb.append("]}").toString();
    }

    /** `starts`: when each consumer got its first record, in ms after the first of them;
     * `waits`: each consumer's longest wait, in ms, from the end of its work on one batch to
     * the next batch. */
    private record Worked(long millis, List<List<Long>> got, List<Long> starts, List<Long> waits) {}

    /** `n` consumers in parallel threads (implicit acknowledgement), 5 ms of work per record,
     * timed from the first record any of them got until all `count` are processed and the
     * batch that completed them is committed; then 1 s more of polling, for any redelivery. */
    private Worked work(String topic, String group, int n, int count, int maxPollRecords)
            throws Exception {
        List<List<Long>> got = new ArrayList<>();
        Map<Long, Boolean> seen = new ConcurrentHashMap<>();
        AtomicLongArray firsts = new AtomicLongArray(n);
        AtomicLongArray gaps = new AtomicLongArray(n);
        AtomicLong last = new AtomicLong(0);
        AtomicInteger processed = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(n);
        List<Future<?>> futures = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            final int id = i;
            List<Long> mine = Collections.synchronizedList(new ArrayList<>());
            got.add(mine);
            futures.add(pool.submit(() -> {
                try (KafkaShareConsumer<String, String> c = consumer(group, "w" + id, "implicit",
                        maxPollRecords)) {
                    c.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + 120000;
                    long quietUntil = Long.MAX_VALUE;
                    long workEnd = 0;
                    while (System.currentTimeMillis() < Math.min(deadline, quietUntil)) {
                        ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(100));
                        long now = System.nanoTime();
                        if (!recs.isEmpty()) {
                            firsts.compareAndSet(id, 0, now);
                            if (workEnd != 0 && processed.get() < count) {
                                gaps.set(id, Math.max(gaps.get(id), (now - workEnd) / 1_000_000));
                            }
                        }
                        int done = 0;
                        for (ConsumerRecord<String, String> r : recs) {
                            mine.add(r.offset());
                            seen.put(r.offset(), true);
                            Thread.sleep(5);  // 5 ms of work per record
                            done++;
                        }
                        // the batch is ACCEPTed with the next poll; the one that completes
                        // the count is committed at once
                        if (done > 0) workEnd = System.nanoTime();
                        if (done > 0 && processed.addAndGet(done) >= count && last.get() == 0) {
                            c.commitSync(Duration.ofSeconds(30));
                            last.compareAndSet(0, System.nanoTime());
                        }
                        if (seen.size() >= count && quietUntil == Long.MAX_VALUE) {
                            quietUntil = System.currentTimeMillis() + 1000;
                        }
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : futures) {
            f.get(180, TimeUnit.SECONDS);
        }
        pool.shutdown();
        long first = Long.MAX_VALUE;
        for (int i = 0; i < n; i++) {
            if (firsts.get(i) != 0) first = Math.min(first, firsts.get(i));
        }
        long millis = last.get() == 0 || first == Long.MAX_VALUE ? -1
                : (last.get() - first) / 1_000_000;
        List<Long> starts = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            starts.add(firsts.get(i) == 0 ? -1 : (firsts.get(i) - first) / 1_000_000);
        }
        List<Long> waits = new ArrayList<>();
        for (int i = 0; i < n; i++) waits.add(gaps.get(i));
        return new Worked(millis, got, starts, waits);
    }
}
