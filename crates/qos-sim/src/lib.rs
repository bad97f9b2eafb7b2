//! qos-sim (arrives with its issue).
