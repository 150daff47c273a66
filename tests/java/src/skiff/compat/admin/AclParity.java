package skiff.compat.admin;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The refusals a non-super user meets, with Kafka 4.4's Java clients, on a broker with an
 * authorizer and a SASL_PLAINTEXT PLAIN listener; one JSON line per attempt (as AdminParity:
 * method, status = "ok" or the exception's class, message, result).
 *
 * <p>Arguments: bootstrap servers, a prefix for the names. The users are admin (a super user,
 * password admin-secret) and alice (alice-secret). As admin it creates the topics
 * PREFIX-secret and PREFIX-readable and lets alice READ PREFIX-readable and nothing else; then,
 * as alice, it tries what she may not do.
 */
public final class AclParity {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long CALL_TIMEOUT_S = 20;

    private final String bootstrap;
    private final String prefix;
    private final String secret;
    private final String readable;

    interface Call {
        Object run() throws Exception;
    }

    private AclParity(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        this.secret = prefix + "-secret";
        this.readable = prefix + "-readable";
    }

    public static void main(String[] args) throws Exception {
        new AclParity(args[0], args[1]).runAll();
        System.out.flush();
        System.exit(0);
    }

    private static void call(String method, Call c) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("method", method);
        try {
            Object result = c.run();
            out.put("status", "ok");
            out.put("message", null);
            out.put("result", result);
        } catch (Throwable t) {
            Throwable e = t;
            while (e instanceof ExecutionException && e.getCause() != null) {
                e = e.getCause();
            }
            // A producer whose InitProducerId was refused before send() throws a KafkaException
            // ("...in an error state") around the refusal; after send() the future carries the
            // refusal itself. Which comes first is the client's timing, not the broker's answer.
            if (e.getClass() == org.apache.kafka.common.KafkaException.class
                    && e.getCause() instanceof org.apache.kafka.common.errors.AuthorizationException) {
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

    private Properties props(String user) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "PLAIN");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required "
                + "username=\"" + user + "\" password=\"" + user + "-secret\";");
        return p;
    }

    private Admin admin(String user) {
        Properties p = props(user);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        return Admin.create(p);
    }

    private KafkaProducer<String, String> producer(String user, Map<String, String> extra) {
        Properties p = props(user);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    private KafkaConsumer<String, String> consumer(String user, String group) {
        Properties p = props(user);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return new KafkaConsumer<>(p);
    }

    /** Polls until a record or an exception comes, for up to 15 s. */
    private static Object pollUntilRefused(KafkaConsumer<String, String> c) {
        long deadline = System.currentTimeMillis() + 15_000;
        int got = 0;
        while (got == 0 && System.currentTimeMillis() < deadline) {
            got += c.poll(Duration.ofMillis(200)).count();
        }
        return got;
    }

    private void runAll() throws Exception {
        try (Admin admin = admin("admin")) {
            call("admin:createTopics", () -> {
                get(admin.createTopics(List.of(new NewTopic(secret, 1, (short) 1),
                        new NewTopic(readable, 1, (short) 1))).all());
                return null;
            });
            AclBinding read = new AclBinding(new ResourcePattern(ResourceType.TOPIC, readable, PatternType.LITERAL),
                    new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
            AclBinding prefixed = new AclBinding(new ResourcePattern(ResourceType.GROUP, prefix + "-other", PatternType.PREFIXED),
                    new AccessControlEntry("User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW));
            AclBinding deny = new AclBinding(new ResourcePattern(ResourceType.TOPIC, prefix + "-x", PatternType.LITERAL),
                    new AccessControlEntry("User:bob", "127.0.0.1", AclOperation.WRITE, AclPermissionType.DENY));
            call("admin:createAcls", () -> {
                get(admin.createAcls(List.of(read, prefixed, deny)).all());
                return null;
            });
            call("admin:createAcls(invalid)", () -> {
                get(admin.createAcls(List.of(new AclBinding(new ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL),
                        new AccessControlEntry("alice-without-type", "*", AclOperation.READ, AclPermissionType.ALLOW)))).all());
                return null;
            });
            call("admin:describeAcls", () -> {
                long deadline = System.currentTimeMillis() + 10_000;
                List<String> got;
                do {
                    got = get(admin.describeAcls(AclBindingFilter.ANY).values()).stream()
                            .filter(b -> b.pattern().name().startsWith(prefix))
                            .map(b -> b.toString().replace(prefix, "")).sorted().collect(Collectors.toList());
                } while (got.size() < 3 && System.currentTimeMillis() < deadline);
                return got;
            });
            call("admin:describeAcls(filter)", () -> get(admin.describeAcls(new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.GROUP, prefix + "-other-app", PatternType.MATCH),
                    AccessControlEntryFilter.ANY)).values()).stream()
                    .map(b -> b.toString().replace(prefix, "")).sorted().collect(Collectors.toList()));
            call("admin:deleteAcls", () -> get(admin.deleteAcls(List.of(new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.ANY, null, PatternType.ANY),
                    new AccessControlEntryFilter("User:bob", null, AclOperation.ANY, AclPermissionType.ANY)))).all())
                    .stream().filter(b -> b.pattern().name().startsWith(prefix))
                    .map(b -> b.toString().replace(prefix, "")).sorted().collect(Collectors.toList()));
            call("admin:produce", () -> {
                try (KafkaProducer<String, String> p = producer("admin", Map.of())) {
                    p.send(new ProducerRecord<>(readable, "k", "v")).get();
                    p.send(new ProducerRecord<>(secret, "k", "v")).get();
                }
                return null;
            });
            // alice's ACL reaches the broker's authorizer through the metadata log: wait for it.
            Thread.sleep(1000);
        }

        try (Admin alice = admin("alice")) {
            call("produce", () -> {
                try (KafkaProducer<String, String> p = producer("alice", Map.of(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false",
                        ProducerConfig.ACKS_CONFIG, "1"))) {
                    p.send(new ProducerRecord<>(secret, "k", "forged")).get(20, TimeUnit.SECONDS);
                }
                return null;
            });
            call("produce(idempotent)", () -> {
                try (KafkaProducer<String, String> p = producer("alice", Map.of(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true"))) {
                    p.send(new ProducerRecord<>(readable, "k", "forged")).get(20, TimeUnit.SECONDS);
                }
                return null;
            });
            call("initTransactions", () -> {
                try (KafkaProducer<String, String> p = producer("alice", Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "-txn"))) {
                    p.initTransactions();
                }
                return null;
            });
            call("consume(topic)", () -> {
                try (KafkaConsumer<String, String> c = consumer("alice", null)) {
                    c.assign(List.of(new TopicPartition(secret, 0)));
                    return pollUntilRefused(c);
                }
            });
            call("consume(group)", () -> {
                try (KafkaConsumer<String, String> c = consumer("alice", prefix + "-group")) {
                    c.subscribe(List.of(readable));
                    return pollUntilRefused(c);
                }
            });
            call("consume(allowed,assigned)", () -> {
                try (KafkaConsumer<String, String> c = consumer("alice", null)) {
                    c.assign(List.of(new TopicPartition(readable, 0)));
                    return pollUntilRefused(c);
                }
            });
            call("commitSync(group)", () -> {
                try (KafkaConsumer<String, String> c = consumer("alice", prefix + "-group")) {
                    c.assign(List.of(new TopicPartition(readable, 0)));
                    c.commitSync(Map.of(new TopicPartition(readable, 0),
                            new org.apache.kafka.clients.consumer.OffsetAndMetadata(1)), Duration.ofSeconds(15));
                }
                return null;
            });
            call("createTopics", () -> {
                get(alice.createTopics(List.of(new NewTopic(prefix + "-new", 1, (short) 1))).all());
                return null;
            });
            ConfigResource secretRes = new ConfigResource(ConfigResource.Type.TOPIC, secret);
            call("describeConfigs(topic)", () -> {
                get(alice.describeConfigs(List.of(secretRes)).all());
                return null;
            });
            call("describeConfigs(broker)", () -> {
                ConfigResource b = new ConfigResource(ConfigResource.Type.BROKER,
                        String.valueOf(get(alice.describeCluster().nodes()).iterator().next().id()));
                get(alice.describeConfigs(List.of(b)).all());
                return null;
            });
            call("incrementalAlterConfigs(topic)", () -> {
                get(alice.incrementalAlterConfigs(Map.of(secretRes, List.of(new AlterConfigOp(
                        new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET)))).all());
                return null;
            });
            call("incrementalAlterConfigs(brokerDefault)", () -> {
                get(alice.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.BROKER, ""),
                        List.of(new AlterConfigOp(new ConfigEntry("log.retention.ms", "1000"), AlterConfigOp.OpType.SET)))).all());
                return null;
            });
            call("deleteTopics", () -> {
                get(alice.deleteTopics(List.of(secret)).all());
                return null;
            });
            call("deleteTopics(allowedToRead)", () -> {
                get(alice.deleteTopics(List.of(readable)).all());
                return null;
            });
            call("createPartitions", () -> {
                get(alice.createPartitions(Map.of(secret, NewPartitions.increaseTo(2))).all());
                return null;
            });
            call("deleteRecords", () -> {
                get(alice.deleteRecords(Map.of(new TopicPartition(readable, 0), RecordsToDelete.beforeOffset(1))).all());
                return null;
            });
            call("describeTopics", () -> {
                get(alice.describeTopics(List.of(secret)).allTopicNames());
                return null;
            });
            call("listTopics", () -> get(alice.listTopics().names()).stream().filter(n -> n.startsWith(prefix))
                    .map(n -> n.substring(prefix.length())).sorted().collect(Collectors.toList()));
            call("describeCluster", () -> {
                var r = alice.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true));
                Set<AclOperation> ops = get(r.authorizedOperations());
                return ops == null ? null : ops.stream().map(Enum::name).sorted().collect(Collectors.toList());
            });
            call("describeAcls", () -> {
                get(alice.describeAcls(AclBindingFilter.ANY).values());
                return null;
            });
            call("createAcls", () -> {
                get(alice.createAcls(List.of(new AclBinding(new ResourcePattern(ResourceType.TOPIC, "*", PatternType.LITERAL),
                        new AccessControlEntry("User:alice", "*", AclOperation.ALL, AclPermissionType.ALLOW)))).all());
                return null;
            });
            call("describeLogDirs", () -> {
                int id = get(alice.describeCluster().nodes()).iterator().next().id();
                get(alice.describeLogDirs(List.of(id)).allDescriptions());
                return null;
            });
            call("electLeaders", () -> {
                get(alice.electLeaders(ElectionType.PREFERRED, Set.of(new TopicPartition(secret, 0))).all());
                return null;
            });
            call("describeUserScramCredentials", () -> {
                get(alice.describeUserScramCredentials().all());
                return null;
            });
            call("alterClientQuotas", () -> {
                get(alice.alterClientQuotas(List.of(new ClientQuotaAlteration(
                        new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, "alice")),
                        List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1e9))))).all());
                return null;
            });
            call("listConsumerGroupOffsets", () -> {
                get(alice.listConsumerGroupOffsets(prefix + "-group").partitionsToOffsetAndMetadata());
                return null;
            });
            call("deleteConsumerGroups", () -> {
                get(alice.deleteConsumerGroups(List.of(prefix + "-group")).all());
                return null;
            });
            call("describeConsumerGroups", () -> {
                get(alice.describeConsumerGroups(List.of(prefix + "-group")).all());
                return null;
            });
            call("describeTransactions", () -> {
                get(alice.describeTransactions(List.of(prefix + "-txn")).all());
                return null;
            });
            call("fenceProducers", () -> {
                get(alice.fenceProducers(List.of(prefix + "-txn")).all());
                return null;
            });
            call("listTransactions", () -> get(alice.listTransactions().all()).size());
        }
    }
}
