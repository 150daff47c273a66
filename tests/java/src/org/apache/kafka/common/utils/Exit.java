package org.apache.kafka.common.utils;

/**
 * connect-mirror 4.3.1 calls org.apache.kafka.common.utils.Exit, which kafka-clients 4.4.0
 * moved to org.apache.kafka.common.utils.internals (see AppInfoParser here). Only the calls
 * that jar makes, delegating to 4.4.0's class.
 */
public final class Exit {
    private Exit() {
    }

    public static void exit(int statusCode) {
        org.apache.kafka.common.utils.internals.Exit.exit(statusCode);
    }

    public static void addShutdownHook(String name, Runnable runnable) {
        org.apache.kafka.common.utils.internals.Exit.addShutdownHook(name, runnable);
    }
}
