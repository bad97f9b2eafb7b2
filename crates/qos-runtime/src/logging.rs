//! Structured logs for the manager and the agent: `tracing` events to stderr, filtered
//! by `RUST_LOG` (default `info`), as text or, with `CLUSTERQOS_LOG=json`, one JSON
//! object per line for log collectors.

/// Installs the process-wide subscriber; a second call does nothing.
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = std::env::var("CLUSTERQOS_LOG").is_ok_and(|v| v == "json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
