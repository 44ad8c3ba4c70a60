// The Java client harness of the compat suite: one run drives kafka-clients (3.9 or 4.x, whichever
// classpath it was compiled and started with) through a fixed script against one broker and prints
// what the client observes, one JSON object per line: {"step": ..., ...}. The Python test runs the
// same script against Samsa and against Apache Kafka and compares the lines.
//
//   java -cp <clients classpath>:<compiled> Harness <bootstrap> <scenario> <prefix>
//
// Scenarios: "clients" (producer, consumer, groups), "admin" (the AdminClient). Topic and group
// names start with <prefix>, so runs of different client versions against one broker do not meet.
// Values that legitimately differ between brokers are printed normalised here: producer-clock
// timestamps as "now", the cluster id as its presence. Every call has a bounded timeout.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Harness {
    static final long T0 = 1_700_000_000_000L;
    static final Duration POLL = Duration.ofMillis(200);
    static final long DEADLINE_MS = 30_000;
    static String bootstrap;
    static String prefix;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String scenario = args[1];
        prefix = args[2];
        out("start", "clientVersion", AppInfoVersion.get());
        switch (scenario) {
            case "clients": clients(); break;
            case "admin": adminScenario(); break;
            default: throw new IllegalArgumentException(scenario);
        }
        out("end");
        System.out.flush();
        System.exit(0);
    }

    // ------------------------------------------------------------------------------- clients

    static void clients() throws Exception {
        String topic = prefix + "-data";
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
            out("create", "topic", topic);
            out("create-again", "error", errorOf(() -> admin.createTopics(
                    List.of(new NewTopic(topic, 2, (short) 1))).all().get(30, TimeUnit.SECONDS)));
        }

        // Producer with default settings: idempotent, acks=all.
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        RecordHeaders h = new RecordHeaders();
        h.add("h1", b("a"));
        h.add("h2", null);
        h.add("h1", b("b"));
        recs.add(new ProducerRecord<>(topic, 0, T0, b("k0"), b("v0"), h));
        recs.add(new ProducerRecord<>(topic, 0, T0 + 1000, null, b("v1")));
        recs.add(new ProducerRecord<>(topic, 0, T0 + 2000, b("k2"), (byte[]) null));
        recs.add(new ProducerRecord<>(topic, 0, null, b("k3"), b("v3")));
        recs.add(new ProducerRecord<>(topic, 0, T0 + 4000, b("k4"), b("x".repeat(3000))));
        for (int i = 0; i < 3; i++) {
            recs.add(new ProducerRecord<>(topic, 1, T0 + 10_000 + i, b("p1-" + i), b("w" + i)));
        }
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
            for (ProducerRecord<byte[], byte[]> r : recs) fs.add(producer.send(r));
            producer.flush();
            for (java.util.concurrent.Future<RecordMetadata> f : fs) {
                RecordMetadata m = f.get(30, TimeUnit.SECONDS);
                out("produced", "partition", m.partition(), "offset", m.offset(), "timestamp", ts(m.timestamp()),
                        "keySize", m.serializedKeySize(), "valueSize", m.serializedValueSize());
            }
            out("partitionsFor", "partitions", producer.partitionsFor(topic).size());
        }
        // auto-created by the producer's metadata request
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            RecordMetadata m = producer.send(new ProducerRecord<>(prefix + "-auto", b("k"), b("v"))).get(30, TimeUnit.SECONDS);
            out("produced-auto", "partition", m.partition(), "offset", m.offset());
        }

        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        // Consumer with assign (no group).
        try (KafkaConsumer<byte[], byte[]> c = consumer(null, Map.of())) {
            c.assign(List.of(p0, p1));
            c.seekToBeginning(List.of(p0, p1));
            List<ConsumerRecord<byte[], byte[]>> got = pollN(c, 8);
            got.sort(Comparator.comparing((ConsumerRecord<byte[], byte[]> r) -> r.partition()).thenComparing(ConsumerRecord::offset));
            for (ConsumerRecord<byte[], byte[]> r : got) printRecord("consumed", r);
            out("position", "p0", c.position(p0), "p1", c.position(p1));
            out("beginningOffsets", "offsets", tpMap(c.beginningOffsets(List.of(p0, p1))));
            out("endOffsets", "offsets", tpMap(c.endOffsets(List.of(p0, p1))));
            Map<TopicPartition, Long> q = new HashMap<>();
            q.put(p0, T0 + 1000);
            q.put(p1, T0 + 10_001);
            out("offsetsForTimes", "result", oat(c.offsetsForTimes(q)));
            out("offsetsForTimes-between", "result", oat(c.offsetsForTimes(Map.of(p0, T0 + 1500))));
            out("offsetsForTimes-none", "result", oat(c.offsetsForTimes(Map.of(p0, T0 + 86_400_000L * 365 * 50))));
            c.seek(p0, 3);
            c.pause(List.of(p1));
            List<ConsumerRecord<byte[], byte[]>> after = pollN(c, 2);
            out("seek", "offsets", after.stream().map(ConsumerRecord::offset).sorted().toList());
            // Position validation with OffsetForLeaderEpoch (v3+): a position carrying leader epoch 0
            // beyond the end of epoch 0 is detected as log truncation.
            c.seek(p0, new OffsetAndMetadata(100, Optional.of(0), ""));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (System.currentTimeMillis() < deadline) {
                c.poll(POLL);
                if (c.position(p0) != 100) break;
            }
            out("validate-default", "position", c.position(p0));
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer(null, Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none"))) {
            c.assign(List.of(p0));
            c.seek(p0, new OffsetAndMetadata(50, Optional.of(0), ""));
            String error = null;
            Object divergent = null;
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (System.currentTimeMillis() < deadline && error == null) {
                try {
                    c.poll(POLL);
                } catch (LogTruncationException e) {
                    error = e.getClass().getSimpleName();
                    divergent = oam(e.divergentOffsets());
                } catch (KafkaException e) {
                    error = e.getClass().getSimpleName();
                }
            }
            out("validate-none", "error", error, "divergent", divergent);
            c.seek(p0, 1000);
            error = null;
            deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (System.currentTimeMillis() < deadline && error == null) {
                try {
                    c.poll(POLL);
                } catch (OffsetOutOfRangeException e) {
                    error = e.getClass().getSimpleName() + " " + tpMap(e.offsetOutOfRangePartitions());
                }
            }
            out("out-of-range-none", "error", error);
        }

        // Commit and fetch offsets with a group but assigned partitions.
        String g1 = prefix + "-g1";
        try (KafkaConsumer<byte[], byte[]> c = consumer(g1, Map.of())) {
            c.assign(List.of(p0));
            out("committed-before", "result", oam(c.committed(Set.of(p0))));
            c.commitSync(Map.of(p0, new OffsetAndMetadata(3, "meta-3")));
            out("committed", "result", oam(c.committed(Set.of(p0))));
            c.seekToBeginning(List.of(p0));
            pollN(c, 5);
            c.commitSync();
            out("committed-position", "result", oam(c.committed(Set.of(p0))));
        }

        // Subscribe: the classic group protocol, auto commit off.
        String g2 = prefix + "-g2";
        try (KafkaConsumer<byte[], byte[]> c = consumer(g2, Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
                ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "100"))) {
            c.subscribe(List.of(topic));
            List<ConsumerRecord<byte[], byte[]>> got = pollN(c, 8);
            c.poll(Duration.ofMillis(300)); // a few heartbeats
            List<String> assignment = new ArrayList<>();
            for (TopicPartition tp : c.assignment()) assignment.add(tp.toString());
            Collections.sort(assignment);
            out("subscribed", "assignment", assignment, "records", got.size());
            c.commitSync();
            out("subscribed-committed", "result", oam(c.committed(Set.of(p0, p1))));
            ConsumerGroupMetadata gm = c.groupMetadata();
            out("group-metadata", "groupId", gm.groupId(), "generation", gm.generationId() > 0, "member", !gm.memberId().isEmpty());
        }
        // A second subscriber resumes at the committed offsets: nothing left to read.
        try (KafkaConsumer<byte[], byte[]> c = consumer(g2, Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest"))) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            int n = 0;
            while (System.currentTimeMillis() < deadline && c.assignment().size() < 2) n += c.poll(POLL).count();
            n += c.poll(Duration.ofMillis(500)).count();
            out("resubscribed", "records", n, "p0", c.position(new TopicPartition(topic, 0)), "p1", c.position(new TopicPartition(topic, 1)));
        }
        try (Admin admin = admin()) {
            Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(g2)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            out("admin-group-offsets", "result", oam(offs));
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(g2)).all().get(30, TimeUnit.SECONDS).get(g2);
            out("admin-describe-group", "state", String.valueOf(groupState(d)), "members", d.members().size(),
                    "simple", d.isSimpleConsumerGroup(), "assignor", d.partitionAssignor());
            List<String> groups = new ArrayList<>();
            for (ConsumerGroupListing l : admin.listConsumerGroups().all().get(30, TimeUnit.SECONDS)) {
                if (l.groupId().startsWith(prefix)) groups.add(l.groupId());
            }
            Collections.sort(groups);
            out("admin-list-groups", "groups", groups);
            admin.deleteConsumerGroupOffsets(g1, Set.of(p0)).all().get(30, TimeUnit.SECONDS);
            out("admin-delete-group-offsets", "after", oam(admin.listConsumerGroupOffsets(g1)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS)));
            admin.deleteConsumerGroups(List.of(g1)).all().get(30, TimeUnit.SECONDS);
            out("admin-delete-group", "again", errorOf(() -> admin.deleteConsumerGroups(List.of(g1)).all().get(30, TimeUnit.SECONDS)));
        }
    }

    static Object groupState(ConsumerGroupDescription d) {
        // state() (ConsumerGroupState) in 3.9, groupState() (GroupState) in 4.x: read whichever exists.
        for (String name : new String[] {"groupState", "state"}) {
            try {
                return d.getClass().getMethod(name).invoke(d);
            } catch (ReflectiveOperationException e) {
                // try the next
            }
        }
        return "?";
    }

    // --------------------------------------------------------------------------------- admin

    static void adminScenario() throws Exception {
        String topic = prefix + "-adm";
        try (Admin admin = admin()) {
            DescribeClusterResult dc = admin.describeCluster();
            Collection<Node> nodes = dc.nodes().get(30, TimeUnit.SECONDS);
            Node controller = dc.controller().get(30, TimeUnit.SECONDS);
            out("describeCluster", "nodes", nodes.stream().map(n -> n.id() + "@" + n.host()).sorted().toList(),
                    "hasClusterId", dc.clusterId().get(30, TimeUnit.SECONDS) != null,
                    "controllerIsANode", controller != null && nodes.stream().anyMatch(n -> n.id() == controller.id()));

            Map<String, String> configs = Map.of("cleanup.policy", "compact", "retention.ms", "3600000");
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1).configs(configs))).all().get(30, TimeUnit.SECONDS);
            out("createTopics", "error", errorOf(() -> admin.createTopics(List.of(new NewTopic(prefix + "-bad", 0, (short) 1))).all().get(30, TimeUnit.SECONDS)));
            out("createTopics-rf", "error", errorOf(() -> admin.createTopics(List.of(new NewTopic(prefix + "-rf", 1, (short) 3))).all().get(30, TimeUnit.SECONDS)));
            out("createTopics-name", "error", errorOf(() -> admin.createTopics(List.of(new NewTopic("bad name!", 1, (short) 1))).all().get(30, TimeUnit.SECONDS)));
            describeTopic(admin, topic, "describeTopics");
            out("describeTopics-unknown", "error", errorOf(() -> admin.describeTopics(List.of(prefix + "-nope")).allTopicNames().get(30, TimeUnit.SECONDS)));
            Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
            out("listTopics", "mine", names.stream().filter(n -> n.startsWith(prefix)).sorted().toList(),
                    "internalHidden", names.stream().noneMatch(n -> n.startsWith("__")));

            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            describeConfigs(admin, res, "describeConfigs");
            admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", null), AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET))))
                    .all().get(30, TimeUnit.SECONDS);
            awaitConfig(admin, res, "retention.ms", "7200000");
            describeConfigs(admin, res, "describeConfigs-altered");
            out("alterConfigs-invalid", "error", errorOf(() -> admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "not-a-number"), AlterConfigOp.OpType.SET))))
                    .all().get(30, TimeUnit.SECONDS)));
            out("alterConfigs-unknown-key", "error", errorOf(() -> admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET))))
                    .all().get(30, TimeUnit.SECONDS)));
            // The legacy AlterConfigs (replaces the whole set) exists in the 3.9 AdminClient only.
            try {
                java.lang.reflect.Method legacy = admin.getClass().getMethod("alterConfigs", Map.class);
                legacy.invoke(admin, Map.of(res, new Config(List.of(new ConfigEntry("retention.ms", "7200000"),
                        new ConfigEntry("max.message.bytes", "2000000")))));
                ((AlterConfigsResult) legacy.invoke(admin, Map.of(res, new Config(List.of(new ConfigEntry("retention.ms", "7200000"),
                        new ConfigEntry("max.message.bytes", "2000000")))))).all().get(30, TimeUnit.SECONDS);
                out("legacyAlterConfigs", "available", true);
            } catch (NoSuchMethodException e) {
                out("legacyAlterConfigs", "available", false);
            }
            describeConfigs(admin, res, "describeConfigs-legacy-altered");
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(nodes.iterator().next().id()));
            Config bc = admin.describeConfigs(List.of(broker)).all().get(30, TimeUnit.SECONDS).get(broker);
            List<Object> brokerEntries = new ArrayList<>();
            for (String name : List.of("num.partitions", "auto.create.topics.enable", "log.retention.hours", "message.max.bytes",
                    "offsets.topic.replication.factor", "group.initial.rebalance.delay.ms", "log.cleanup.policy")) {
                ConfigEntry e = bc.get(name);
                brokerEntries.add(e == null ? name + "=<absent>" : name + "=" + e.value() + " " + e.source() + " ro=" + e.isReadOnly());
            }
            out("describeConfigs-broker", "entries", brokerEntries);

            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get(30, TimeUnit.SECONDS);
            describeTopic(admin, topic, "createPartitions");
            out("createPartitions-decrease", "error", errorOf(() -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get(30, TimeUnit.SECONDS)));

            // list offsets and delete records on a plain topic
            String data = prefix + "-lo";
            admin.createTopics(List.of(new NewTopic(data, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
                long[] tss = {T0 + 5000, T0 + 1000, T0 + 9000, T0 + 3000};
                for (long t : tss) producer.send(new ProducerRecord<>(data, 0, t, null, b("v" + t))).get(30, TimeUnit.SECONDS);
            }
            TopicPartition tp = new TopicPartition(data, 0);
            Map<String, OffsetSpec> specs = new LinkedHashMap<>();
            specs.put("earliest", OffsetSpec.earliest());
            specs.put("latest", OffsetSpec.latest());
            specs.put("maxTimestamp", OffsetSpec.maxTimestamp());
            specs.put("ts-4000", OffsetSpec.forTimestamp(T0 + 4000));
            specs.put("ts-1000", OffsetSpec.forTimestamp(T0 + 1000));
            specs.put("ts-future", OffsetSpec.forTimestamp(T0 + 100_000));
            for (Map.Entry<String, OffsetSpec> s : specs.entrySet()) {
                ListOffsetsResult.ListOffsetsResultInfo i = admin.listOffsets(Map.of(tp, s.getValue())).partitionResult(tp).get(30, TimeUnit.SECONDS);
                out("listOffsets", "spec", s.getKey(), "offset", i.offset(), "timestamp", i.timestamp(), "leaderEpoch", String.valueOf(i.leaderEpoch()));
            }
            DeletedRecords dr = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(2))).lowWatermarks().get(tp).get(30, TimeUnit.SECONDS);
            out("deleteRecords", "lowWatermark", dr.lowWatermark());
            out("deleteRecords-beyond", "error", errorOf(() -> admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(99))).all().get(30, TimeUnit.SECONDS)));
            ListOffsetsResult.ListOffsetsResultInfo e = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get(30, TimeUnit.SECONDS);
            out("listOffsets-after-delete", "earliest", e.offset());

            admin.deleteTopics(List.of(data)).all().get(30, TimeUnit.SECONDS);
            out("deleteTopics-again", "error", errorOf(() -> admin.deleteTopics(List.of(data)).all().get(30, TimeUnit.SECONDS)));
        }
    }

    static void describeTopic(Admin admin, String topic, String step) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
        List<String> parts = new ArrayList<>();
        for (TopicPartitionInfo p : d.partitions()) {
            parts.add(p.partition() + " leader=" + (p.leader() == null ? "none" : p.leader().id())
                    + " replicas=" + p.replicas().stream().map(Node::id).toList()
                    + " isr=" + p.isr().stream().map(Node::id).toList());
        }
        out(step, "name", d.name(), "internal", d.isInternal(), "partitions", parts,
                "hasTopicId", d.topicId() != null && !d.topicId().equals(Uuid.ZERO_UUID));
    }

    /** Until the broker describes `name` as `value`: a KRaft broker applies a config change when
     *  the controller's record reaches it, so a describe right after the alter may not show it yet. */
    static void awaitConfig(Admin admin, ConfigResource res, String name, String value) throws Exception {
        long deadline = System.currentTimeMillis() + 15_000;
        while (System.currentTimeMillis() < deadline) {
            ConfigEntry e = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res).get(name);
            if (e != null && value.equals(e.value())) return;
            Thread.sleep(100);
        }
    }

    static void describeConfigs(Admin admin, ConfigResource res, String step) throws Exception {
        Config cfg = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
        List<Object> entries = new ArrayList<>();
        for (String name : List.of("cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes", "max.message.bytes",
                "message.timestamp.type", "min.insync.replicas", "compression.type", "unclean.leader.election.enable")) {
            ConfigEntry e = cfg.get(name);
            entries.add(e == null ? name + "=<absent>" : name + "=" + e.value() + " " + e.source() + " default=" + e.isDefault()
                    + " ro=" + e.isReadOnly() + " sensitive=" + e.isSensitive());
        }
        out(step, "entries", entries);
    }

    // ------------------------------------------------------------------------------- helpers

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    static KafkaConsumer<byte[], byte[]> consumer(String group, Map<String, String> extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    static List<ConsumerRecord<byte[], byte[]>> pollN(KafkaConsumer<byte[], byte[]> c, int n) {
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (got.size() < n && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : c.poll(POLL)) got.add(r);
        }
        return got;
    }

    static void printRecord(String step, ConsumerRecord<byte[], byte[]> r) {
        List<Object> hs = new ArrayList<>();
        for (Header x : r.headers()) hs.add(Arrays.asList(x.key(), s(x.value())));
        out(step, "partition", r.partition(), "offset", r.offset(), "key", s(r.key()),
                "value", r.value() == null ? null : (r.value().length > 100 ? "len:" + r.value().length : s(r.value())),
                "headers", hs, "timestamp", ts(r.timestamp()), "timestampType", r.timestampType().toString(),
                "leaderEpoch", String.valueOf(r.leaderEpoch()), "keySize", r.serializedKeySize(), "valueSize", r.serializedValueSize());
    }

    static Object ts(long t) {
        // the producer's clock (no explicit timestamp) is not comparable between runs
        return Math.abs(System.currentTimeMillis() - t) < 600_000 ? "now" : t;
    }

    static Map<String, Object> tpMap(Map<TopicPartition, Long> m) {
        Map<String, Object> r = new TreeMap<>();
        m.forEach((k, v) -> r.put(k.toString(), v));
        return r;
    }

    static Map<String, Object> oat(Map<TopicPartition, OffsetAndTimestamp> m) {
        Map<String, Object> r = new TreeMap<>();
        m.forEach((k, v) -> r.put(k.toString(), v == null ? null : v.offset() + "@" + ts(v.timestamp()) + " epoch=" + v.leaderEpoch()));
        return r;
    }

    static Map<String, Object> oam(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<String, Object> r = new TreeMap<>();
        m.forEach((k, v) -> r.put(k.toString(), v == null ? null : v.offset() + " '" + v.metadata() + "' epoch=" + v.leaderEpoch()));
        return r;
    }

    interface Call { void run() throws Exception; }

    static String errorOf(Call call) {
        try {
            call.run();
            return null;
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    static byte[] b(String s) { return s.getBytes(StandardCharsets.UTF_8); }

    static String s(byte[] b) { return b == null ? null : new String(b, StandardCharsets.UTF_8); }

    static final class AppInfoVersion {
        static String get() { return org.apache.kafka.common.utils.AppInfoParser.getVersion(); }
    }

    // ------------------------------------------------------------------------------ JSON out

    static void out(String step, Object... kv) {
        StringBuilder sb = new StringBuilder("{\"step\":");
        json(sb, step);
        for (int i = 0; i < kv.length; i += 2) {
            sb.append(',');
            json(sb, kv[i]);
            sb.append(':');
            json(sb, kv[i + 1]);
        }
        sb.append('}');
        System.out.println(sb);
        System.out.flush();
    }

    static void json(StringBuilder sb, Object v) {
        if (v == null) sb.append("null");
        else if (v instanceof Number || v instanceof Boolean) sb.append(v);
        else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) sb.append(',');
                first = false;
                json(sb, String.valueOf(e.getKey()));
                sb.append(':');
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Collection<?>) v) {
                if (!first) sb.append(',');
                first = false;
                json(sb, o);
            }
            sb.append(']');
        } else {
            String s = v.toString();
            sb.append('"');
            for (char ch : s.toCharArray()) {
                if (ch == '"' || ch == '\\') sb.append('\\').append(ch);
                else if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
                else sb.append(ch);
            }
            sb.append('"');
        }
    }
}
