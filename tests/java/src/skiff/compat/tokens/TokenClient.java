package skiff.compat.tokens;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Logs in with a delegation token (SCRAM-SHA-256, user name = token id, password = HMAC,
 * tokenauth=true) and prints what it could do, one line per step, nothing that differs
 * between two brokers.
 *
 * args: bootstrap tokenId hmac topic mode; mode "use": token requests are refused over a
 * token connection, then produce 3 records and consume them; mode "refused": the login
 * itself fails (the token was expired). args: users bootstrap name...: makes SCRAM users
 * (the setup, over PLAINTEXT).
 */
public final class TokenClient {
    private TokenClient() {
    }

    private static Properties props(String bootstrap, String tokenId, String hmac) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "SCRAM-SHA-256");
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required"
                + " username=\"" + tokenId + "\" password=\"" + hmac + "\" tokenauth=\"true\";");
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "20000");
        return p;
    }

    /** args: users bootstrap name...: SCRAM-SHA-256 credentials name/name-secret, over PLAINTEXT. */
    private static void users(String bootstrap, String[] names) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        List<org.apache.kafka.clients.admin.UserScramCredentialAlteration> changes = new ArrayList<>();
        for (String name : names) {
            changes.add(new org.apache.kafka.clients.admin.UserScramCredentialUpsertion(name,
                    new org.apache.kafka.clients.admin.ScramCredentialInfo(
                            org.apache.kafka.clients.admin.ScramMechanism.SCRAM_SHA_256, 4096),
                    name + "-secret"));
        }
        try (Admin admin = Admin.create(p)) {
            admin.alterUserScramCredentials(changes).all().get(30, TimeUnit.SECONDS);
        }
        System.out.println("users " + String.join(",", names));
    }

    private static String cause(Throwable e) {
        Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return c.getClass().getSimpleName();
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("users")) {
            users(args[1], java.util.Arrays.copyOfRange(args, 2, args.length));
            return;
        }
        String bootstrap = args[0];
        String tokenId = args[1];
        String hmac = args[2];
        String topic = args[3];
        String mode = args[4];
        Properties p = props(bootstrap, tokenId, hmac);
        try (Admin admin = Admin.create(p)) {
            if (mode.equals("refused")) {
                try {
                    admin.listTopics().names().get(30, TimeUnit.SECONDS);
                    System.out.println("login: accepted");
                } catch (ExecutionException e) {
                    System.out.println("login: " + cause(e));
                }
                return;
            }
            try {
                admin.createDelegationToken().delegationToken().get(30, TimeUnit.SECONDS);
                System.out.println("create token: accepted");
            } catch (ExecutionException e) {
                System.out.println("create token: " + cause(e));
            }
            try {
                admin.describeDelegationToken().delegationTokens().get(30, TimeUnit.SECONDS);
                System.out.println("describe tokens: accepted");
            } catch (ExecutionException e) {
                System.out.println("describe tokens: " + cause(e));
            }
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            System.out.println("created topic");
        }
        Properties pp = new Properties();
        pp.putAll(p);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
            }
            System.out.println("produced 3");
        }
        Properties cp = new Properties();
        cp.putAll(p);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        cp.put("group.id", "token-group");
        cp.put("auto.offset.reset", "earliest");
        List<String> seen = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(Collections.singletonList(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen.size() < 3 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    seen.add(r.key() + "=" + r.value());
                }
            }
            consumer.commitSync();
        }
        System.out.println("consumed " + seen);
    }
}
