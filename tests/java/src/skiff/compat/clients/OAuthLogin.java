package skiff.compat.clients;

import java.io.FileInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Kafka 4.4 Java producer and consumer logging in with SASL/OAUTHBEARER, case by case.
 *
 * <p>Arguments: {@code <NAME>=<client.properties> ...}. Each properties file holds
 * bootstrap.servers, the SASL settings of the case and {@code skiff.topic} (the topic the
 * case writes, made beforehand); {@code skiff.allowed.urls}, when present, becomes the
 * {@code org.apache.kafka.sasl.oauthbearer.allowed.urls} system property that Kafka 4 needs
 * before it reads a token from a file: URL. Each case produces three records and reads the
 * topic back from the beginning, then prints one line:
 * {@code NAME ok <values read, comma-separated>} or {@code NAME error <class>: <message>}
 * (the first exception's class and message, as the client reported it).
 */
public final class OAuthLogin {
    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            int eq = arg.indexOf('=');
            String name = arg.substring(0, eq);
            Properties props = new Properties();
            try (InputStream in = new FileInputStream(arg.substring(eq + 1))) {
                props.load(in);
            }
            String urls = (String) props.remove("skiff.allowed.urls");
            if (urls != null)
                System.setProperty("org.apache.kafka.sasl.oauthbearer.allowed.urls", urls);
            String topic = (String) props.remove("skiff.topic");
            try {
                System.out.println(name + " ok " + String.join(",", roundTrip(props, topic, name)));
            } catch (Exception e) {
                // The authentication error if one is in the chain, else what was thrown
                // (an ExecutionException reports its cause).
                Throwable t = e instanceof java.util.concurrent.ExecutionException
                        && e.getCause() != null ? e.getCause() : e;
                for (Throwable c = e; c != null; c = c.getCause())
                    if (c instanceof org.apache.kafka.common.errors.AuthenticationException) {
                        t = c;
                        break;
                    }
                System.out.println(name + " error " + t.getClass().getName() + ": "
                        + String.valueOf(t.getMessage()).replace('\n', ' '));
            }
            System.out.flush();
        }
    }

    private static List<String> roundTrip(Properties common, String topic, String name)
            throws Exception {
        Properties p = new Properties();
        p.putAll(common);
        p.put("max.block.ms", "15000");
        p.put("delivery.timeout.ms", "15000");
        p.put("request.timeout.ms", "10000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < 3; i++)
                producer.send(new ProducerRecord<>(topic, name + "-" + i)).get();
        }
        Properties c = new Properties();
        c.putAll(common);
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        c.put("default.api.timeout.ms", "15000");
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 20000;
            while (got.size() < 3 && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500)))
                    got.add(r.value());
        }
        return got;
    }
}
