//! A follower's watch on the leading replica's process: a leader that *died* (kill -9,
//! a crash, an exit without resigning) is replaced at once, not an election TTL later.
//!
//! The election lease is how replicas learn that a leader is gone whatever happened to
//! it — dead, stopped, cut off, or only slow — and it can only run out a TTL after the
//! last refresh (etcd's minimum is 1.5 × its own election timeout, 2 s by default; its
//! expiry check runs every 500 ms). Shortening it makes every hiccup of the leader's
//! keep-alive (a CPU stall, an etcd member election, a busy disk) a failover.
//!
//! A process that died gives a sharper signal: the kernel refuses connections to its
//! port. So each follower connects to the leader's advertised address every
//! [`Config::leader_probe`](super::config::Config) (100 ms): once the leader has
//! accepted a connection in its term, two refusals in a row mean nothing listens
//! there any more, and the follower revokes the leader's election lease — which
//! deletes its election key, so the oldest replica waiting is elected now.
//!
//! Only a refusal counts. A leader that is stopped (SIGSTOP: the kernel still accepts
//! connections for it), overloaded or behind a partition (connections time out) is
//! left to its lease, as before; and a leader that never accepted a connection from
//! this follower (a wrong `--advertise`, a firewall) is never revoked by it. Revoking
//! the lease of a leader that is in fact alive is safe — its commits are fenced and it
//! steps down — it only costs a failover. Safety never rests on this watch.

use std::time::Duration;

use etcd_client::Client;

/// What a connection attempt to the leader found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Accepted,
    Refused,
    /// Timed out, unreachable, a name that does not resolve: no verdict.
    Unknown,
}

async fn probe(host: &str, port: u16, limit: Duration) -> Probe {
    match tokio::time::timeout(limit, tokio::net::TcpStream::connect((host, port))).await {
        Ok(Ok(_)) => Probe::Accepted,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Probe::Refused,
        _ => Probe::Unknown,
    }
}

/// The host and port of an advertised `http://` or `https://` URL.
fn host_port(url: &str) -> Option<(String, u16)> {
    let uri: hyper::Uri = url.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().or(match uri.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    })?;
    Some((host.to_string(), port))
}

/// Refusals in a row, after an accepted connection, that make a leader dead.
const REFUSALS: u32 = 2;

/// Watches the leader at `url` holding election lease `lease`, probing every `every`;
/// revokes the lease once the leader's process is provably gone (see the module).
/// Returns after revoking, or never (the caller aborts it when the leader changes).
pub async fn watch(client: Client, url: String, lease: i64, every: Duration) {
    let Some((host, port)) = host_port(&url) else {
        tracing::debug!(%url, "the leader's URL names no host and port: not watched");
        return;
    };
    let mut seen_alive = false;
    let mut refused = 0;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match probe(&host, port, every.max(Duration::from_millis(50))).await {
            Probe::Accepted => {
                seen_alive = true;
                refused = 0;
            }
            Probe::Refused if seen_alive => {
                refused += 1;
                if refused >= REFUSALS {
                    break;
                }
            }
            Probe::Refused | Probe::Unknown => refused = 0,
        }
    }
    tracing::warn!(%url, lease,
        "the leader's address refuses connections: its process is gone; revoking its election lease");
    let mut leases = client.lease_client();
    for _ in 0..20 {
        match leases.revoke(lease).await {
            Ok(_) => return,
            Err(e) if e.to_string().contains("not found") => return,
            Err(e) => tracing::debug!(error = %e, "revoking the dead leader's lease"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_urls_give_host_and_port() {
        assert_eq!(
            host_port("http://127.0.0.1:8080"),
            Some(("127.0.0.1".into(), 8080))
        );
        assert_eq!(
            host_port("https://manager.example:9443/"),
            Some(("manager.example".into(), 9443))
        );
        assert_eq!(host_port("https://[::1]"), Some(("::1".into(), 443)));
        assert_eq!(host_port("http://m"), Some(("m".into(), 80)));
        assert_eq!(host_port("not a url"), None);
    }

    #[test]
    fn a_closed_port_is_refused_and_a_listening_one_accepted() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = l.local_addr().unwrap().port();
            let limit = Duration::from_secs(1);
            assert_eq!(probe("127.0.0.1", port, limit).await, Probe::Accepted);
            // A port bound but not listening (held, so no other process can take it
            // meanwhile): what a dead process's port looks like to a connection.
            use rustix::net::{bind, socket, AddressFamily, SocketType};
            let s = socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
            bind(&s, &"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap()).unwrap();
            let closed = std::net::SocketAddr::try_from(rustix::net::getsockname(&s).unwrap())
                .unwrap()
                .port();
            assert_eq!(probe("127.0.0.1", closed, limit).await, Probe::Refused);
        });
    }
}
