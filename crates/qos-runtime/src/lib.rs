//! qos-runtime (arrives with its issue).
