package skiff.compat.tls;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.FileReader;
import java.io.Reader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Kafka 4.4 Java client over TLS with client authentication, its key and trust stores
 * given as files of any ssl.keystore.type. Arguments: NAME=PROPERTIES_FILE pairs. For each,
 * in turn: create topic "stores-NAME", produce 20 records, read them back, and print one
 * JSON line {name, status ("ok" or the exception's class), message, produced, consumed}.
 * The properties may bound the admin call (default.api.timeout.ms, request.timeout.ms).
 */
public final class StoreClients {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int RECORDS = 20;

    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            int eq = arg.indexOf('=');
            String name = arg.substring(0, eq);
            Properties props = new Properties();
            try (Reader r = new FileReader(arg.substring(eq + 1))) {
                props.load(r);
            }
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("name", name);
            try {
                run(name, props, out);
                out.put("status", "ok");
            } catch (Exception e) {
                Throwable t = e;
                while (t.getCause() != null && t instanceof java.util.concurrent.ExecutionException) {
                    t = t.getCause();
                }
                out.put("status", t.getClass().getSimpleName());
                out.put("message", String.valueOf(t.getMessage()));
            }
            System.out.println(JSON.writeValueAsString(out));
        }
    }

    private static void run(String name, Properties base, Map<String, Object> out)
            throws Exception {
        String topic = "stores-" + name;
        Properties a = new Properties();
        a.putAll(base);
        a.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        a.putIfAbsent(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        try (Admin admin = Admin.create(a)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all()
                 .get(30, TimeUnit.SECONDS);
        }
        Properties p = new Properties();
        p.putAll(base);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        List<String> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < RECORDS; i++) {
                String v = name + "-" + i;
                producer.send(new ProducerRecord<>(topic, v)).get(30, TimeUnit.SECONDS);
                sent.add(v);
            }
        }
        out.put("produced", sent);
        Properties c = new Properties();
        c.putAll(base);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> read = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 30_000;
            while (read.size() < RECORDS && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> rec : consumer.poll(Duration.ofMillis(500))) {
                    read.add(rec.value());
                }
            }
        }
        out.put("consumed", read);
    }
}
