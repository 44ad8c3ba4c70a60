// kafka-clients 3.9: no SubscriptionPattern yet; the client matches a java.util.regex Pattern
// against the topics it knows and subscribes to their names.
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.KafkaConsumer;

final class RegexSubscribe {
    static final String HOW = "client";

    static void subscribe(KafkaConsumer<byte[], byte[]> consumer, String regex) {
        consumer.subscribe(Pattern.compile(regex));
    }

    private RegexSubscribe() {}
}
