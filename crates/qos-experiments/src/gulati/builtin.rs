//! The scenarios of `reproduce gulati`, embedded in the binary so that reproducing the
//! thesis needs no files; the same files ship in `scenarios/gulati/`.

/// (name, file text) of every shipped scenario, in the thesis's order.
pub const GULATI: &[(&str, &str)] = &[
    (
        "overhead",
        include_str!("../../../../scenarios/gulati/overhead.toml"),
    ),
    (
        "idt-sweep",
        include_str!("../../../../scenarios/gulati/idt-sweep.toml"),
    ),
    (
        "receive-vs-send",
        include_str!("../../../../scenarios/gulati/receive-vs-send.toml"),
    ),
    (
        "two-senders-one-node",
        include_str!("../../../../scenarios/gulati/two-senders-one-node.toml"),
    ),
    (
        "three-flows-one-node",
        include_str!("../../../../scenarios/gulati/three-flows-one-node.toml"),
    ),
    (
        "two-sources-one-destination",
        include_str!("../../../../scenarios/gulati/two-sources-one-destination.toml"),
    ),
    (
        "send-and-receive",
        include_str!("../../../../scenarios/gulati/send-and-receive.toml"),
    ),
    (
        "mpi-level",
        include_str!("../../../../scenarios/gulati/mpi-level.toml"),
    ),
    (
        "best-effort-one",
        include_str!("../../../../scenarios/gulati/best-effort-one.toml"),
    ),
    (
        "best-effort-two",
        include_str!("../../../../scenarios/gulati/best-effort-two.toml"),
    ),
    (
        "network-contention",
        include_str!("../../../../scenarios/gulati/network-contention.toml"),
    ),
];

/// The text of a shipped scenario.
pub fn find(name: &str) -> Option<&'static str> {
    GULATI.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Names of the shipped scenarios.
pub fn names() -> Vec<&'static str> {
    GULATI.iter().map(|(n, _)| *n).collect()
}
