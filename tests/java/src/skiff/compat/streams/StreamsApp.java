package skiff.compat.streams;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * A Kafka Streams 4.4 application with exactly_once_v2, for tests/compat/kafka/test_streams_app.py.
 *
 * Input: lines of words (String key ignored, String value), with the producer's timestamps.
 * - word count: split into lower-case words, group by word (a repartition topic), count in the
 *   state store "word-counts" (a changelog topic); every update goes to OUTPUT_PREFIX-words.
 * - windowed aggregation: the same words grouped by their first letter (another repartition
 *   topic), counted in 10 s tumbling windows (grace 1 day, so no record is late) in the window
 *   store "letter-windows"; every update goes to OUTPUT_PREFIX-windows with the key
 *   "letter@windowStartMs".
 * The record cache is off (statestore.cache.max.bytes=0), so each input word makes exactly one
 * update per output: a read_committed reader sees, per key, the counts 1, 2, ..., N.
 *
 * Args: bootstrap application.id input output_prefix state_dir replication_factor [protocol]
 * protocol: "classic" (the default) or "streams" (group.protocol=streams, KIP-1071: the broker
 * assigns the tasks; the consumer's session and heartbeat settings are the group's then).
 * Runs until its stdin closes (or it reaches ERROR), then closes cleanly. Prints one line per
 * state change ("STATE RUNNING"), "TASKS active=[0_0, 1_2] standby=[]" whenever this
 * instance's tasks change, and "CLOSED" at the end.
 */
public final class StreamsApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String outputPrefix = args[3];
        String stateDir = args[4];
        String replication = args[5];
        String protocol = args.length > 6 ? args[6] : "classic";

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, replication);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        if (protocol.equals("streams")) {
            props.put("group.protocol", "streams");
        } else {
            // Short client timeouts: a killed broker is noticed and left quickly.
            props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "10000");
            props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1000");
        }
        props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), "20000");
        props.put(StreamsConfig.producerPrefix("delivery.timeout.ms"), "60000");
        props.put(StreamsConfig.producerPrefix("request.timeout.ms"), "10000");
        props.put("metadata.max.age.ms", "5000");
        props.put(StreamsConfig.TASK_TIMEOUT_MS_CONFIG, "120000");

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
        KStream<String, String> words = lines.flatMapValues(
            line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((k, w) -> !w.isEmpty());

        words.groupBy((k, w) -> w, Grouped.with("by-word", Serdes.String(), Serdes.String()))
            .count(Materialized.as("word-counts"))
            .toStream()
            .to(outputPrefix + "-words", Produced.with(Serdes.String(), Serdes.Long()));

        words.groupBy((k, w) -> w.substring(0, 1), Grouped.with("by-letter", Serdes.String(), Serdes.String()))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofDays(1)))
            .count(Materialized.as("letter-windows"))
            .toStream()
            .map((wk, n) -> KeyValue.pair(wk.key() + "@" + wk.window().start(), n))
            .to(outputPrefix + "-windows", Produced.with(Serdes.String(), Serdes.Long()));

        Topology topology = builder.build();
        System.out.println("TOPOLOGY " + topology.describe().toString().replace('\n', ' '));
        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch failed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR) {
                failed.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("UNCAUGHT " + e);
            e.printStackTrace(System.out);
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                .StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                while (r.readLine() != null) {
                    // wait for EOF
                }
            } catch (Exception e) {
                // closed
            }
            failed.countDown();
        });
        stdin.setDaemon(true);
        stdin.start();
        String tasks = "";
        while (!failed.await(300, TimeUnit.MILLISECONDS)) {
            String now = describeTasks(streams);
            if (!now.equals(tasks)) {
                tasks = now;
                System.out.println("TASKS " + now);
                System.out.flush();
            }
        }
        streams.close(Duration.ofSeconds(60));
        System.out.println("CLOSED " + streams.state());
        System.out.flush();
    }

    private static String describeTasks(KafkaStreams streams) {
        java.util.TreeSet<String> active = new java.util.TreeSet<>();
        java.util.TreeSet<String> standby = new java.util.TreeSet<>();
        try {
            for (org.apache.kafka.streams.ThreadMetadata t : streams.metadataForLocalThreads()) {
                t.activeTasks().forEach(m -> active.add(m.taskId().toString()));
                t.standbyTasks().forEach(m -> standby.add(m.taskId().toString()));
            }
        } catch (Exception e) {
            return "";
        }
        return "active=" + active + " standby=" + standby;
    }
}
