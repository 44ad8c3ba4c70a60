// Transactions through kafka-clients (3.9 or 4.x), printed as Harness prints (one JSON line a step):
//
//   java -cp <clients classpath>:<compiled> TxnHarness <bootstrap> transactions <prefix>
//
// A transactional producer commits (two partitions), aborts, and leaves a transaction open, which
// read_committed and read_uncommitted consumers and endOffsets observe; the open one is then
// committed. A consume-transform-produce loop sends its consumer's offsets to each transaction
// (sendOffsetsToTransaction), and the group's committed offsets and the output are read back. A
// second producer with the same transactional id fences the first. The AdminClient lists and
// describes the transactions and describes the producers of a partition, with the producer epoch
// of the open (third) transaction: 0 for transactions v1 (3.x clients), 2 for transactions v2
// (4.x clients on a broker finalizing transaction.version 2: every commit and abort bumps it).

import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxnHarness {
    public static void main(String[] args) throws Exception {
        Harness.bootstrap = args[0];
        Harness.prefix = args[2];
        Harness.out("start", "clientVersion", Harness.AppInfoVersion.get());
        transactions();
        Harness.out("end");
        System.out.flush();
        System.exit(0);
    }

    static KafkaProducer<byte[], byte[]> producer(String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, Harness.bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    static List<String> readAll(List<TopicPartition> tps, String isolation, int expected) {
        try (KafkaConsumer<byte[], byte[]> c = Harness.consumer(null, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
            c.assign(tps);
            c.seekToBeginning(tps);
            List<ConsumerRecord<byte[], byte[]>> got = Harness.pollN(c, expected);
            // and nothing more arrives
            for (int i = 0; i < 5; i++) for (ConsumerRecord<byte[], byte[]> r : c.poll(Harness.POLL)) got.add(r);
            got.sort(Comparator.comparing((ConsumerRecord<byte[], byte[]> r) -> r.partition()).thenComparing(ConsumerRecord::offset));
            List<String> out = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : got) out.add(r.partition() + "@" + r.offset() + "=" + Harness.s(r.value()));
            Map<TopicPartition, Long> positions = new TreeMap<>(Comparator.comparing(TopicPartition::toString));
            for (TopicPartition tp : tps) positions.put(tp, c.position(tp));
            out.add("positions " + Harness.tpMap(positions));
            out.add("endOffsets " + Harness.tpMap(c.endOffsets(tps)));
            return out;
        }
    }

    static void transactions() throws Exception {
        String topic = Harness.prefix + "-txn", in = Harness.prefix + "-in", outTopic = Harness.prefix + "-out";
        try (Admin admin = Harness.admin()) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1), new NewTopic(in, 1, (short) 1),
                    new NewTopic(outTopic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        }
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        List<TopicPartition> both = List.of(p0, p1);
        String tid = Harness.prefix + "-tid";
        try (KafkaProducer<byte[], byte[]> producer = producer(tid)) {
            producer.beginTransaction();
            for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(topic, 0, Harness.b("k"), Harness.b("c" + i)));
            for (int i = 0; i < 3; i++) producer.send(new ProducerRecord<>(topic, 1, Harness.b("k"), Harness.b("d" + i)));
            producer.commitTransaction();
            Harness.out("committed");
            producer.beginTransaction();
            for (int i = 0; i < 4; i++) producer.send(new ProducerRecord<>(topic, 0, Harness.b("k"), Harness.b("a" + i)));
            producer.flush();
            producer.abortTransaction();
            Harness.out("aborted");
            producer.beginTransaction();
            for (int i = 0; i < 2; i++) producer.send(new ProducerRecord<>(topic, 0, Harness.b("k"), Harness.b("o" + i)));
            producer.flush();
            Harness.out("read_committed-open", "records", readAll(both, "read_committed", 8));
            Harness.out("read_uncommitted-open", "records", readAll(both, "read_uncommitted", 14));
            try (Admin admin = Harness.admin()) {
                TransactionDescription d = admin.describeTransactions(List.of(tid)).description(tid).get(30, TimeUnit.SECONDS);
                List<String> parts = new ArrayList<>();
                for (TopicPartition tp : d.topicPartitions()) parts.add(tp.toString());
                Collections.sort(parts);
                Harness.out("describeTransactions-open", "state", d.state().toString(), "epoch", d.producerEpoch(),
                        "timeoutMs", d.transactionTimeoutMs(),
                        "started", d.transactionStartTimeMs().isPresent(), "partitions", parts);
                List<String> listed = new ArrayList<>();
                for (TransactionListing l : admin.listTransactions().all().get(30, TimeUnit.SECONDS)) {
                    if (l.transactionalId().startsWith(Harness.prefix)) listed.add(l.transactionalId() + " " + l.state());
                }
                Collections.sort(listed);
                Harness.out("listTransactions", "transactions", listed);
                List<String> producers = new ArrayList<>();
                for (ProducerState s : admin.describeProducers(List.of(p0)).partitionResult(p0).get(30, TimeUnit.SECONDS).activeProducers()) {
                    producers.add("epoch=" + s.producerEpoch() + " lastSequence=" + s.lastSequence()
                            + " txnStart=" + s.currentTransactionStartOffset());
                }
                Harness.out("describeProducers", "producers", producers);
            }
            producer.commitTransaction();
            Harness.out("read_committed-after", "records", readAll(both, "read_committed", 10));
        }

        // consume-transform-produce
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, Harness.bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> plain = new KafkaProducer<>(pp)) {
            for (int i = 0; i < 10; i++) plain.send(new ProducerRecord<>(in, 0, null, Harness.b("m" + i)));
            plain.flush();
        }
        String group = Harness.prefix + "-ctp";
        int moved = 0;
        try (KafkaProducer<byte[], byte[]> producer = producer(Harness.prefix + "-ctp-tid");
             KafkaConsumer<byte[], byte[]> c = Harness.consumer(group, Map.of(
                     ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed", ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest"))) {
            c.subscribe(List.of(in));
            long deadline = System.currentTimeMillis() + Harness.DEADLINE_MS;
            while (moved < 10 && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Harness.POLL);
                if (recs.isEmpty()) continue;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    producer.send(new ProducerRecord<>(outTopic, 0, null, Harness.b(Harness.s(r.value()).toUpperCase())));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    moved++;
                }
                producer.sendOffsetsToTransaction(offsets, c.groupMetadata());
                producer.commitTransaction();
            }
        }
        Harness.out("ctp", "moved", moved);
        try (Admin admin = Harness.admin()) {
            Harness.out("ctp-committed", "offsets", Harness.oam(admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS)));
        }
        Harness.out("ctp-output", "records", readAll(List.of(new TopicPartition(outTopic, 0)), "read_committed", 10));

        // a second producer with the same transactional id fences the first
        String fenceId = Harness.prefix + "-fence";
        KafkaProducer<byte[], byte[]> zombie = producer(fenceId);
        zombie.beginTransaction();
        zombie.send(new ProducerRecord<>(topic, 1, null, Harness.b("zombie")));
        zombie.flush();
        try (KafkaProducer<byte[], byte[]> fresh = producer(fenceId)) {
            fresh.beginTransaction();
            fresh.send(new ProducerRecord<>(topic, 1, null, Harness.b("fresh")));
            fresh.commitTransaction();
            String error = Harness.errorOf(() -> {
                zombie.send(new ProducerRecord<>(topic, 1, null, Harness.b("late"))).get(30, TimeUnit.SECONDS);
                zombie.commitTransaction();
            });
            Harness.out("fenced", "error", error);
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }
        Harness.out("read_committed-final", "records", readAll(both, "read_committed", 11));
    }
}
