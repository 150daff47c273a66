package org.apache.kafka.common.utils;

/**
 * The Connect plugins at 4.3.1 (connect-file, connect-mirror: Maven Central serves none at
 * 4.4.0) call org.apache.kafka.common.utils.AppInfoParser, which kafka-clients 4.4.0 moved
 * to org.apache.kafka.common.utils.internals. Without this the 4.4.0 Connect worker cannot
 * read their versions and fails to create their connectors (NoClassDefFoundError). Only the
 * calls those jars make are here, delegating to 4.4.0's class. Remove it once the plugins
 * are served at 4.4.0.
 */
public final class AppInfoParser {
    private AppInfoParser() {
    }

    public static String getVersion() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getVersion();
    }

    public static String getCommitId() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getCommitId();
    }
}
