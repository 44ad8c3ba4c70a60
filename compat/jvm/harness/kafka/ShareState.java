// Share-group state with Apache Kafka's own classes from its share-coordinator jar, for
// compat/test_share_state.py to hold Samsa's broker/share/ to them. One JSON line per argument:
//
//   combine=<start>;<batches so far>;<new batches>   (batches: first-last-state-count, comma-separated)
//       PersisterStateBatchCombiner's answer, in the same notation
//   <ShareSnapshotKey|ShareSnapshotValue|ShareUpdateKey|ShareUpdateValue>=<hex>
//       the record as Kafka reads it (toString) and how many bytes it left over
//
//   java -cp <kafka broker classpath>:<compiled> ShareState <arg> ...

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.coordinator.share.PersisterStateBatchCombiner;
import org.apache.kafka.coordinator.share.generated.*;
import org.apache.kafka.server.share.persister.PersisterStateBatch;

public class ShareState {
    static List<PersisterStateBatch> batches(String s) {
        List<PersisterStateBatch> out = new ArrayList<>();
        if (s.isEmpty()) return out;
        for (String b : s.split(",")) {
            String[] f = b.split("-");
            out.add(new PersisterStateBatch(Long.parseLong(f[0]), Long.parseLong(f[1]), Byte.parseByte(f[2]), Short.parseShort(f[3])));
        }
        return out;
    }

    public static void main(String[] args) {
        for (String arg : args) {
            String name = arg.substring(0, arg.indexOf('='));
            String rest = arg.substring(arg.indexOf('=') + 1);
            if (name.equals("combine")) {
                String[] parts = rest.split(";", -1);
                List<PersisterStateBatch> result = new PersisterStateBatchCombiner(
                    batches(parts[1]), batches(parts[2]), Long.parseLong(parts[0])).combineStateBatches();
                StringBuilder sb = new StringBuilder();
                for (PersisterStateBatch b : result) {
                    if (sb.length() > 0) sb.append(',');
                    sb.append(b.firstOffset()).append('-').append(b.lastOffset()).append('-')
                        .append(b.deliveryState()).append('-').append(b.deliveryCount());
                }
                Harness.out("combine", "case", rest, "result", sb.toString());
                continue;
            }
            byte[] b = new byte[rest.length() / 2];
            for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(rest.substring(2 * i, 2 * i + 2), 16);
            ByteBuffer buf = ByteBuffer.wrap(b);
            short version = buf.getShort();
            ByteBufferAccessor in = new ByteBufferAccessor(buf);
            Object read;
            switch (name) {
                case "ShareSnapshotKey": read = new ShareSnapshotKey(in, (short) 0); break;
                case "ShareUpdateKey": read = new ShareUpdateKey(in, (short) 0); break;
                case "ShareSnapshotValue": read = new ShareSnapshotValue(in, version); break;
                case "ShareUpdateValue": read = new ShareUpdateValue(in, version); break;
                default: throw new IllegalArgumentException(name);
            }
            Harness.out(name, "version", version, "left", buf.remaining(), "read", read.toString());
        }
        Harness.out("end");
        System.out.flush();
        System.exit(0);
    }
}
