package skiff.compat.clients;

import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A Kafka 4.4 producer with the client's defaults for KIP-714 (enable.metrics.push=true):
 * prints its client instance id (which GetTelemetrySubscriptions hands out), then produces a
 * record every 100 ms for the given time, so that it pushes its metrics as subscribed.
 *
 * <p>Arguments: bootstrap topic client.id run-millis
 */
public final class TelemetryProducer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, args[2]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        long runMillis = Long.parseLong(args[3]);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            System.out.println("INSTANCE " + producer.clientInstanceId(Duration.ofSeconds(30)));
            System.out.flush();
            long end = System.currentTimeMillis() + runMillis;
            int i = 0;
            while (System.currentTimeMillis() < end) {
                producer.send(new ProducerRecord<>(args[1], "k", "v" + i++)).get();
                Thread.sleep(100);
            }
            System.out.println("SENT " + i);
        }
    }
}
