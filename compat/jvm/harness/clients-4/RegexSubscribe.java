// kafka-clients 4.x: a KIP-848 regular expression subscription, evaluated by the broker (RE2J).
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;

final class RegexSubscribe {
    static final String HOW = "broker";

    static void subscribe(KafkaConsumer<byte[], byte[]> consumer, String regex) {
        consumer.subscribe(new SubscriptionPattern(regex));
    }

    private RegexSubscribe() {}
}
