// Produce v0-2 as kafka-clients writes it: the request and the response of each version, built from
// Kafka's generated message classes (ProduceRequestData, ProduceResponseData) and written with
// MessageUtil, printed in hex, one JSON object per line. kafka-clients 3.9 is the last release with
// these versions; compat/test_produce_v0_2_schemas.py holds Samsa's own schemas for them
// (protocol/schemas/produce_v0_2.py, which kio cannot give) against these bytes.
//
//   java -cp <clients-3.9 classpath>:<compiled> WireSchemas

import java.nio.ByteBuffer;
import java.util.List;

import org.apache.kafka.common.message.ProduceRequestData;
import org.apache.kafka.common.message.ProduceResponseData;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.record.MemoryRecords;

public class WireSchemas {
    public static void main(String[] args) {
        Harness.out("start", "clientVersion", Harness.AppInfoVersion.get());
        for (short v = 0; v <= 2; v++) {
            Harness.out("produce-request", "version", (int) v, "hex", hex(MessageUtil.toByteBuffer(request(), v)));
            Harness.out("produce-response", "version", (int) v, "hex", hex(MessageUtil.toByteBuffer(response(), v)));
        }
        Harness.out("end");
    }

    /** Two topics; a partition with records (opaque bytes to the schema) and one with null records. */
    static ProduceRequestData request() {
        ProduceRequestData.TopicProduceDataCollection topics = new ProduceRequestData.TopicProduceDataCollection();
        topics.add(new ProduceRequestData.TopicProduceData().setName("orders").setPartitionData(List.of(
                new ProduceRequestData.PartitionProduceData().setIndex(0)
                        .setRecords(MemoryRecords.readableRecords(ByteBuffer.wrap(new byte[]{1, 2, 3, 4, 5}))),
                new ProduceRequestData.PartitionProduceData().setIndex(7).setRecords(null))));
        topics.add(new ProduceRequestData.TopicProduceData().setName("z").setPartitionData(List.of(
                new ProduceRequestData.PartitionProduceData().setIndex(2)
                        .setRecords(MemoryRecords.readableRecords(ByteBuffer.wrap(new byte[]{9}))))));
        return new ProduceRequestData().setAcks((short) -1).setTimeoutMs(1500).setTopicData(topics);
    }

    /** Throttle time (v1+) and log append time (v2+) set: the versions without them leave them out. */
    static ProduceResponseData response() {
        ProduceResponseData.TopicProduceResponseCollection topics = new ProduceResponseData.TopicProduceResponseCollection();
        topics.add(new ProduceResponseData.TopicProduceResponse().setName("orders").setPartitionResponses(List.of(
                new ProduceResponseData.PartitionProduceResponse().setIndex(0).setErrorCode((short) 0)
                        .setBaseOffset(42).setLogAppendTimeMs(1_700_000_000_123L),
                new ProduceResponseData.PartitionProduceResponse().setIndex(7).setErrorCode((short) 6)
                        .setBaseOffset(-1).setLogAppendTimeMs(-1))));
        return new ProduceResponseData().setThrottleTimeMs(250).setResponses(topics);
    }

    static String hex(ByteBuffer b) {
        StringBuilder sb = new StringBuilder();
        while (b.hasRemaining()) sb.append(String.format("%02x", b.get() & 0xff));
        return sb.toString();
    }
}
