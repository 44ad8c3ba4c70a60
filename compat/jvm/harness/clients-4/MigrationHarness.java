// KIP-848 online migration through kafka-clients 4.x, for the differential suite: what the
// consumers and the AdminClient observe, one JSON object per line.
//
//   java -cp <clients classpath>:<compiled> MigrationHarness <bootstrap> <prefix>
//
// A rolling upgrade then a rolling downgrade of one group on a topic of 6 partitions: three
// classic members (group.protocol=classic, the range assignor) settle; then one at a time a
// classic member closes and a group.protocol=consumer member (server assignor range) takes its
// place: the first one converts the classic group to a consumer group with classic members. Then
// the other way: one at a time a consumer-protocol member closes and a classic one takes its place;
// when the last consumer-protocol member leaves, the group is converted back to a classic group.
// Before each replacement 12 records are produced (2 a partition). After each step the group has
// settled: every partition assigned once, the group Stable with three members; printed are the
// group's type, each member's protocol as the AdminClient sees it (upgraded) and the sorted
// assignments. Every member commits after each poll and when partitions are revoked, so at the
// end every record was read exactly once and the committed offsets cover them all.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class MigrationHarness {
    static final long DEADLINE_MS = 60_000;
    static final Duration POLL = Duration.ofMillis(50);
    static final int PARTITIONS = 6;
    static String bootstrap;
    static String topic;
    static String group;
    static final Map<String, Integer> reads = new TreeMap<>();
    static int produced = 0;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        topic = args[1] + "-t";
        group = args[1] + "-g";
        Harness.out("start", "clientVersion", Harness.AppInfoVersion.get());
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(Map.of(
                     ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
                     ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName(),
                     ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName()))) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(30, TimeUnit.SECONDS);
            List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>();
            try {
                produce(producer);
                for (int i = 0; i < 3; i++) members.add(consumer(false));
                settle(admin, members, "classic");
                for (int i = 0; i < 3; i++) {  // the rolling upgrade, then the rolling downgrade
                    replace(admin, producer, members, i, true, "upgrade-" + (i + 1));
                }
                for (int i = 0; i < 3; i++) {
                    replace(admin, producer, members, i, false, "downgrade-" + (i + 1));
                }
                long deadline = System.currentTimeMillis() + DEADLINE_MS;  // the last records
                while (reads.size() < produced && System.currentTimeMillis() < deadline) {
                    for (KafkaConsumer<byte[], byte[]> c : members) poll(c);
                }
            } finally {
                for (KafkaConsumer<byte[], byte[]> c : members) close(c);
            }
            long committed = 0;
            for (OffsetAndMetadata o : admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS).values()) committed += o.offset();
            int twice = 0;
            for (int n : reads.values()) if (n > 1) twice++;
            Harness.out("consumed", "produced", produced, "read", reads.size(), "readTwice", twice,
                    "committedOffsetSum", committed);
        }
        Harness.out("end");
        System.out.flush();
        System.exit(0);
    }

    static void produce(KafkaProducer<byte[], byte[]> producer) throws Exception {
        for (int i = 0; i < 2 * PARTITIONS; i++) {
            producer.send(new ProducerRecord<>(topic, i % PARTITIONS, null, ("r" + produced).getBytes())).get(30, TimeUnit.SECONDS);
            produced++;
        }
    }

    static KafkaConsumer<byte[], byte[]> consumer(boolean consumerProtocol) {
        Map<String, Object> cfg = new HashMap<>();
        cfg.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cfg.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cfg.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cfg.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cfg.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cfg.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (consumerProtocol) {
            cfg.put("group.protocol", "consumer");
            cfg.put("group.remote.assignor", "range");
        } else {
            cfg.put("group.protocol", "classic");
            cfg.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName());
            cfg.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
            cfg.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10_000);
        }
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cfg);
        c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                if (!partitions.isEmpty()) c.commitSync(Duration.ofSeconds(30));
            }
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
        });
        return c;
    }

    /** One poll: the records read are counted, then committed. */
    static void poll(KafkaConsumer<byte[], byte[]> c) {
        ConsumerRecords<byte[], byte[]> records = c.poll(POLL);
        for (ConsumerRecord<byte[], byte[]> r : records) reads.merge(r.partition() + "@" + r.offset(), 1, Integer::sum);
        if (records.isEmpty()) return;
        try {
            c.commitSync(Duration.ofSeconds(30));
        } catch (RebalanceInProgressException | CommitFailedException e) {
            // committed by the revocation callback of the next poll
        }
    }

    static void close(KafkaConsumer<byte[], byte[]> c) {
        try {
            c.commitSync(Duration.ofSeconds(30));
        } catch (RuntimeException e) {
            // nothing read since the last commit, or no longer a member: nothing to commit
        }
        c.close(Duration.ofSeconds(30));
    }

    static void replace(Admin admin, KafkaProducer<byte[], byte[]> producer, List<KafkaConsumer<byte[], byte[]>> members,
                        int index, boolean consumerProtocol, String step) throws Exception {
        close(members.get(index));
        produce(producer);
        members.set(index, consumer(consumerProtocol));
        settle(admin, members, step);
    }

    /** Poll every member until their assignments cover the topic once and the group is described
     * Stable with them all; prints the group as it then is. */
    static void settle(Admin admin, List<KafkaConsumer<byte[], byte[]>> members, String step) throws Exception {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (System.currentTimeMillis() < deadline) {
            for (KafkaConsumer<byte[], byte[]> c : members) poll(c);
            Set<TopicPartition> union = new HashSet<>();
            int sum = 0;
            for (KafkaConsumer<byte[], byte[]> c : members) {
                union.addAll(c.assignment());
                sum += c.assignment().size();
            }
            if (union.size() != PARTITIONS || sum != PARTITIONS) continue;
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all()
                    .get(30, TimeUnit.SECONDS).get(group);
            if (!String.valueOf(d.groupState()).equalsIgnoreCase("STABLE") || d.members().size() != members.size()) continue;
            List<String> protocols = new ArrayList<>();
            for (MemberDescription m : d.members()) {
                protocols.add(m.upgraded().map(u -> u ? "consumer" : "classic").orElse("classic group"));
            }
            Collections.sort(protocols);
            List<List<Integer>> assignments = new ArrayList<>();
            for (KafkaConsumer<byte[], byte[]> c : members) {
                List<Integer> mine = new ArrayList<>();
                for (TopicPartition tp : c.assignment()) mine.add(tp.partition());
                Collections.sort(mine);
                assignments.add(mine);
            }
            assignments.sort(Comparator.comparing(Object::toString));
            Harness.out(step, "type", String.valueOf(d.type()), "members", protocols, "assignment", assignments);
            return;
        }
        throw new AssertionError("group " + group + " did not settle at " + step);
    }
}
