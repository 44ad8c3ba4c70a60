// KIP-848 consumer groups (group.protocol=consumer) through kafka-clients 3.9 or 4.x, for the
// differential suite: what the consumers and the AdminClient observe, one JSON object per line.
//
//   java -cp <clients classpath>:<compiled> ConsumerProtocolHarness <bootstrap> <prefix>
//
// For each server assignor (range, uniform): three members subscribe by topic names to two topics
// (6 and 3 partitions) and the test waits until the group is Stable with all nine partitions
// assigned once; then one member leaves and the two others take its partitions. The range
// assignor's answer is printed whole (which member gets which range depends on the random member
// ids, so as a sorted list of assignments); the uniform assignor's as its balance (sizes). One
// member consumes and commits; after every member closed, a member subscribing by regular
// expression resumes at the committed offsets. The AdminClient describes and lists the groups.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ConsumerProtocolHarness {
    static final long DEADLINE_MS = 60_000;
    static final Duration POLL = Duration.ofMillis(100);
    static String bootstrap;
    static String prefix;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        prefix = args[1];
        Harness.out("start", "clientVersion", Harness.AppInfoVersion.get());
        String a = prefix + "-a", b = prefix + "-b";
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(a, 6, (short) 1), new NewTopic(b, 3, (short) 1)))
                    .all().get(30, TimeUnit.SECONDS);
        }
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName(),
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName()))) {
            for (int i = 0; i < 6; i++) p.send(new ProducerRecord<>(a, i, null, ("r" + i).getBytes())).get(30, TimeUnit.SECONDS);
        }
        for (String assignor : new String[] {"range", "uniform"}) {
            rebalances(assignor, List.of(a, b));
        }
        commitAndResume(a);
        Harness.out("end");
        System.out.flush();
        System.exit(0);
    }

    static KafkaConsumer<byte[], byte[]> consumer(String group, String assignor) {
        Map<String, Object> cfg = new HashMap<>();
        cfg.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cfg.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cfg.put("group.protocol", "consumer");
        cfg.put("group.remote.assignor", assignor);
        cfg.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cfg.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cfg.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cfg.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(cfg);
    }

    static Admin admin() {
        return Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
    }

    static String name(TopicPartition tp) {
        return tp.topic().substring(prefix.length() + 1) + "-" + tp.partition();
    }

    static List<String> names(Collection<TopicPartition> tps) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : tps) out.add(name(tp));
        Collections.sort(out);
        return out;
    }

    /** Poll every member until their assignments cover `total` partitions exactly once and the
     * group is described Stable with them all; returns each member's sorted assignment. */
    static List<List<String>> settle(Admin admin, String group, List<KafkaConsumer<byte[], byte[]>> members, int total)
            throws Exception {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (System.currentTimeMillis() < deadline) {
            for (KafkaConsumer<byte[], byte[]> c : members) c.poll(POLL);
            Set<TopicPartition> union = new HashSet<>();
            int sum = 0;
            for (KafkaConsumer<byte[], byte[]> c : members) {
                union.addAll(c.assignment());
                sum += c.assignment().size();
            }
            if (union.size() != total || sum != total) continue;
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all()
                    .get(30, TimeUnit.SECONDS).get(group);
            if (!String.valueOf(Harness.groupState(d)).equalsIgnoreCase("STABLE") || d.members().size() != members.size()) continue;
            List<List<String>> out = new ArrayList<>();
            for (KafkaConsumer<byte[], byte[]> c : members) out.add(names(c.assignment()));
            out.sort(Comparator.comparing(Object::toString));
            return out;
        }
        throw new AssertionError("group " + group + " did not settle");
    }

    static List<Integer> sizes(List<List<String>> assignments) {
        List<Integer> out = new ArrayList<>();
        for (List<String> a : assignments) out.add(a.size());
        Collections.sort(out);
        return out;
    }

    static void rebalances(String assignor, List<String> topics) throws Exception {
        String group = prefix + "-g-" + assignor;
        List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>();
        try (Admin admin = admin()) {
            for (int i = 0; i < 3; i++) {
                KafkaConsumer<byte[], byte[]> c = consumer(group, assignor);
                c.subscribe(topics);
                members.add(c);
            }
            List<List<String>> three = settle(admin, group, members, 9);
            Harness.out("three-members", "assignor", assignor, "sizes", sizes(three),
                    "assignment", assignor.equals("range") ? three : "balanced");
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all()
                    .get(30, TimeUnit.SECONDS).get(group);
            Harness.out("describe", "assignor", d.partitionAssignor(), "members", d.members().size(),
                    "simple", d.isSimpleConsumerGroup(), "state", String.valueOf(Harness.groupState(d)));
            members.remove(2).close();
            List<List<String>> two = settle(admin, group, members, 9);
            Harness.out("member-left", "assignor", assignor, "sizes", sizes(two),
                    "assignment", assignor.equals("range") ? two : "balanced");
        } finally {
            for (KafkaConsumer<byte[], byte[]> c : members) c.close();
        }
    }

    static void commitAndResume(String topic) throws Exception {
        String group = prefix + "-g-resume";
        int read = 0;
        try (KafkaConsumer<byte[], byte[]> c = consumer(group, "uniform")) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (System.currentTimeMillis() < deadline && read < 6) read += c.poll(POLL).count();
            c.commitSync(Duration.ofSeconds(30));
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment(), Duration.ofSeconds(30));
            long sum = 0;
            for (OffsetAndMetadata o : committed.values()) sum += o == null ? 0 : o.offset();
            Harness.out("committed", "records", read, "offsetSum", sum, "generation", c.groupMetadata().generationId() > 0);
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer(group, "uniform")) {
            RegexSubscribe.subscribe(c, prefix + "-[a]");
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            int n = 0;
            while (System.currentTimeMillis() < deadline && c.assignment().size() < 6) n += c.poll(POLL).count();
            n += c.poll(Duration.ofMillis(500)).count();
            long positions = 0;
            for (TopicPartition tp : c.assignment()) positions += c.position(tp, Duration.ofSeconds(30));
            Harness.out("resumed", "regex", RegexSubscribe.HOW, "assignment", names(c.assignment()), "records", n,
                    "positionSum", positions);
        }
        try (Admin admin = admin()) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all()
                    .get(30, TimeUnit.SECONDS).get(group);
            Harness.out("describe-empty", "members", d.members().size(), "state", String.valueOf(Harness.groupState(d)));
            List<String> listed = new ArrayList<>();
            for (ConsumerGroupListing l : admin.listConsumerGroups().all().get(30, TimeUnit.SECONDS)) {
                if (l.groupId().startsWith(prefix)) listed.add(l.groupId().substring(prefix.length()));
            }
            Collections.sort(listed);
            Harness.out("listed", "groups", listed);
            Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            Harness.out("admin-offsets", "partitions", offs.size());
        }
    }
}
