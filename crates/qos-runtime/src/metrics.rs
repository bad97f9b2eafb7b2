//! Counters of the master, rendered in the Prometheus text exposition format on
//! `GET /metrics` together with per-resource utilisation read from the books.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::protocol::StatusReport;

/// Monotonic counters (all relaxed atomics: they are statistics).
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests by endpoint: register, heartbeat, events, request, release, flows, status.
    pub requests: [AtomicU64; 7],
    /// Premium grants.
    pub grants_premium: AtomicU64,
    /// Best-effort registrations.
    pub grants_best_effort: AtomicU64,
    /// Rejections by criterion: [bmax, 1 source node, 2 switch port, 3 destination node].
    pub rejections: [AtomicU64; 4],
    /// Releases asked by clients.
    pub releases: AtomicU64,
    /// Flows released because a lease expired.
    pub lease_expiries: AtomicU64,
    /// Error replies (bad input, auth, version, ownership).
    pub errors: AtomicU64,
    /// IDT update events pushed to agents.
    pub pushes: AtomicU64,
    /// Event streams that fell behind and were re-synced with a snapshot.
    pub resyncs: AtomicU64,
    /// Connections closed before they authenticated, to make room (too many waiting).
    pub evictions: AtomicU64,
    /// Connections refused with 503 (the connection cap reached).
    pub refusals: AtomicU64,
    /// Connections closed for sending no complete request in time.
    pub timeouts: AtomicU64,
}

/// Index into [`Metrics::requests`].
#[derive(Debug, Clone, Copy)]
pub enum Endpoint {
    /// `register`.
    Register = 0,
    /// `heartbeat`.
    Heartbeat = 1,
    /// `events`.
    Events = 2,
    /// `flows` (request).
    Request = 3,
    /// `flows/release`.
    Release = 4,
    /// `GET flows`.
    Flows = 5,
    /// `status`.
    Status = 6,
}

const ENDPOINTS: [&str; 7] = [
    "register",
    "heartbeat",
    "events",
    "request",
    "release",
    "flows",
    "status",
];
const CRITERIA: [&str; 4] = ["bmax", "source-node", "switch-port", "destination-node"];

impl Metrics {
    /// Counts one request to `e`.
    pub fn hit(&self, e: Endpoint) {
        self.requests[e as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The exposition text; `status` gives the per-resource utilisation.
    pub fn render(&self, status: &StatusReport) -> String {
        let mut s = String::with_capacity(4096 + status.resources.len() * 96);
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        s.push_str("# HELP clusterqos_requests_total Requests received, by endpoint.\n");
        s.push_str("# TYPE clusterqos_requests_total counter\n");
        for (i, e) in ENDPOINTS.iter().enumerate() {
            let _ = writeln!(
                s,
                "clusterqos_requests_total{{endpoint=\"{e}\"}} {}",
                get(&self.requests[i])
            );
        }
        s.push_str("# HELP clusterqos_grants_total Flows granted, by class.\n");
        s.push_str("# TYPE clusterqos_grants_total counter\n");
        let _ = writeln!(
            s,
            "clusterqos_grants_total{{class=\"premium\"}} {}",
            get(&self.grants_premium)
        );
        let _ = writeln!(
            s,
            "clusterqos_grants_total{{class=\"best_effort\"}} {}",
            get(&self.grants_best_effort)
        );
        s.push_str("# HELP clusterqos_rejections_total Premium requests refused, by admission criterion.\n");
        s.push_str("# TYPE clusterqos_rejections_total counter\n");
        for (i, c) in CRITERIA.iter().enumerate() {
            let _ = writeln!(
                s,
                "clusterqos_rejections_total{{criterion=\"{c}\"}} {}",
                get(&self.rejections[i])
            );
        }
        for (name, help, v) in [
            (
                "clusterqos_releases_total",
                "Flows released by their owners.",
                &self.releases,
            ),
            (
                "clusterqos_lease_expiries_total",
                "Flows released because their owner's lease expired.",
                &self.lease_expiries,
            ),
            (
                "clusterqos_errors_total",
                "Error replies (bad input, authentication, version, ownership).",
                &self.errors,
            ),
            (
                "clusterqos_idt_pushes_total",
                "IDT update events pushed to agents.",
                &self.pushes,
            ),
            (
                "clusterqos_stream_resyncs_total",
                "Event streams that fell behind and were re-synced with a snapshot.",
                &self.resyncs,
            ),
            (
                "clusterqos_connections_evicted_total",
                "Connections closed before authenticating, to make room for new ones.",
                &self.evictions,
            ),
            (
                "clusterqos_connections_refused_total",
                "Connections refused with 503 at the connection cap.",
                &self.refusals,
            ),
            (
                "clusterqos_connections_timed_out_total",
                "Connections closed for sending no complete request in time.",
                &self.timeouts,
            ),
        ] {
            let _ = writeln!(
                s,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                get(v)
            );
        }
        s.push_str(
            "# HELP clusterqos_flows Flows held, by class.\n# TYPE clusterqos_flows gauge\n",
        );
        let _ = writeln!(
            s,
            "clusterqos_flows{{class=\"premium\"}} {}",
            status.premium_flows
        );
        let _ = writeln!(
            s,
            "clusterqos_flows{{class=\"best_effort\"}} {}",
            status.best_effort_flows
        );
        let labels = |r: &crate::protocol::ResourceStatus| {
            format!(
                "kind=\"{}\",name=\"{}\",direction=\"{}\"",
                r.kind, r.name, r.direction
            )
        };
        s.push_str(
            "# HELP clusterqos_reserved_bytes_per_second Premium reservations per resource.\n",
        );
        s.push_str("# TYPE clusterqos_reserved_bytes_per_second gauge\n");
        for r in &status.resources {
            let _ = writeln!(
                s,
                "clusterqos_reserved_bytes_per_second{{{}}} {}",
                labels(r),
                r.reserved
            );
        }
        s.push_str("# HELP clusterqos_utilisation Reserved fraction of a resource's capacity.\n");
        s.push_str("# TYPE clusterqos_utilisation gauge\n");
        for r in &status.resources {
            if let Some(c) = r.capacity.filter(|&c| c > 0) {
                let _ = writeln!(
                    s,
                    "clusterqos_utilisation{{{}}} {:.6}",
                    labels(r),
                    r.reserved as f64 / c as f64
                );
            }
        }
        s
    }
}
