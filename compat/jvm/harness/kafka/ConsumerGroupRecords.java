// Reads KIP-848 consumer group records (key or value bytes, hex) with Apache Kafka's own generated
// classes from its group-coordinator jar, and prints what Kafka reads, one JSON line per record:
// compat/test_consumer_protocol.py holds Samsa's broker/coordinator/consumer_records.py to them.
//
//   java -cp <kafka broker classpath>:<compiled> ConsumerGroupRecords <name>[#<label>]=<hex> ...
// (<name> is the record class; a label tells several records of one class apart)

import java.nio.ByteBuffer;

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.coordinator.group.generated.*;

public class ConsumerGroupRecords {
    public static void main(String[] args) {
        for (String arg : args) {
            String name = arg.substring(0, arg.indexOf('='));
            String hex = arg.substring(arg.indexOf('=') + 1);
            byte[] b = new byte[hex.length() / 2];
            for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
            ByteBuffer buf = ByteBuffer.wrap(b);
            short version = buf.getShort();
            ByteBufferAccessor in = new ByteBufferAccessor(buf);
            Object read;
            switch (name.split("#")[0]) {
                case "ConsumerGroupMetadataKey": read = new ConsumerGroupMetadataKey(in, (short) 0); break;
                case "ConsumerGroupMemberMetadataKey": read = new ConsumerGroupMemberMetadataKey(in, (short) 0); break;
                case "ConsumerGroupMetadataValue": read = new ConsumerGroupMetadataValue(in, version); break;
                case "ConsumerGroupMemberMetadataValue": read = new ConsumerGroupMemberMetadataValue(in, version); break;
                case "ConsumerGroupTargetAssignmentMetadataValue": read = new ConsumerGroupTargetAssignmentMetadataValue(in, version); break;
                case "ConsumerGroupTargetAssignmentMemberValue": read = new ConsumerGroupTargetAssignmentMemberValue(in, version); break;
                case "ConsumerGroupCurrentMemberAssignmentValue": read = new ConsumerGroupCurrentMemberAssignmentValue(in, version); break;
                case "ConsumerGroupRegularExpressionKey": read = new ConsumerGroupRegularExpressionKey(in, (short) 0); break;
                case "ConsumerGroupRegularExpressionValue": read = new ConsumerGroupRegularExpressionValue(in, version); break;
                default: throw new IllegalArgumentException(name);
            }
            Harness.out(name, "version", version, "left", buf.remaining(), "read", read.toString());
        }
        Harness.out("end");
        System.out.flush();
        System.exit(0);
    }
}
