/*
 * A Kafka Streams 4.4 application with group.protocol=streams whose topology has a source, an
 * aggregation with a store, a sink and a global store (KIP-1331's node kinds). Once RUNNING it
 * asks Admin.describeStreamsGroups(includeTopologyDescription) until the broker's status is
 * AVAILABLE (the client pushed its description after a StreamsGroupHeartbeat v1 answer asked
 * for it) or waitSeconds pass (0: asks once), and prints the last answer:
 *
 *   DESCRIBED status=<status> assignor=<name> description=<Admin's toString, or none>
 *
 * then runs until stdin is closed (so kafka-streams-groups can describe the live group).
 *
 * args: bootstrap applicationId inputTopic outputTopic globalTopic stateDir waitSeconds
 */
package skiff.compat.streams;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeStreamsGroupsOptions;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupTopologyDescriptionStatus;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class TopologyDescriptionApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String output = args[3];
        String global = args[4];
        String stateDir = args[5];
        long waitSeconds = Long.parseLong(args[6]);

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        props.put("group.protocol", "streams");

        StreamsBuilder builder = new StreamsBuilder();
        GlobalKTable<String, String> names = builder.globalTable(
            global, Consumed.with(Serdes.String(), Serdes.String()), Materialized.as("names"));
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .join(names, (k, v) -> k, (v, name) -> name)
            .groupBy((k, v) -> v, Grouped.with("by-name", Serdes.String(), Serdes.String()))
            .count(Materialized.as("name-counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch running = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.RUNNING) {
                running.countDown();
            }
        });
        streams.start();
        if (!running.await(60, TimeUnit.SECONDS)) {
            System.out.println("NOT RUNNING " + streams.state());
        }
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            StreamsGroupDescription described = null;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(waitSeconds);
            do {
                described = admin.describeStreamsGroups(List.of(appId),
                        new DescribeStreamsGroupsOptions().includeTopologyDescription(true))
                    .describedGroups().get(appId).get(10, TimeUnit.SECONDS);
                if (described.topologyDescriptionStatus() == StreamsGroupTopologyDescriptionStatus.AVAILABLE) {
                    break;
                }
                Thread.sleep(300);
            } while (System.nanoTime() < deadline);
            System.out.println("DESCRIBED status=" + described.topologyDescriptionStatus()
                + " assignor=" + described.assignorName().orElse("none")
                + " description=" + described.topologyDescription().map(Object::toString).orElse("none")
                    .replace('\n', ' '));
            System.out.flush();
        } catch (Exception e) {
            System.out.println("DESCRIBE FAILED " + e);
            System.out.flush();
        }
        try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            while (r.readLine() != null) {
                // until EOF
            }
        }
        streams.close(Duration.ofSeconds(30));
        System.out.println("CLOSED " + streams.state());
        System.out.flush();
    }
}
