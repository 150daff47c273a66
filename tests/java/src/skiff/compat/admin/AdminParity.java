package skiff.compat.admin;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ClassicGroupDescription;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RaftVoterEndpoint;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Calls the methods of Kafka 4.4's {@link Admin} against one broker and prints one JSON line per
 * call: {"method", "status" ("ok" or the exception's class), "message", "result"}. The result
 * is normalised so the same steps give the same line against any Kafka-compatible broker: ids,
 * timestamps, sizes and host:port are left out, the broker's own node id reads "self".
 *
 * <p>Arguments: bootstrap servers, a prefix for every topic, group, user and transactional id
 * (so a broker shared with other tests gives the same answers).
 */
public final class AdminParity {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long CALL_TIMEOUT_S = 20;

    private final Admin admin;
    private final String bootstrap;
    private final String prefix;
    private final String topicA;
    private final String topicB;
    private final String topicC;
    private int selfId = -1;
    private String logDir;

    interface Call {
        Object run() throws Exception;
    }

    private AdminParity(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        this.topicA = prefix + "-a";
        this.topicB = prefix + "-b";
        this.topicC = prefix + "-c";
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, prefix + "-admin");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(AdminClientConfig.ENABLE_METRICS_PUSH_CONFIG, "true");
        this.admin = Admin.create(props);
    }

    public static void main(String[] args) throws Exception {
        AdminParity p = new AdminParity(args[0], args[1]);
        try {
            p.runAll();
        } finally {
            p.admin.close(Duration.ofSeconds(10));
        }
        System.out.flush();
        System.exit(0);
    }

    // ---------------------------------------------------------------- output

    private void call(String method, Call c) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("method", method);
        try {
            Object result = c.run();
            out.put("status", "ok");
            out.put("message", null);
            out.put("result", result);
        } catch (Throwable t) {
            Throwable e = t;
            while ((e instanceof ExecutionException || e instanceof java.util.concurrent.CompletionException)
                    && e.getCause() != null) {
                e = e.getCause();
            }
            out.put("status", e.getClass().getName());
            out.put("message", e.getMessage());
            out.put("result", null);
        }
        try {
            System.out.println(JSON.writeValueAsString(out));
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
        System.out.flush();
    }

    private static <T> T get(org.apache.kafka.common.KafkaFuture<T> f) throws Exception {
        return f.get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
    }

    interface Read<T> {
        T read() throws Exception;
    }

    /** A read retried for up to 10 s until `done` holds: Kafka's brokers apply a controller
     * change when its metadata record reaches them, so a read right after a write may not see
     * it yet. The last value read is returned either way. */
    private static <T> T eventually(Read<T> read, java.util.function.Predicate<T> done) throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        T value = read.read();
        while (!done.test(value) && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
            value = read.read();
        }
        return value;
    }

    private String node(Node n) {
        if (n == null || n.isEmpty()) {
            return null;
        }
        return n.id() == selfId ? "self" : "other";
    }

    private String node(int id) {
        return id == selfId ? "self" : id < 0 ? "none" : "other";
    }

    private static List<String> sortedOps(Set<AclOperation> ops) {
        if (ops == null) {
            return null;
        }
        return ops.stream().map(Enum::name).sorted().collect(Collectors.toList());
    }

    private static String tp(TopicPartition p) {
        return p.topic() + "-" + p.partition();
    }

    private static Map<String, Object> errorOf(Throwable t) {
        Map<String, Object> m = new TreeMap<>();
        m.put("error", t == null ? null : t.getClass().getName());
        return m;
    }

    /** For the per-item results of one call: "ok" or the item's exception class. */
    private static Map<String, String> perItem(Map<String, ? extends org.apache.kafka.common.KafkaFuture<?>> futures)
            throws Exception {
        Map<String, String> out = new TreeMap<>();
        for (Map.Entry<String, ? extends org.apache.kafka.common.KafkaFuture<?>> e : futures.entrySet()) {
            try {
                e.getValue().get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
                out.put(e.getKey(), "ok");
            } catch (ExecutionException ex) {
                out.put(e.getKey(), ex.getCause().getClass().getName());
            }
        }
        return out;
    }

    // ---------------------------------------------------------------- steps

    private void runAll() throws Exception {
        cluster();
        topics();
        configs();
        partitionsAndRecords();
        logDirs();
        leadersAndReassignments();
        groups();
        scram();
        quotas();
        features();
        quorum();
        transactions();
        acls();
        misc();
        notServedBySkiff();
        cleanup();
    }

    private void cluster() throws Exception {
        // The first call waits for the broker (up to 90 s: a loaded machine starts JVMs slowly).
        long deadline = System.currentTimeMillis() + 90_000;
        Collection<Node> nodes = null;
        while (nodes == null) {
            try {
                nodes = get(admin.describeCluster(new DescribeClusterOptions()).nodes());
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
            }
        }
        selfId = nodes.iterator().next().id();
        call("describeCluster", () -> {
            DescribeClusterResult r = admin.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true));
            Map<String, Object> m = new TreeMap<>();
            m.put("nodes", get(r.nodes()).stream().map(this::node).sorted().collect(Collectors.toList()));
            m.put("controller", node(get(r.controller())));
            m.put("clusterIdSet", get(r.clusterId()) != null && !get(r.clusterId()).isEmpty());
            m.put("authorizedOperations", sortedOps(get(r.authorizedOperations())));
            return m;
        });
    }

    private void topics() throws Exception {
        call("createTopics", () -> {
            NewTopic a = new NewTopic(topicA, 3, (short) 1).configs(Map.of("retention.ms", "3600000"));
            NewTopic b = new NewTopic(topicB, 1, (short) 1);
            NewTopic c = new NewTopic(topicC, Optional.empty(), Optional.empty());
            var r = admin.createTopics(List.of(a, b, c));
            get(r.all());
            Map<String, Object> m = new TreeMap<>();
            for (String t : List.of(topicA, topicB, topicC)) {
                Map<String, Object> d = new TreeMap<>();
                d.put("partitions", get(r.numPartitions(t)));
                d.put("replicationFactor", get(r.replicationFactor(t)));
                d.put("topicIdSet", get(r.topicId(t)) != null && !Uuid.ZERO_UUID.equals(get(r.topicId(t))));
                Config cfg = get(r.config(t));
                ConfigEntry retention = cfg == null ? null : cfg.get("retention.ms");
                d.put("retention.ms", retention == null ? null : retention.value());
                m.put(t.substring(prefix.length()), d);
            }
            return m;
        });
        call("createTopics(existing)", () -> {
            get(admin.createTopics(List.of(new NewTopic(topicA, 1, (short) 1))).all());
            return null;
        });
        call("createTopics(validateOnly)", () -> {
            var r = admin.createTopics(List.of(new NewTopic(prefix + "-v", 2, (short) 1)),
                    new CreateTopicsOptions().validateOnly(true));
            get(r.all());
            return Map.of("partitions", get(r.numPartitions(prefix + "-v")));
        });
        call("createTopics(replicationFactor>brokers)", () -> {
            get(admin.createTopics(List.of(new NewTopic(prefix + "-rf", 1, (short) 3))).all());
            return null;
        });
        call("createTopics(invalidConfig)", () -> {
            get(admin.createTopics(List.of(new NewTopic(prefix + "-cfg", 1, (short) 1)
                    .configs(Map.of("cleanup.policy", "sometimes")))).all());
            return null;
        });
        call("createTopics(invalidName)", () -> {
            get(admin.createTopics(List.of(new NewTopic("bad/name", 1, (short) 1))).all());
            return null;
        });
        call("listTopics", () -> get(admin.listTopics().names()).stream()
                .filter(n -> n.startsWith(prefix)).sorted().collect(Collectors.toList()));
        call("describeTopics", () -> {
            Map<String, TopicDescription> d = get(admin.describeTopics(
                    TopicCollection.ofTopicNames(List.of(topicA, topicB)),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames());
            Map<String, Object> m = new TreeMap<>();
            for (TopicDescription t : d.values()) {
                Map<String, Object> x = new TreeMap<>();
                x.put("internal", t.isInternal());
                x.put("topicIdSet", t.topicId() != null && !Uuid.ZERO_UUID.equals(t.topicId()));
                List<Object> parts = new ArrayList<>();
                for (TopicPartitionInfo p : t.partitions()) {
                    Map<String, Object> pm = new TreeMap<>();
                    pm.put("partition", p.partition());
                    pm.put("leader", node(p.leader()));
                    pm.put("replicas", p.replicas().stream().map(this::node).collect(Collectors.toList()));
                    pm.put("isr", p.isr().stream().map(this::node).collect(Collectors.toList()));
                    pm.put("elr", p.elr() == null ? null : p.elr().size());
                    pm.put("lastKnownElr", p.lastKnownElr() == null ? null : p.lastKnownElr().size());
                    parts.add(pm);
                }
                x.put("partitions", parts);
                x.put("authorizedOperations", sortedOps(t.authorizedOperations()));
                m.put(t.name().substring(prefix.length()), x);
            }
            return m;
        });
        call("describeTopics(unknown)", () -> {
            get(admin.describeTopics(List.of(prefix + "-nope")).allTopicNames());
            return null;
        });
        call("describeTopics(byId)", () -> {
            Uuid id = get(admin.describeTopics(List.of(topicB)).allTopicNames()).get(topicB).topicId();
            Map<Uuid, TopicDescription> d = get(admin.describeTopics(TopicCollection.ofTopicIds(List.of(id)))
                    .allTopicIds());
            return d.values().stream().map(TopicDescription::name).map(n -> n.substring(prefix.length()))
                    .collect(Collectors.toList());
        });
    }

    private Map<String, Object> entry(ConfigEntry e) {
        if (e == null) {
            return null;
        }
        Map<String, Object> m = new TreeMap<>();
        m.put("value", e.value());
        m.put("source", e.source() == null ? null : e.source().name());
        m.put("default", e.isDefault());
        m.put("sensitive", e.isSensitive());
        m.put("readOnly", e.isReadOnly());
        m.put("type", e.type() == null ? null : e.type().name());
        m.put("synonyms", e.synonyms().stream().map(s -> s.name() + ":" + s.source().name())
                .collect(Collectors.toList()));
        m.put("documented", e.documentation() != null && !e.documentation().isEmpty());
        return m;
    }

    private Map<String, Object> topicConfig(String topic, List<String> names) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config cfg = get(admin.describeConfigs(List.of(r)).all()).get(r);
        Map<String, Object> m = new TreeMap<>();
        for (String n : names) {
            ConfigEntry e = cfg.get(n);
            m.put(n, e == null ? null : e.value());
        }
        return m;
    }

    /** The topic's configs once {@code settled} holds, or after 15 s as they are: Kafka applies a
     * topic config when the metadata record reaches the broker, after the alter has answered,
     * so a describe right after it may still show the old value (seen under load, 2026-12-03). */
    private Map<String, Object> settledTopicConfig(String topic, List<String> names,
            java.util.function.Predicate<Map<String, Object>> settled) throws Exception {
        long deadline = System.currentTimeMillis() + 15000;
        Map<String, Object> m = topicConfig(topic, names);
        while (!settled.test(m) && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
            m = topicConfig(topic, names);
        }
        return m;
    }

    private void configs() throws Exception {
        ConfigResource ta = new ConfigResource(ConfigResource.Type.TOPIC, topicA);
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(selfId));
        call("describeConfigs(topic)", () -> {
            Config cfg = get(admin.describeConfigs(List.of(ta),
                    new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all()).get(ta);
            Map<String, Object> m = new TreeMap<>();
            m.put("names", cfg.entries().stream().map(ConfigEntry::name).sorted().collect(Collectors.toList()));
            for (String n : List.of("retention.ms", "cleanup.policy", "segment.bytes", "min.insync.replicas",
                    "message.timestamp.type", "compression.type", "max.message.bytes")) {
                m.put(n, entry(cfg.get(n)));
            }
            return m;
        });
        call("describeConfigs(broker)", () -> {
            Config cfg = get(admin.describeConfigs(List.of(broker)).all()).get(broker);
            Map<String, Object> m = new TreeMap<>();
            for (String n : List.of("num.partitions", "default.replication.factor", "log.retention.hours",
                    "auto.create.topics.enable", "message.max.bytes", "log.cleanup.policy",
                    "sasl.jaas.config", "min.insync.replicas", "delete.topic.enable")) {
                ConfigEntry e = cfg.get(n);
                m.put(n, e == null ? null : Map.of("value", String.valueOf(e.value()),
                        "source", e.source().name(), "sensitive", e.isSensitive(),
                        "readOnly", e.isReadOnly()));
            }
            return m;
        });
        call("describeConfigs(brokerLogger)", () -> {
            ConfigResource r = new ConfigResource(ConfigResource.Type.BROKER_LOGGER, String.valueOf(selfId));
            Config cfg = get(admin.describeConfigs(List.of(r)).all()).get(r);
            return Map.of("root", cfg.get("root") != null);
        });
        call("describeConfigs(unknownTopic)", () -> {
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, prefix + "-nope");
            get(admin.describeConfigs(List.of(r)).all());
            return null;
        });
        call("incrementalAlterConfigs(topic)", () -> {
            get(admin.incrementalAlterConfigs(Map.of(ta, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "200000"), AlterConfigOp.OpType.SET)
            ))).all());
            return settledTopicConfig(topicA, List.of("retention.ms", "cleanup.policy", "max.message.bytes"),
                    m -> "200000".equals(m.get("max.message.bytes")));
        });
        call("incrementalAlterConfigs(delete,subtract)", () -> {
            get(admin.incrementalAlterConfigs(Map.of(ta, List.of(
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", null), AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SUBTRACT)
            ))).all());
            return settledTopicConfig(topicA, List.of("retention.ms", "cleanup.policy", "max.message.bytes"),
                    m -> !"200000".equals(m.get("max.message.bytes")));
        });
        call("incrementalAlterConfigs(invalidValue)", () -> {
            get(admin.incrementalAlterConfigs(Map.of(ta, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all());
            return null;
        });
        call("incrementalAlterConfigs(unknownName)", () -> {
            get(admin.incrementalAlterConfigs(Map.of(ta, List.of(new AlterConfigOp(
                    new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all());
            return null;
        });
        call("incrementalAlterConfigs(validateOnly)", () -> {
            get(admin.incrementalAlterConfigs(Map.of(ta, List.of(new AlterConfigOp(
                    new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET))),
                    new org.apache.kafka.clients.admin.AlterConfigsOptions().validateOnly(true)).all());
            return topicConfig(topicA, List.of("retention.ms"));
        });
        for (String[] kv : List.of(new String[] {"message.max.bytes", "1048577"},
                new String[] {"log.cleaner.backoff.ms", "16000"})) {
            call("incrementalAlterConfigs(brokerDefault," + kv[0] + ")", () -> {
                ConfigResource all = new ConfigResource(ConfigResource.Type.BROKER, "");
                get(admin.incrementalAlterConfigs(Map.of(all, List.of(new AlterConfigOp(
                        new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET)))).all());
                ConfigEntry e = eventually(() -> get(admin.describeConfigs(List.of(all)).all()).get(all).get(kv[0]),
                        x -> x != null && kv[1].equals(x.value()));
                get(admin.incrementalAlterConfigs(Map.of(all, List.of(new AlterConfigOp(
                        new ConfigEntry(kv[0], null), AlterConfigOp.OpType.DELETE)))).all());
                return e == null ? null : Map.of("value", String.valueOf(e.value()), "source", e.source().name());
            });
        }
        call("describeConfigs(group)", () -> {
            ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, prefix + "-cfg-group");
            Config cfg = get(admin.describeConfigs(List.of(r)).all()).get(r);
            return cfg.entries().stream().map(ConfigEntry::name).sorted().collect(Collectors.toList());
        });
        call("incrementalAlterConfigs(brokerReadOnly)", () -> {
            get(admin.incrementalAlterConfigs(Map.of(broker, List.of(new AlterConfigOp(
                    new ConfigEntry("log.dirs", "/tmp/elsewhere"), AlterConfigOp.OpType.SET)))).all());
            return null;
        });
    }

    private void produce(String topic, int partition, int n) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.CLIENT_ID_CONFIG, prefix + "-producer");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(props)) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, partition, 1_000_000L + i, "k" + i, "v" + i)).get();
            }
        }
    }

    private void partitionsAndRecords() throws Exception {
        call("createPartitions", () -> {
            get(admin.createPartitions(Map.of(topicA, NewPartitions.increaseTo(4))).all());
            return get(admin.describeTopics(List.of(topicA)).allTopicNames()).get(topicA).partitions().size();
        });
        call("createPartitions(decrease)", () -> {
            get(admin.createPartitions(Map.of(topicA, NewPartitions.increaseTo(2))).all());
            return null;
        });
        call("createPartitions(unknownTopic)", () -> {
            get(admin.createPartitions(Map.of(prefix + "-nope", NewPartitions.increaseTo(2))).all());
            return null;
        });
        // the records carry 1970 timestamps, so time retention must not take them: a broker's
        // retention check (every 5 min) that ran between the produce and describeLogDirs once
        // emptied Kafka's b-0 and not Skiff's
        ConfigResource rb = new ConfigResource(ConfigResource.Type.TOPIC, topicB);
        get(admin.incrementalAlterConfigs(Map.of(rb, List.of(new AlterConfigOp(
                new ConfigEntry("retention.ms", "-1"), AlterConfigOp.OpType.SET)))).all());
        settledTopicConfig(topicB, List.of("retention.ms"), m -> "-1".equals(m.get("retention.ms")));
        produce(topicB, 0, 10);
        TopicPartition b0 = new TopicPartition(topicB, 0);
        Map<String, OffsetSpec> specs = new LinkedHashMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("maxTimestamp", OffsetSpec.maxTimestamp());
        specs.put("forTimestamp", OffsetSpec.forTimestamp(1_000_004L));
        specs.put("forTimestamp(future)", OffsetSpec.forTimestamp(9_000_000_000_000L));
        specs.put("earliestLocal", OffsetSpec.earliestLocal());
        specs.put("latestTiered", OffsetSpec.latestTiered());
        specs.put("earliestPendingUpload", OffsetSpec.earliestPendingUpload());
        for (Map.Entry<String, OffsetSpec> s : specs.entrySet()) {
            call("listOffsets(" + s.getKey() + ")", () -> {
                ListOffsetsResult.ListOffsetsResultInfo info = get(admin.listOffsets(Map.of(b0, s.getValue())).all()).get(b0);
                Map<String, Object> m = new TreeMap<>();
                m.put("offset", info.offset());
                m.put("timestamp", info.timestamp());
                m.put("leaderEpochSet", info.leaderEpoch().isPresent());
                return m;
            });
        }
        call("listOffsets(unknownTopic)", () -> {
            get(admin.listOffsets(Map.of(new TopicPartition(prefix + "-nope", 0), OffsetSpec.latest())).all());
            return null;
        });
        call("deleteRecords", () -> {
            var r = admin.deleteRecords(Map.of(b0, RecordsToDelete.beforeOffset(3)));
            long low = get(r.lowWatermarks().get(b0)).lowWatermark();
            long earliest = get(admin.listOffsets(Map.of(b0, OffsetSpec.earliest())).all()).get(b0).offset();
            return Map.of("lowWatermark", low, "earliestAfter", earliest);
        });
        call("deleteRecords(beyondHighWatermark)", () -> {
            get(admin.deleteRecords(Map.of(b0, RecordsToDelete.beforeOffset(1000))).all());
            return null;
        });
        call("deleteRecords(unknownPartition)", () -> {
            get(admin.deleteRecords(Map.of(new TopicPartition(topicB, 7), RecordsToDelete.beforeOffset(1)),
                    new org.apache.kafka.clients.admin.DeleteRecordsOptions().timeoutMs(3000)).all());
            return null;
        });
    }

    private void logDirs() throws Exception {
        call("describeLogDirs", () -> {
            Map<Integer, Map<String, LogDirDescription>> all = get(admin.describeLogDirs(List.of(selfId)).allDescriptions());
            Map<String, Object> m = new TreeMap<>();
            Map<String, LogDirDescription> dirs = all.get(selfId);
            m.put("brokers", all.keySet().stream().map(this::node).collect(Collectors.toList()));
            m.put("dirs", dirs.size());
            for (Map.Entry<String, LogDirDescription> d : dirs.entrySet()) {
                LogDirDescription desc = d.getValue();
                if (desc.replicaInfos().containsKey(new TopicPartition(topicB, 0))) {
                    logDir = d.getKey();
                }
                Map<String, Object> x = new TreeMap<>();
                x.put("error", desc.error() == null ? null : desc.error().getClass().getName());
                x.put("totalBytesSet", desc.totalBytes().isPresent());
                x.put("usableBytesSet", desc.usableBytes().isPresent());
                x.put("cordoned", desc.isCordoned());
                Map<String, Object> reps = new TreeMap<>();
                for (Map.Entry<TopicPartition, ReplicaInfo> r : desc.replicaInfos().entrySet()) {
                    if (!r.getKey().topic().startsWith(prefix)) {
                        continue;
                    }
                    reps.put(tp(r.getKey()).substring(prefix.length()), Map.of("sizePositive", r.getValue().size() > 0,
                            "offsetLag", r.getValue().offsetLag(), "future", r.getValue().isFuture()));
                }
                x.put("replicas", reps);
                m.put("dir", x);
            }
            return m;
        });
        TopicPartitionReplica rb0 = new TopicPartitionReplica(topicB, 0, selfId);
        call("describeReplicaLogDirs", () -> {
            var info = get(admin.describeReplicaLogDirs(List.of(rb0)).all()).get(rb0);
            Map<String, Object> m = new TreeMap<>();
            m.put("currentIsTheDir", info.getCurrentReplicaLogDir() != null && info.getCurrentReplicaLogDir().equals(logDir));
            m.put("future", info.getFutureReplicaLogDir());
            m.put("currentOffsetLag", info.getCurrentReplicaOffsetLag());
            m.put("futureOffsetLag", info.getFutureReplicaOffsetLag());
            return m;
        });
        call("describeReplicaLogDirs(unknownReplica)", () -> {
            TopicPartitionReplica r = new TopicPartitionReplica(prefix + "-nope", 0, selfId);
            var info = get(admin.describeReplicaLogDirs(List.of(r)).all()).get(r);
            return Map.of("current", String.valueOf(info.getCurrentReplicaLogDir()),
                    "future", String.valueOf(info.getFutureReplicaLogDir()));
        });
        call("alterReplicaLogDirs(sameDir)", () -> {
            get(admin.alterReplicaLogDirs(Map.of(rb0, logDir)).all());
            return null;
        });
        call("alterReplicaLogDirs(unknownDir)", () -> {
            get(admin.alterReplicaLogDirs(Map.of(rb0, "/nonexistent/skiff-parity")).all());
            return null;
        });
    }

    private void leadersAndReassignments() throws Exception {
        TopicPartition a0 = new TopicPartition(topicA, 0);
        call("electLeaders(preferred)", () -> {
            Map<TopicPartition, Optional<Throwable>> r = get(admin.electLeaders(ElectionType.PREFERRED, Set.of(a0)).partitions());
            return r.entrySet().stream().collect(Collectors.toMap(e -> tp(e.getKey()).substring(prefix.length()),
                    e -> e.getValue().map(t -> t.getClass().getName()).orElse("ok"), (x, y) -> x, TreeMap::new));
        });
        call("electLeaders(unclean)", () -> {
            Map<TopicPartition, Optional<Throwable>> r = get(admin.electLeaders(ElectionType.UNCLEAN, Set.of(a0)).partitions());
            return r.entrySet().stream().collect(Collectors.toMap(e -> tp(e.getKey()).substring(prefix.length()),
                    e -> e.getValue().map(t -> t.getClass().getName()).orElse("ok"), (x, y) -> x, TreeMap::new));
        });
        call("electLeaders(unknownPartition)", () -> {
            Map<TopicPartition, Optional<Throwable>> r = get(admin.electLeaders(ElectionType.PREFERRED,
                    Set.of(new TopicPartition(prefix + "-nope", 0))).partitions());
            return r.values().stream().map(v -> v.map(t -> t.getClass().getName()).orElse("ok")).collect(Collectors.toList());
        });
        call("alterPartitionReassignments(sameReplicas)", () -> {
            get(admin.alterPartitionReassignments(Map.of(a0, Optional.of(new NewPartitionReassignment(List.of(selfId))))).all());
            return get(admin.describeTopics(List.of(topicA)).allTopicNames()).get(topicA).partitions().get(0)
                    .replicas().stream().map(this::node).collect(Collectors.toList());
        });
        call("alterPartitionReassignments(unknownBroker)", () -> {
            get(admin.alterPartitionReassignments(Map.of(a0, Optional.of(new NewPartitionReassignment(List.of(selfId + 100))))).all());
            return null;
        });
        call("alterPartitionReassignments(cancelNone)", () -> {
            get(admin.alterPartitionReassignments(Map.of(a0, Optional.empty())).all());
            return null;
        });
        call("listPartitionReassignments", () -> get(admin.listPartitionReassignments().reassignments()).keySet().stream()
                .map(AdminParity::tp).collect(Collectors.toList()));
    }

    private KafkaConsumer<String, String> consumer(String group, String instanceId, String protocol) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, prefix + "-consumer");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (instanceId != null) {
            props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        if (protocol.equals("classic")) {
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "45000");
        }
        return new KafkaConsumer<>(props);
    }

    /** Subscribes, reads every record of topicB (7 left after deleteRecords), commits. */
    private void consumeAll(KafkaConsumer<String, String> c) {
        c.subscribe(List.of(topicB));
        int got = 0;
        long deadline = System.currentTimeMillis() + 30_000;
        while (got < 7 && System.currentTimeMillis() < deadline) {
            got += c.poll(Duration.ofMillis(200)).count();
        }
        c.commitSync(Duration.ofSeconds(15));
    }

    private Map<String, Object> member(MemberDescription md) {
        Map<String, Object> m = new TreeMap<>();
        m.put("instanceId", md.groupInstanceId().orElse(null));
        m.put("clientId", md.clientId());
        m.put("assignment", md.assignment().topicPartitions().stream().map(AdminParity::tp)
                .map(s -> s.substring(prefix.length())).sorted().collect(Collectors.toList()));
        m.put("memberEpochSet", md.memberEpoch().isPresent());
        m.put("upgraded", md.upgraded().orElse(null));
        return m;
    }

    private Map<String, Object> describeGroup(String group) throws Exception {
        ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(group),
                new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).all()).get(group);
        Map<String, Object> m = new TreeMap<>();
        m.put("simple", d.isSimpleConsumerGroup());
        m.put("type", d.type().name());
        m.put("state", d.groupState().name());
        m.put("assignor", d.partitionAssignor());
        m.put("coordinator", node(d.coordinator()));
        m.put("members", d.members().stream().map(this::member).collect(Collectors.toList()));
        m.put("authorizedOperations", sortedOps(d.authorizedOperations()));
        m.put("groupEpochSet", d.groupEpoch().isPresent());
        return m;
    }

    private Object listedGroups(Collection<GroupListing> listings) {
        return listings.stream().filter(g -> g.groupId().startsWith(prefix))
                .sorted((x, y) -> x.groupId().compareTo(y.groupId()))
                .map(g -> {
                    Map<String, Object> m = new TreeMap<>();
                    m.put("group", g.groupId().substring(prefix.length()));
                    m.put("type", g.type().map(Enum::name).orElse(null));
                    m.put("protocol", g.protocol());
                    m.put("state", g.groupState().map(Enum::name).orElse(null));
                    m.put("simple", g.isSimpleConsumerGroup());
                    return m;
                }).collect(Collectors.toList());
    }

    private void groups() throws Exception {
        String classic = prefix + "-classic";
        String modern = prefix + "-consumer";
        TopicPartition b0 = new TopicPartition(topicB, 0);
        KafkaConsumer<String, String> staticMember = consumer(classic, "instance-1", "classic");
        consumeAll(staticMember);
        KafkaConsumer<String, String> modernMember = consumer(modern, null, "consumer");
        consumeAll(modernMember);

        call("describeConsumerGroups(classic,stable)", () -> describeGroup(classic));
        call("describeConsumerGroups(consumer,stable)", () -> describeGroup(modern));
        call("describeClassicGroups", () -> {
            ClassicGroupDescription d = get(admin.describeClassicGroups(List.of(classic)).all()).get(classic);
            Map<String, Object> m = new TreeMap<>();
            m.put("protocol", d.protocol());
            m.put("protocolData", d.protocolData());
            m.put("state", d.state().name());
            m.put("members", d.members().stream().map(this::member).collect(Collectors.toList()));
            m.put("coordinator", node(d.coordinator()));
            return m;
        });
        call("listGroups", () -> listedGroups(get(admin.listGroups().all())));
        call("listGroups(consumerGroups,stable)", () -> listedGroups(get(admin.listGroups(
                ListGroupsOptions.forConsumerGroups().inGroupStates(Set.of(org.apache.kafka.common.GroupState.STABLE))).all())));
        call("listConsumerGroups", () -> {
            @SuppressWarnings("deprecation")
            var r = admin.listConsumerGroups();
            return get(r.all()).stream().filter(g -> g.groupId().startsWith(prefix))
                    .map(g -> g.groupId().substring(prefix.length()) + ":" + g.groupState().map(Enum::name).orElse(null)
                            + ":" + g.type().map(Enum::name).orElse(null))
                    .sorted().collect(Collectors.toList());
        });
        call("listConsumerGroupOffsets", () -> {
            Map<TopicPartition, OffsetAndMetadata> o = get(admin.listConsumerGroupOffsets(Map.of(classic,
                    new ListConsumerGroupOffsetsSpec())).partitionsToOffsetAndMetadata(classic));
            return o.entrySet().stream().collect(Collectors.toMap(e -> tp(e.getKey()).substring(prefix.length()),
                    e -> e.getValue() == null ? "null" : e.getValue().offset() + ":" + e.getValue().metadata(),
                    (x, y) -> x, TreeMap::new));
        });
        call("listConsumerGroupOffsets(requireStable,unknownGroup)", () -> {
            Map<TopicPartition, OffsetAndMetadata> o = get(admin.listConsumerGroupOffsets(prefix + "-nogroup",
                    new org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions().requireStable(true))
                    .partitionsToOffsetAndMetadata());
            return o.size();
        });
        call("alterConsumerGroupOffsets(activeGroup)", () -> {
            get(admin.alterConsumerGroupOffsets(classic, Map.of(b0, new OffsetAndMetadata(4))).all());
            return null;
        });
        call("deleteConsumerGroups(nonEmpty)", () -> {
            get(admin.deleteConsumerGroups(List.of(classic)).all());
            return null;
        });
        call("deleteConsumerGroupOffsets(subscribed)", () -> {
            get(admin.deleteConsumerGroupOffsets(classic, Set.of(b0)).all());
            return null;
        });
        // A static member's close does not leave the group (classic protocol): it stays until removed.
        staticMember.close(Duration.ofSeconds(10));
        modernMember.close(Duration.ofSeconds(10));
        call("removeMembersFromConsumerGroup(unknownMember)", () -> {
            get(admin.removeMembersFromConsumerGroup(classic, new RemoveMembersFromConsumerGroupOptions(
                    List.of(new MemberToRemove("instance-9")))).all());
            return null;
        });
        call("removeMembersFromConsumerGroup", () -> {
            get(admin.removeMembersFromConsumerGroup(classic, new RemoveMembersFromConsumerGroupOptions(
                    List.of(new MemberToRemove("instance-1")))).all());
            return describeGroup(classic);
        });
        call("describeConsumerGroups(consumer,empty)", () -> describeGroup(modern));
        call("alterConsumerGroupOffsets", () -> {
            get(admin.alterConsumerGroupOffsets(classic, Map.of(b0, new OffsetAndMetadata(4, "meta"))).all());
            OffsetAndMetadata o = get(admin.listConsumerGroupOffsets(classic).partitionsToOffsetAndMetadata()).get(b0);
            return o.offset() + ":" + o.metadata();
        });
        call("alterConsumerGroupOffsets(unknownPartition)", () -> {
            get(admin.alterConsumerGroupOffsets(classic, Map.of(new TopicPartition(prefix + "-nope", 0),
                    new OffsetAndMetadata(1))).all());
            return null;
        });
        call("deleteConsumerGroupOffsets", () -> {
            get(admin.deleteConsumerGroupOffsets(classic, Set.of(b0)).all());
            return get(admin.listConsumerGroupOffsets(classic).partitionsToOffsetAndMetadata()).size();
        });
        call("deleteConsumerGroups", () -> {
            var r = admin.deleteConsumerGroups(List.of(classic, modern, prefix + "-nogroup"));
            Map<String, String> items = perItem(r.deletedGroups());
            return items.entrySet().stream().collect(Collectors.toMap(e -> e.getKey().substring(prefix.length()),
                    Map.Entry::getValue, (x, y) -> x, TreeMap::new));
        });
        call("describeConsumerGroups(unknownGroup)", () -> describeGroup(prefix + "-nogroup"));
        call("listGroups(afterDelete)", () -> listedGroups(get(admin.listGroups().all())));
    }

    private void scram() throws Exception {
        String user = prefix + "-user";
        call("alterUserScramCredentials(twoMechanismsOneRequest)", () -> {
            var r = admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "pw"),
                    new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), "pw")));
            get(r.all());
            return null;
        });
        call("alterUserScramCredentials", () -> {
            get(admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "pw"))).all());
            get(admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), "pw"))).all());
            return null;
        });
        call("alterUserScramCredentials(tooFewIterations)", () -> {
            get(admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user + "2",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10), "pw"))).all());
            return null;
        });
        call("describeUserScramCredentials", () -> {
            Map<String, UserScramCredentialsDescription> d = eventually(() -> {
                try {
                    return get(admin.describeUserScramCredentials(List.of(user)).all());
                } catch (ExecutionException e) {
                    return Map.<String, UserScramCredentialsDescription>of();
                }
            }, x -> !x.isEmpty() && x.get(user).credentialInfos().size() == 2);
            return d.values().stream().map(x -> x.credentialInfos().stream()
                    .map(ci -> ci.mechanism().name() + ":" + ci.iterations()).sorted().collect(Collectors.toList()))
                    .collect(Collectors.toList());
        });
        call("describeUserScramCredentials(unknownUser)", () -> {
            get(admin.describeUserScramCredentials(List.of(prefix + "-nobody")).all());
            return null;
        });
        call("alterUserScramCredentials(delete)", () -> {
            get(admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256))).all());
            get(admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512))).all());
            // a user whose last mechanism was deleted is described with no credentials
            eventually(() -> {
                try {
                    return get(admin.describeUserScramCredentials(List.of(user)).all()).values().stream()
                            .mapToInt(x -> x.credentialInfos().size()).sum();
                } catch (ExecutionException e) {
                    return 0;
                }
            }, n -> n == 0);
            return null;
        });
        call("alterUserScramCredentials(deleteUnknown)", () -> {
            get(admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256))).all());
            return null;
        });
    }

    private void quotas() throws Exception {
        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, prefix + "-user"));
        ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(List.of(
                ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, prefix + "-user")));
        call("alterClientQuotas", () -> {
            get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0),
                    new ClientQuotaAlteration.Op("request_percentage", 50.0))))).all());
            return null;
        });
        call("describeClientQuotas", () -> {
            var d = eventually(() -> get(admin.describeClientQuotas(filter).entities()), x -> !x.isEmpty());
            return d.entrySet().stream().collect(Collectors.toMap(e -> new TreeMap<>(e.getKey().entries()).toString()
                    .replace(prefix, ""), e -> new TreeMap<>(e.getValue()), (x, y) -> x, TreeMap::new));
        });
        call("alterClientQuotas(unknownKey)", () -> {
            get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                    new ClientQuotaAlteration.Op("no_such_quota", 1.0))))).all());
            return null;
        });
        call("alterClientQuotas(validateOnly)", () -> {
            get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                    new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0)))),
                    new org.apache.kafka.clients.admin.AlterClientQuotasOptions().validateOnly(true)).all());
            return get(admin.describeClientQuotas(filter).entities()).values().stream()
                    .map(v -> new TreeMap<>(v).keySet()).collect(Collectors.toList());
        });
        call("alterClientQuotas(remove)", () -> {
            get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", null),
                    new ClientQuotaAlteration.Op("request_percentage", null))))).all());
            return eventually(() -> get(admin.describeClientQuotas(filter).entities()).size(), n -> n == 0);
        });
    }

    private void features() throws Exception {
        call("describeFeatures", () -> {
            FeatureMetadata f = get(admin.describeFeatures().featureMetadata());
            Map<String, Object> m = new TreeMap<>();
            m.put("finalized", f.finalizedFeatures().keySet().stream().sorted().collect(Collectors.toList()));
            m.put("supported", f.supportedFeatures().keySet().stream().sorted().collect(Collectors.toList()));
            m.put("finalizedEpochSet", f.finalizedFeaturesEpoch().isPresent());
            Map<String, Object> levels = new TreeMap<>();
            for (Map.Entry<String, FinalizedVersionRange> e : f.finalizedFeatures().entrySet()) {
                if (!e.getKey().equals("metadata.version")) {
                    levels.put(e.getKey(), e.getValue().maxVersionLevel());
                }
            }
            m.put("finalizedLevels", levels);
            Map<String, Object> ranges = new TreeMap<>();
            for (Map.Entry<String, SupportedVersionRange> e : f.supportedFeatures().entrySet()) {
                if (!e.getKey().equals("metadata.version")) {
                    ranges.put(e.getKey(), e.getValue().minVersion() + ".." + e.getValue().maxVersion());
                }
            }
            m.put("supportedRanges", ranges);
            return m;
        });
        call("updateFeatures(validateOnly,sameLevel)", () -> {
            FeatureMetadata f = get(admin.describeFeatures().featureMetadata());
            FinalizedVersionRange g = f.finalizedFeatures().get("group.version");
            short level = g == null ? 0 : g.maxVersionLevel();
            get(admin.updateFeatures(Map.of("group.version", new FeatureUpdate(level, FeatureUpdate.UpgradeType.UPGRADE)),
                    new UpdateFeaturesOptions().validateOnly(true)).all());
            return null;
        });
        call("updateFeatures(unknownFeature)", () -> {
            get(admin.updateFeatures(Map.of(prefix + ".version", new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)),
                    new UpdateFeaturesOptions()).all());
            return null;
        });
        call("updateFeatures(downgradeMetadataVersion)", () -> {
            get(admin.updateFeatures(Map.of("metadata.version", new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE)),
                    new UpdateFeaturesOptions().validateOnly(true)).all());
            return null;
        });
    }

    private void quorum() throws Exception {
        call("describeMetadataQuorum", () -> {
            QuorumInfo q = get(admin.describeMetadataQuorum().quorumInfo());
            Map<String, Object> m = new TreeMap<>();
            m.put("leader", node(q.leaderId()));
            m.put("leaderEpochPositive", q.leaderEpoch() > 0);
            m.put("highWatermarkPositive", q.highWatermark() > 0);
            m.put("voters", q.voters().stream().map(v -> node(v.replicaId())).collect(Collectors.toList()));
            m.put("voterDirectoryIdSet", q.voters().stream().map(v -> !Uuid.ZERO_UUID.equals(v.replicaDirectoryId()))
                    .collect(Collectors.toList()));
            m.put("observers", q.observers().stream().map(v -> node(v.replicaId())).collect(Collectors.toList()));
            m.put("nodes", q.nodes().values().stream().map(n -> node(n.nodeId()) + ":"
                    + n.endpoints().stream().map(RaftVoterEndpoint::name).sorted().collect(Collectors.toList()))
                    .sorted().collect(Collectors.toList()));
            return m;
        });
    }

    private void transactions() throws Exception {
        String txnId = prefix + "-txn";
        TopicPartition c0 = new TopicPartition(topicC, 0);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        KafkaProducer<String, String> p = new KafkaProducer<>(props);
        try {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topicC, 0, "k", "open")).get();
            p.flush();

            call("describeTransactions(ongoing)", () -> {
                TransactionDescription d = get(admin.describeTransactions(List.of(txnId)).all()).get(txnId);
                Map<String, Object> m = new TreeMap<>();
                m.put("state", d.state().name());
                m.put("coordinator", node(d.coordinatorId()));
                m.put("timeoutMs", d.transactionTimeoutMs());
                m.put("startTimeSet", d.transactionStartTimeMs().isPresent());
                m.put("partitions", d.topicPartitions().stream().map(AdminParity::tp)
                        .map(s -> s.substring(prefix.length())).sorted().collect(Collectors.toList()));
                return m;
            });
            call("listTransactions", () -> get(admin.listTransactions().all()).stream()
                    .filter(t -> t.transactionalId().startsWith(prefix))
                    .map(t -> t.transactionalId().substring(prefix.length()) + ":" + t.state().name())
                    .sorted().collect(Collectors.toList()));
            call("listTransactions(filtered)", () -> get(admin.listTransactions(new ListTransactionsOptions()
                    .filterStates(Set.of(org.apache.kafka.clients.admin.TransactionState.ONGOING))
                    .filterOnTransactionalIdPattern(prefix + "-t.*")).all()).stream()
                    .map(t -> t.transactionalId().substring(prefix.length()) + ":" + t.state().name())
                    .sorted().collect(Collectors.toList()));
            call("listTransactions(durationFilter)", () -> get(admin.listTransactions(new ListTransactionsOptions()
                    .filterOnDuration(3_600_000L)).all()).stream()
                    .filter(t -> t.transactionalId().startsWith(prefix)).count());
            final ProducerState[] open = new ProducerState[1];
            call("describeProducers", () -> {
                PartitionProducerState s = get(admin.describeProducers(List.of(c0)).all()).get(c0);
                List<Object> out = new ArrayList<>();
                for (ProducerState ps : s.activeProducers()) {
                    open[0] = ps;
                    Map<String, Object> m = new TreeMap<>();
                    m.put("lastSequence", ps.lastSequence());
                    m.put("epochNonNegative", ps.producerEpoch() >= 0);
                    m.put("currentTransactionStartOffset", ps.currentTransactionStartOffset().isPresent()
                            ? ps.currentTransactionStartOffset().getAsLong() : null);
                    m.put("coordinatorEpochSet", ps.coordinatorEpoch().isPresent());
                    out.add(m);
                }
                return out;
            });
            call("describeProducers(unknownPartition)", () -> {
                get(admin.describeProducers(List.of(new TopicPartition(prefix + "-nope", 0)),
                        new org.apache.kafka.clients.admin.DescribeProducersOptions().timeoutMs(3000)).all());
                return null;
            });
            call("abortTransaction", () -> {
                ProducerState ps = open[0];
                get(admin.abortTransaction(new AbortTransactionSpec(c0, ps.producerId(), (short) ps.producerEpoch(),
                        ps.coordinatorEpoch().orElse(0))).all());
                PartitionProducerState s = get(admin.describeProducers(List.of(c0)).all()).get(c0);
                return s.activeProducers().stream().map(x -> String.valueOf(x.currentTransactionStartOffset().isPresent()))
                        .collect(Collectors.toList());
            });
            call("fenceProducers", () -> {
                get(admin.fenceProducers(List.of(txnId)).all());
                long deadline = System.currentTimeMillis() + 10_000;
                TransactionDescription d = get(admin.describeTransactions(List.of(txnId)).all()).get(txnId);
                // the fenced transaction is aborted; with transaction version 2 the fence's own
                // epoch bump then leaves it EMPTY (Kafka 4.4 and Skiff alike)
                while (!d.state().name().startsWith("COMPLETE") && !d.state().name().equals("EMPTY")
                        && System.currentTimeMillis() < deadline) {
                    Thread.sleep(100);
                    d = get(admin.describeTransactions(List.of(txnId)).all()).get(txnId);
                }
                return d.state().name();
            });
            call("fenceProducers(unknownTxnId)", () -> {
                get(admin.fenceProducers(List.of(prefix + "-txn-new")).all());
                return get(admin.describeTransactions(List.of(prefix + "-txn-new")).all()).get(prefix + "-txn-new")
                        .state().name();
            });
            call("describeTransactions(unknown)", () -> {
                get(admin.describeTransactions(List.of(prefix + "-notxn")).all());
                return null;
            });
            call("forceTerminateTransaction", () -> {
                get(admin.forceTerminateTransaction(txnId).result());
                return null;
            });
        } finally {
            p.close(Duration.ofSeconds(5));
        }
    }

    private void acls() throws Exception {
        AclBinding binding = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topicA, PatternType.LITERAL),
                new AccessControlEntry("User:" + prefix, "*", AclOperation.READ, AclPermissionType.ALLOW));
        call("createAcls", () -> {
            get(admin.createAcls(List.of(binding)).all());
            return null;
        });
        call("describeAcls", () -> get(admin.describeAcls(AclBindingFilter.ANY).values()).stream()
                .filter(b -> b.entry().principal().contains(prefix)).map(Object::toString).sorted()
                .collect(Collectors.toList()));
        call("deleteAcls", () -> get(admin.deleteAcls(List.of(new AclBindingFilter(
                binding.pattern().toFilter(), AccessControlEntryFilter.ANY))).all()).size());
    }

    private void misc() throws Exception {
        call("listConfigResources(topic)", () -> get(admin.listConfigResources(Set.of(ConfigResource.Type.TOPIC),
                new org.apache.kafka.clients.admin.ListConfigResourcesOptions()).all()).stream()
                .filter(r -> r.name().startsWith(prefix)).map(r -> r.type() + ":" + r.name().substring(prefix.length()))
                .sorted().collect(Collectors.toList()));
        call("listConfigResources(all)", () -> get(admin.listConfigResources().all()).stream()
                .filter(r -> r.type() != ConfigResource.Type.TOPIC || r.name().startsWith(prefix))
                .filter(r -> r.type() != ConfigResource.Type.GROUP)
                .map(r -> r.type() + ":" + (r.type() == ConfigResource.Type.BROKER ? node(Integer.parseInt(r.name()))
                        : r.name().startsWith(prefix) ? r.name().substring(prefix.length()) : r.name()))
                .sorted().collect(Collectors.toList()));
        call("listClientMetricsResources", () -> {
            @SuppressWarnings("deprecation")
            var r = admin.listClientMetricsResources();
            return get(r.all()).size();
        });
        // null when the broker has no telemetry subscription for the client (the reference has no
        // metrics reporter): the call then waits its whole timeout
        call("clientInstanceId", () -> admin.clientInstanceId(Duration.ofSeconds(2)) != null);
        call("unregisterBroker(unknownId)", () -> {
            get(admin.unregisterBroker(selfId + 1000).all());
            return null;
        });
        call("describeMetadataQuorum(afterWork)", () -> node(get(admin.describeMetadataQuorum().quorumInfo()).leaderId()));
    }

    /** Methods whose Kafka APIs Skiff does not serve: recorded, so the table says so. */
    private void notServedBySkiff() throws Exception {
        call("createDelegationToken", () -> {
            get(admin.createDelegationToken().delegationToken());
            return null;
        });
        call("describeDelegationToken", () -> get(admin.describeDelegationToken().delegationTokens()).size());
        call("describeShareGroups", () -> get(admin.describeShareGroups(List.of(prefix + "-share")).all()).values()
                .stream().map(d -> d.groupState().name()).collect(Collectors.toList()));
        call("describeStreamsGroups", () -> get(admin.describeStreamsGroups(List.of(prefix + "-streams")).all()).values()
                .stream().map(d -> d.groupState().name()).collect(Collectors.toList()));
        call("addRaftVoter", () -> {
            get(admin.addRaftVoter(selfId + 1000, Uuid.randomUuid(),
                    Set.of(new RaftVoterEndpoint("CONTROLLER", "127.0.0.1", 1))).all());
            return null;
        });
        call("removeRaftVoter(unknownVoter)", () -> {
            get(admin.removeRaftVoter(selfId + 1000, Uuid.randomUuid()).all());
            return null;
        });
        call("unregisterController(unknownId)", () -> {
            get(admin.unregisterController(selfId + 1000).all());
            return null;
        });
    }

    private void cleanup() throws Exception {
        call("deleteTopics", () -> {
            var r = admin.deleteTopics(List.of(topicA, topicC));
            return perItem(r.topicNameValues()).entrySet().stream().collect(Collectors.toMap(
                    e -> e.getKey().substring(prefix.length()), Map.Entry::getValue, (x, y) -> x, TreeMap::new));
        });
        call("deleteTopics(byId)", () -> {
            Uuid id = get(admin.describeTopics(List.of(topicB)).allTopicNames()).get(topicB).topicId();
            get(admin.deleteTopics(TopicCollection.ofTopicIds(List.of(id))).all());
            return null;
        });
        call("deleteTopics(unknown)", () -> {
            get(admin.deleteTopics(List.of(prefix + "-nope")).all());
            return null;
        });
        call("deleteTopics(unknownId)", () -> {
            get(admin.deleteTopics(TopicCollection.ofTopicIds(List.of(Uuid.randomUuid()))).all());
            return null;
        });
        call("listTopics(afterDelete)", () -> {
            long deadline = System.currentTimeMillis() + 10_000;
            List<String> left;
            do {
                left = get(admin.listTopics().names()).stream().filter(n -> n.startsWith(prefix)).sorted()
                        .collect(Collectors.toList());
                if (!left.isEmpty()) {
                    Thread.sleep(100);
                }
            } while (!left.isEmpty() && System.currentTimeMillis() < deadline);
            return left;
        });
    }
}
