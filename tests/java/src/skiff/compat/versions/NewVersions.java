package skiff.compat.versions;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.ApiVersionsRequestData;
import org.apache.kafka.common.message.ApiVersionsResponseData;
import org.apache.kafka.common.message.DeleteGroupsRequestData;
import org.apache.kafka.common.message.DeleteGroupsResponseData;
import org.apache.kafka.common.message.StreamsGroupDescribeRequestData;
import org.apache.kafka.common.message.StreamsGroupDescribeResponseData;
import org.apache.kafka.common.message.StreamsGroupHeartbeatResponseData;
import org.apache.kafka.common.message.StreamsGroupTopologyDescriptionUpdateRequestData;
import org.apache.kafka.common.message.StreamsGroupTopologyDescriptionUpdateResponseData;
import org.apache.kafka.common.message.TxnOffsetCommitRequestData;
import org.apache.kafka.common.message.TxnOffsetCommitResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.ApiVersionsRequest;
import org.apache.kafka.common.requests.ApiVersionsResponse;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.TxnOffsetCommitRequest;
import org.apache.kafka.common.requests.TxnOffsetCommitResponse;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Kafka 4.4 versions kio 0.6.5 lacks (ApiVersions v5, TxnOffsetCommit v6, DeleteGroups v3;
 * in "ref" also KIP-1331's StreamsGroupHeartbeat/Describe v1 and StreamsGroupTopologyDescriptionUpdate).
 * "ref": prints Kafka's own encoding of a sample of each message ("name hex" lines).
 * "e2e BOOTSTRAP": against a broker, prints "key value" lines: the advertised maxima, raw
 * ApiVersions v5 exchanges (right and wrong ClusterId/NodeId) and a TxnOffsetCommit v6 with an
 * unknown topic id, built and parsed by Kafka's own classes; then a transactional producer's
 * sendOffsetsToTransaction and Admin.deleteConsumerGroups.
 */
public final class NewVersions {
    static final Uuid TOPIC_ID = Uuid.fromString("AAECAwQFBgcICQoLDA0ODw");

    public static void main(String[] args) throws Exception {
        if (args[0].equals("ref")) {
            ref();
        } else {
            e2e(args[1]);
        }
    }

    static void print(String name, Message m, int version) {
        ByteBuffer b = MessageUtil.toByteBufferAccessor(m, (short) version).buffer().duplicate();
        if (b.position() != 0) b.flip();
        StringBuilder sb = new StringBuilder();
        while (b.hasRemaining()) sb.append(String.format("%02x", b.get()));
        System.out.println(name + " " + sb);
    }

    static void ref() {
        print("api_versions_request", new ApiVersionsRequestData().setClientSoftwareName("skiff-test")
            .setClientSoftwareVersion("1.0").setClusterId("Cluster-abc").setNodeId(7), 5);
        print("api_versions_request_defaults", new ApiVersionsRequestData()
            .setClientSoftwareName("c").setClientSoftwareVersion("1"), 5);
        ApiVersionsResponseData avr = new ApiVersionsResponseData().setErrorCode((short) 129)
            .setThrottleTimeMs(0);
        avr.apiKeys().add(new ApiVersionsResponseData.ApiVersion().setApiKey((short) 18)
            .setMinVersion((short) 0).setMaxVersion((short) 5));
        print("api_versions_response", avr, 5);
        TxnOffsetCommitRequestData tr = new TxnOffsetCommitRequestData().setTransactionalId("tx")
            .setGroupId("g").setProducerId(42L).setProducerEpoch((short) 3)
            .setGenerationIdOrMemberEpoch(5).setMemberId("m").setGroupInstanceId(null);
        tr.topics().add(new TxnOffsetCommitRequestData.TxnOffsetCommitRequestTopic()
            .setTopicId(TOPIC_ID).setPartitions(List.of(
                new TxnOffsetCommitRequestData.TxnOffsetCommitRequestPartition().setPartitionIndex(1)
                    .setCommittedOffset(100L).setCommittedLeaderEpoch(2).setCommittedMetadata("md"))));
        print("txn_offset_commit_request", tr, 6);
        TxnOffsetCommitResponseData tres = new TxnOffsetCommitResponseData().setThrottleTimeMs(0);
        tres.topics().add(new TxnOffsetCommitResponseData.TxnOffsetCommitResponseTopic()
            .setTopicId(TOPIC_ID).setPartitions(List.of(
                new TxnOffsetCommitResponseData.TxnOffsetCommitResponsePartition().setPartitionIndex(1)
                    .setErrorCode((short) 100))));
        print("txn_offset_commit_response", tres, 6);
        print("delete_groups_request", new DeleteGroupsRequestData().setGroupsNames(List.of("a", "b")), 3);
        DeleteGroupsResponseData dr = new DeleteGroupsResponseData().setThrottleTimeMs(0);
        dr.results().add(new DeleteGroupsResponseData.DeletableGroupResult().setGroupId("a")
            .setErrorCode((short) 0));
        dr.results().add(new DeleteGroupsResponseData.DeletableGroupResult().setGroupId("b")
            .setErrorCode((short) 68).setErrorMessage("The group is not empty."));
        print("delete_groups_response", dr, 3);
        StreamsGroupHeartbeatResponseData hb = new StreamsGroupHeartbeatResponseData()
            .setMemberId("m").setMemberEpoch(3).setHeartbeatIntervalMs(5000)
            .setTaskOffsetIntervalMs(60000).setAcceptableRecoveryLag(10000L)
            .setTopologyDescriptionRequired(true).setEndpointInformationEpoch(1)
            .setActiveTasks(List.of(new StreamsGroupHeartbeatResponseData.TaskIds()
                .setSubtopologyId("0").setPartitions(List.of(0, 1))))
            .setStandbyTasks(List.of()).setWarmupTasks(List.of());
        print("streams_group_heartbeat_response", hb, 1);
        print("streams_group_describe_request", new StreamsGroupDescribeRequestData()
            .setGroupIds(List.of("g")).setIncludeTopologyDescription(true), 1);
        StreamsGroupDescribeResponseData.TopologyDescriptionNode src =
            new StreamsGroupDescribeResponseData.TopologyDescriptionNode().setName("src")
                .setNodeType((byte) 1).setSourceTopics(List.of("in")).setSuccessors(List.of("agg"));
        StreamsGroupDescribeResponseData.TopologyDescriptionNode agg =
            new StreamsGroupDescribeResponseData.TopologyDescriptionNode().setName("agg")
                .setNodeType((byte) 2).setStores(List.of("counts"));
        StreamsGroupDescribeResponseData sd = new StreamsGroupDescribeResponseData();
        sd.groups().add(new StreamsGroupDescribeResponseData.DescribedGroup().setGroupId("g")
            .setGroupState("Stable").setGroupEpoch(2).setAssignmentEpoch(2)
            .setTopology(new StreamsGroupDescribeResponseData.Topology().setEpoch(1)
                .setSubtopologies(List.of()))
            .setTopologyDescriptionStatus((byte) 3).setAssignorName("sticky")
            .setTopologyDescription(new StreamsGroupDescribeResponseData.TopologyDescription()
                .setSubtopologies(List.of(new StreamsGroupDescribeResponseData.TopologyDescriptionSubtopology()
                    .setSubtopologyId("0").setNodes(List.of(src, agg))))
                .setGlobalStores(List.of(new StreamsGroupDescribeResponseData.TopologyDescriptionGlobalStore()
                    .setSource(src).setProcessor(agg)))));
        print("streams_group_describe_response", sd, 1);
        print("streams_group_topology_description_update_request",
            new StreamsGroupTopologyDescriptionUpdateRequestData().setGroupId("g").setMemberId("m")
                .setTopologyEpoch(1).setTopologyDescription(
                    new StreamsGroupTopologyDescriptionUpdateRequestData.TopologyDescription()
                        .setSubtopologies(List.of(
                            new StreamsGroupTopologyDescriptionUpdateRequestData.TopologyDescriptionSubtopology()
                                .setSubtopologyId("0").setNodes(List.of(
                                    new StreamsGroupTopologyDescriptionUpdateRequestData.TopologyDescriptionNode()
                                        .setName("sink").setNodeType((byte) 3).setSinkTopic("out")))))
                        .setGlobalStores(List.of())), 0);
        print("streams_group_topology_description_update_response",
            new StreamsGroupTopologyDescriptionUpdateResponseData().setErrorCode((short) 35)
                .setErrorMessage("no plugin"), 0);
    }

    static AbstractResponse exchange(String bootstrap, AbstractRequest req, ApiKeys key, short v)
            throws Exception {
        String[] hp = bootstrap.split(":");
        try (Socket s = new Socket(hp[0], Integer.parseInt(hp[1]))) {
            s.setSoTimeout(20000);
            RequestHeader header = new RequestHeader(key, v, "new-versions", 11);
            ByteBuffer out = req.serializeWithHeader(header);
            DataOutputStream dos = new DataOutputStream(s.getOutputStream());
            dos.writeInt(out.remaining());
            dos.write(out.array(), out.arrayOffset() + out.position(), out.remaining());
            dos.flush();
            DataInputStream dis = new DataInputStream(s.getInputStream());
            byte[] in = new byte[dis.readInt()];
            dis.readFully(in);
            return AbstractResponse.parseResponse(ByteBuffer.wrap(in), header);
        }
    }

    static ApiVersionsResponse apiVersions(String bootstrap, String clusterId, int nodeId) throws Exception {
        ApiVersionsRequestData d = new ApiVersionsRequestData().setClientSoftwareName("new-versions")
            .setClientSoftwareVersion("1.0").setClusterId(clusterId).setNodeId(nodeId);
        return (ApiVersionsResponse) exchange(bootstrap, new ApiVersionsRequest(d, (short) 5),
            ApiKeys.API_VERSIONS, (short) 5);
    }

    static void e2e(String bootstrap) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            String clusterId = admin.describeCluster().clusterId().get();
            Node node = admin.describeCluster().nodes().get().iterator().next();
            ApiVersionsResponse ok = apiVersions(bootstrap, clusterId, node.id());
            System.out.println("av5_ok_error " + ok.data().errorCode());
            for (short k : new short[] {18, 28, 42}) {
                System.out.println("max_" + k + " " + ok.data().apiKeys().find(k).maxVersion());
            }
            System.out.println("av5_no_ids_error " + apiVersions(bootstrap, null, -1).data().errorCode());
            ApiVersionsResponse wrongCluster = apiVersions(bootstrap, "not-" + clusterId, node.id());
            System.out.println("av5_wrong_cluster_error " + wrongCluster.data().errorCode()
                + " keys " + wrongCluster.data().apiKeys().size());
            System.out.println("av5_wrong_node_error "
                + apiVersions(bootstrap, clusterId, node.id() + 100).data().errorCode());
            System.out.println("av5_node_without_cluster_error "
                + apiVersions(bootstrap, null, node.id()).data().errorCode());

            String topic = "new-versions-" + System.nanoTime();
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            String group = topic + "-group";
            Properties pp = new Properties();
            pp.put("bootstrap.servers", bootstrap);
            pp.put("transactional.id", topic + "-tx");
            pp.put("key.serializer", StringSerializer.class.getName());
            pp.put("value.serializer", StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                producer.initTransactions();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, "k", "v")).get();
                producer.sendOffsetsToTransaction(
                    Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(17L, "meta")),
                    new ConsumerGroupMetadata(group));
                producer.commitTransaction();
            }
            Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            OffsetAndMetadata om = committed.get(new TopicPartition(topic, 0));
            System.out.println("txn_committed " + (om == null ? "none" : om.offset() + ":" + om.metadata()));

            // TxnOffsetCommit v6 for a topic id no topic has, by Kafka's own request class
            TxnOffsetCommitRequestData td = new TxnOffsetCommitRequestData().setTransactionalId(topic + "-tx")
                .setGroupId(group).setProducerId(1L).setProducerEpoch((short) 0);
            td.topics().add(new TxnOffsetCommitRequestData.TxnOffsetCommitRequestTopic()
                .setTopicId(Uuid.randomUuid()).setPartitions(List.of(
                    new TxnOffsetCommitRequestData.TxnOffsetCommitRequestPartition()
                        .setPartitionIndex(0).setCommittedOffset(1L))));
            TxnOffsetCommitResponse tr = (TxnOffsetCommitResponse) exchange(bootstrap,
                new TxnOffsetCommitRequest(td, (short) 6), ApiKeys.TXN_OFFSET_COMMIT, (short) 6);
            System.out.println("txn_v6_unknown_id_error "
                + tr.data().topics().get(0).partitions().get(0).errorCode());

            admin.deleteConsumerGroups(List.of(group)).all().get();
            System.out.println("delete_group ok");
            try {
                admin.deleteConsumerGroups(List.of(group + "-missing")).all().get();
                System.out.println("delete_missing ok");
            } catch (ExecutionException e) {
                System.out.println("delete_missing " + e.getCause().getClass().getSimpleName()
                    + ": " + e.getCause().getMessage());
            }
        }
    }
}
